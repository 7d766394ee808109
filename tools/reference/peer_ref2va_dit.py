"""Peer baseline for ref2va's per-pass time: diffusers' MiniMaxH3Transformer3DModel (released size, random weights,
bf16 as the pipeline loads it, on one GPU) on exactly the packed sequences h3 timed — the layouts
`bench_ref2va --export-layouts DIR` wrote (DIR/t2va.safetensors, DIR/ref2va.safetensors: token_tags, position_ids in
float64 as the reference's layout step builds them, the video/audio/text index sets, the distinct timesteps of one
pass and every row's index into them).

    OUT=DIR DIFFUSERS=DIR python3 tools/reference/peer_ref2va_dit.py --layouts LAYOUTS [--names t2va,ref2va]
        [--backend cudnn] [--reps 2] [--warmup 1]

The model is built and initialized as ../shared/bench/peer_dit.py does (bf16 under the default dtype, matrices
N(0, 0.02), norm weights 1 + N(0, 0.05), other 1-D weights N(0, 0.02), the patch projections, the time embedder and
the heads in float32 as `_keep_in_fp32_modules` keeps them); inputs: random video rows [1, Nv, 96] and audio rows
[1, Na, 32] in float32, text [1, Nt, 5120] in bf16. One forward per pass, CUDA events, median of --reps after
--warmup, under torch's SDPA backend --backend (peer_dit.py's default in scripts/gpu/run.sh: cudnn). Writes
$OUT/peer_ref2va_dit.json and prints one `JSON {...}` line per layout. Needs ~70 GB of the GPU plus the activations:
run it after h3's benchmark has exited.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

SAFETENSORS_DTYPES = {"F64": np.float64, "F32": np.float32, "I64": np.int64, "I32": np.int32}


def read_safetensors(path):
    """The tensors of one safetensors file as numpy arrays (the format: u64 header length, JSON header, data)."""
    with open(path, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = SAFETENSORS_DTYPES[info["dtype"]]
        out[name] = np.frombuffer(blob[base + begin:base + end], dtype=dtype).reshape(info["shape"])
    return out


def layout_inputs(arrays, device):
    """The reference's structural arguments from one exported layout, on the device."""
    t = {k: torch.from_numpy(np.array(v)) for k, v in arrays.items()}  # a writable copy
    return {
        "timestep": t["timestep"].to(device),
        "timestep_indices": t["timestep_indices"].to(device),
        "token_tags": t["token_tags"].to(device),
        "position_ids": t["position_ids"].to(device),
        "video_indices": t["video_indices"].to(device),
        "audio_indices": t["audio_indices"].to(device),
        "text_indices": t["text_indices"].to(device),
    }


def build_model():
    from diffusers import MiniMaxH3Transformer3DModel

    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = MiniMaxH3Transformer3DModel()
    torch.set_default_dtype(torch.float32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim >= 2:
                p.normal_(0.0, 0.02)
            elif "norm" in name and name.endswith("weight"):
                p.normal_(1.0, 0.05)
            else:
                p.normal_(0.0, 0.02)
    for name in ["proj_in", "audio_proj_in", "time_embedder", "proj_out", "audio_proj_out"]:
        getattr(model, name).float()
    return model.eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layouts", required=True)
    ap.add_argument("--names", default="t2va,ref2va")
    ap.add_argument("--backend", default="cudnn", choices=["cudnn", "flash", "efficient"])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--diffusers", default=os.environ.get("DIFFUSERS", os.path.join(os.getcwd(), ".ref")))
    args = ap.parse_args()
    sys.path.insert(0, args.diffusers)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
               "efficient": SDPBackend.EFFICIENT_ATTENTION}[args.backend]
    layouts = {name: read_safetensors(os.path.join(args.layouts, name + ".safetensors"))
               for name in args.names.split(",")}
    t0 = time.time()
    model = build_model()
    build_s = time.time() - t0
    cfg = model.config
    result = {"bench": "peer_ref2va_dit", "backend": args.backend, "torch": torch.__version__,
              "device": torch.cuda.get_device_name(), "build_s": build_s, "warmup": args.warmup, "reps": args.reps,
              "layouts": {}}
    g = torch.Generator("cuda").manual_seed(1)
    for name, arrays in layouts.items():
        inp = layout_inputs(arrays, "cuda")
        nv, na, nt = (int(arrays[k].shape[0]) for k in ("video_indices", "audio_indices", "text_indices"))
        patch_dim = cfg.in_channels * int(np.prod(cfg.patch_size))
        inp["hidden_states"] = torch.randn(1, nv, patch_dim, device="cuda", generator=g)
        inp["audio_hidden_states"] = torch.randn(1, na, cfg.audio_in_channels, device="cuda", generator=g)
        inp["encoder_hidden_states"] = torch.randn(1, nt, cfg.text_dim, device="cuda", generator=g,
                                                   dtype=torch.bfloat16)

        def forward():
            with torch.no_grad(), sdpa_kernel([backend]):
                return model(**inp, return_dict=False)

        torch.cuda.reset_peak_memory_stats()
        for _ in range(args.warmup):
            out = forward()
        torch.cuda.synchronize()
        times = []
        for _ in range(args.reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            out = forward()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b) / 1e3)
        video = out[0].float()
        ok = bool(torch.isfinite(video).all()) and float(video.max()) > float(video.min())
        r = {"L": int(arrays["token_tags"].shape[0]), "text": nt, "video": nv, "audio": na,
             "timesteps": int(arrays["timestep"].shape[0]), "s": times, "median_s": sorted(times)[len(times) // 2],
             "peak_GB": torch.cuda.max_memory_allocated() / 1e9, "ok": ok}
        result["layouts"][name] = r
        print("JSON " + json.dumps({"bench": "peer_ref2va_dit", "layout": name, **r}), flush=True)
        del inp, out
        torch.cuda.empty_cache()
    with open(os.path.join(os.environ.get("OUT", "."), "peer_ref2va_dit.json"), "w") as f:
        json.dump(result, f, indent=1)
    return 0 if all(r["ok"] for r in result["layouts"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
