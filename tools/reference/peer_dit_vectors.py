"""The reference's DiT forward timed under two initializations of its 1-D parameters, in one process.

../shared/bench/peer_dit.py times diffusers' MiniMaxH3Transformer3DModel with N(0, 0.02) matrices and every 1-D
parameter zero. Zero norm weights make q and k exactly zero after the per-head RMSNorm and every row of a modality
identical after norm1/norm2 (the AdaLN shift alone), so the tensor cores see constant operands and draw less power:
the H200 then holds higher clocks than on real activations. This script builds the same model once and times it
with `--vectors zero` (peer_dit.py's initialization) and `--vectors random` (norm weights N(1, 0.05), biases
N(0, 0.02): what our bench_dit draws), so the bias of the zero initialization is measured on the reference itself.

    python3 tools/reference/peer_dit_vectors.py [--diffusers .ref] [--vectors zero,random] [--shapes ...] [--reps 3]

Prints one JSON line per (vectors, shape) and writes $OUT/peer_dit_vectors.json.
"""
import argparse
import json
import math
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

ap = argparse.ArgumentParser()
ap.add_argument("--diffusers", default=os.path.join(os.getcwd(), ".ref"), help="folder holding the diffusers package")
ap.add_argument("--shapes", default="512x512x22,864x480x124,1344x768x124")
ap.add_argument("--vectors", default="zero,random")
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--text-rows", type=int, default=36)
args = ap.parse_args()
sys.path.insert(0, args.diffusers)
from diffusers import MiniMaxH3Transformer3DModel  # noqa: E402


def packed_inputs(w, h, frames, n_text):
    """peer_dit.py's packed sequence: text rows, audio rows (timestep index 1), the video latent grid (index 0)."""
    n = max(0, math.ceil((frames - 5) / 17))
    frames = 17 * n + 5
    n_audio = 2 * math.ceil(frames / 24 * 32000 / 800)
    vf, vh, vw = 5 * n + 2, h // 32, w // 32
    n_video = vf * vh * vw
    L = n_text + n_audio + n_video
    ti, ai = torch.arange(n_text), torch.arange(n_text, n_text + n_audio)
    vi = torch.arange(n_text + n_audio, L)
    tags = torch.zeros(L, dtype=torch.long)
    tags[ti], tags[ai] = 1, 2
    tidx = torch.zeros(L, dtype=torch.long)
    tidx[ai] = 1
    pos = torch.zeros(L, 3)
    pos[ti, 0] = torch.arange(n_text).float()
    pos[ai, 0] = torch.arange(n_audio).float()
    grid = torch.meshgrid(torch.arange(vf), torch.arange(vh), torch.arange(vw), indexing="ij")
    pos[vi] = torch.stack(grid, -1).reshape(-1, 3).float()
    d = {k: v.cuda() for k, v in dict(timestep=torch.tensor([0.3, 0.5]), timestep_indices=tidx, token_tags=tags,
                                      position_ids=pos, video_indices=vi, audio_indices=ai, text_indices=ti).items()}
    d["hidden_states"] = torch.randn(1, n_video, 96, device="cuda")
    d["audio_hidden_states"] = torch.randn(1, n_audio, 32, device="cuda")
    d["encoder_hidden_states"] = torch.randn(1, n_text, 5120, device="cuda", dtype=torch.bfloat16)
    return L, d


def initialize(model, vectors):
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim >= 2:
                p.normal_(0.0, 0.02)
            elif vectors == "zero":
                p.zero_()
            elif "norm" in name and name.endswith("weight"):
                p.normal_(1.0, 0.05)
            else:
                p.normal_(0.0, 0.02)


def median_time(fn, reps):
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    return sorted(ts)[len(ts) // 2], ts


torch.set_default_dtype(torch.bfloat16)
with torch.device("cuda"):
    model = MiniMaxH3Transformer3DModel()
torch.set_default_dtype(torch.float32)
for name in ["proj_in", "audio_proj_in", "time_embedder", "proj_out", "audio_proj_out"]:
    getattr(model, name).float()
model.eval()
results = []
for vectors in args.vectors.split(","):
    initialize(model, vectors)
    for shape in args.shapes.split(","):
        w, h, f = map(int, shape.split("x"))
        L, inp = packed_inputs(w, h, f, args.text_rows)
        with torch.no_grad(), sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            out = model(**inp, return_dict=False)
            finite = bool(all(torch.isfinite(o).all() for o in out if torch.is_tensor(o)))
            med, ts = median_time(lambda: model(**inp, return_dict=False), args.reps)
        r = {"vectors": vectors, "shape": shape, "L": L, "median_s": med, "all_s": ts, "finite": finite}
        results.append(r)
        print(json.dumps(r), flush=True)
json.dump(results, open(os.path.join(os.environ.get("OUT", "."), "peer_dit_vectors.json"), "w"), indent=1)
