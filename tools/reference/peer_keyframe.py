"""The reference's keyframe encode alone (the fl2va conditioning encode of one 864x480 frame): diffusers'
AutoencoderKLMiniMaxH3 with random bf16 weights (N(0, 0.02) for every weight of 2+ dims), vae.encode of a
(1, 3, 1, 480, 864) input under fp16 autocast with the default tiling — exactly ../shared/bench/peer_vae.py's
video_encode, without its decodes (run.sh --keyframe-bench). Times `--reps` encodes after `--warm` warm-ups;
writes OUT/peer_keyframe.json {"video_encode/1x480x864": {"s": [sorted seconds]}}.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.environ.get("DIFFUSERS", os.path.join(os.getcwd(), ".ref")))
from diffusers import AutoencoderKLMiniMaxH3  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--warm", type=int, default=2)
ap.add_argument("--reps", type=int, default=5)
args = ap.parse_args()
out_dir = os.environ.get("OUT", ".")
torch.manual_seed(0)
vae = AutoencoderKLMiniMaxH3().to("cuda", torch.bfloat16).eval()
with torch.no_grad():
    for p in vae.parameters():
        if p.ndim >= 2:
            p.normal_(0, 0.02)
x = torch.randn(1, 3, 1, 480, 864, device="cuda", dtype=torch.bfloat16)


def enc():
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
        return vae.encode(x, return_dict=False)[0]


for _ in range(args.warm):
    enc()
torch.cuda.synchronize()
ts = []
for _ in range(args.reps):
    a = torch.cuda.Event(enable_timing=True)
    b = torch.cuda.Event(enable_timing=True)
    a.record()
    enc()
    b.record()
    torch.cuda.synchronize()
    ts.append(a.elapsed_time(b) / 1e3)
res = {"video_encode/1x480x864": {"s": sorted(ts)}, "torch": torch.__version__,
       "device": torch.cuda.get_device_name()}
json.dump(res, open(os.path.join(out_dir, "peer_keyframe.json"), "w"), indent=1)
print(json.dumps(res), flush=True)
