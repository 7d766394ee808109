#!/usr/bin/env python3
"""
Issue-7 correctness check at full width: our CUDA bf16 forward against the reference's bf16 forward, both measured
against the reference's float32 forward of the same weights (all from dit_fullwidth.py).

    python3 tools/reference/compare_fullwidth.py --reference DIR/reference.safetensors --ours OURS.safetensors

Prints one JSON line: rel-L2 and cosine of (ours vs f32) and (reference bf16 vs f32), per output, and the ratio
ours/reference (acceptance: <= 1.5). Needs only numpy + safetensors.
"""
import argparse
import json

import numpy as np
from safetensors.numpy import load_file


def rel_l2(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def cos(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference", required=True)
    ap.add_argument("--ours", required=True)
    args = ap.parse_args()
    ref = load_file(args.reference)
    ours = load_file(args.ours)
    out = {}
    worst = 0.0
    for name, ref_bf16, ref_f32 in (("sample", "sample_bf16", "sample_f32"),
                                    ("audio_sample", "audio_sample_bf16", "audio_sample_f32")):
        f32 = ref["sample_f32" if name == "sample" else "audio_sample_f32"]
        bf = ref[ref_bf16]
        us = ours[name].reshape(f32.shape)
        r = {"ours_vs_f32_rel_l2": rel_l2(us, f32), "ours_vs_f32_cos": cos(us, f32),
             "ref_bf16_vs_f32_rel_l2": rel_l2(bf, f32), "ref_bf16_vs_f32_cos": cos(bf, f32),
             "ours_vs_ref_bf16_rel_l2": rel_l2(us, bf)}
        r["ratio"] = r["ours_vs_f32_rel_l2"] / r["ref_bf16_vs_f32_rel_l2"]
        worst = max(worst, r["ratio"])
        out[name] = r
    out["worst_ratio"] = worst
    out["accepted"] = worst <= 1.5
    print(json.dumps(out))


if __name__ == "__main__":
    main()
