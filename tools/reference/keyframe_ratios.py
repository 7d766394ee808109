"""The keyframe encode by configuration against the reference, from one GPU run's outputs
(scripts/gpu/run.sh --keyframe-bench): bench_pipeline --keyframe-only's `keyframe_encode` JSON lines (one per
configuration of twins, "config" naming the variables set; "" the default) over the reference's encode
(tools/reference/peer_keyframe.py's peer_keyframe.json, else peer_vae.json; the best of its timed encodes counts) —
fl2va's target (a) is <= 0.5 for the default.

    python3 tools/reference/keyframe_ratios.py OUT

Exit status 1 when the default misses the target, 2 when an input is missing.
"""
import json
import os
import sys

TARGET = 0.5
KEY = "video_encode/1x480x864"


def lines(out):
    path = os.path.join(out, "summary.jsonl")
    if not os.path.exists(path):
        return []
    got = []
    for line in open(path):
        line = line.strip()
        if line.startswith("JSON "):
            line = line.split("JSON ", 1)[1]
        if not line:
            continue
        r = json.loads(line)
        if r.get("bench") == "keyframe_encode":
            got.append(r)
    return got


def main(out):
    ref = None
    for name in ("peer_keyframe.json", "peer_vae.json"):
        path = os.path.join(out, name)
        if os.path.exists(path) and "s" in json.load(open(path)).get(KEY, {}):
            ref = min(json.load(open(path))[KEY]["s"])
            break
    rows = lines(out)
    if not rows:
        print("missing: keyframe_encode lines")
        return 2
    before = rows[1]["median_device_s"] if len(rows) > 1 else None
    print(f"{'configuration':<92} {'h3 ms':>8} {'/ref':>6} {'/2nd':>6}")
    for r in rows:
        cfg = r.get("config", "") or "default"
        ms = r["median_device_s"] * 1e3
        rr = f"{r['median_device_s'] / ref:6.3f}" if ref else "     -"
        rb = f"{r['median_device_s'] / before:6.3f}" if before else "     -"
        print(f"{cfg:<92} {ms:8.2f} {rr} {rb}")
    if ref is None:
        print("missing: the reference's encode (peer_keyframe.json)")
        return 2
    ratio = rows[0]["median_device_s"] / ref
    print(f"reference (diffusers, bf16 weights, fp16 autocast; best of its encodes): {ref * 1e3:.2f} ms; "
          f"default / reference {ratio:.3f}, target <= {TARGET}: {'met' if ratio <= TARGET else 'NOT met'}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
