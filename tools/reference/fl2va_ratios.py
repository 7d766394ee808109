"""The fl2va acceptance from one GPU run's outputs, h3 against the reference in the same run:

  (a) keyframe encode: h3's (bench_pipeline --fl2va, `keyframe_encode`: the median device time of the conditioning
      encode of one 864x480 keyframe) over the reference's `vae.encode` of a (1, 3, 1, 480, 864) input
      (../shared/bench/peer_vae.py, peer_vae.json "video_encode/1x480x864": it times 2 encodes after 1 warm-up; the
      faster of the two counts, the conservative choice) — target <= 0.5;
  (b) vision tower: h3's (`vision_tower`, median device time) over transformers' Qwen3VLVisionModel on the same
      keyframe size (tools/reference/peer_vision.py, peer_vision.json "median_s") — target <= 0.5;
  (c) time per pass (the Denoise phase's device time / passes, `fl2va_generation`): fl2va with both keyframes over
      t2va with a prompt padded to fl2va's packed length (the like-for-like comparison: what fl2va costs beyond its
      longer sequence) — target <= 1.03; fl2va over t2va on the same canvas is shown too, with the share of the rows
      fl2va adds (informational: those rows cost what rows cost).

    python3 tools/reference/fl2va_ratios.py OUT

OUT holds what `scripts/gpu/run.sh --fl2va-bench` wrote: bench_pipeline.jsonl (or summary.jsonl), peer_vae.json,
peer_vision.json. Where h3 measured something more than once, the first line counts. Exit status 1 when a target is
missed, 2 when an input is missing.
"""
import json
import os
import sys

TARGET_KEYFRAME = 0.5
TARGET_VISION = 0.5
TARGET_PASS = 1.03
PEER_ENCODE_KEY = "video_encode/1x480x864"


def h3_lines(out):
    """bench_pipeline's JSON lines by "bench", first occurrence."""
    lines = {}
    for name in ("bench_pipeline.jsonl", "summary.jsonl"):
        path = os.path.join(out, name)
        if not os.path.exists(path):
            continue
        for line in open(path):
            line = line.strip()
            if not line:
                continue
            r = json.loads(line.split("JSON ", 1)[1]) if line.startswith("JSON ") else json.loads(line)
            if "bench" in r:
                lines.setdefault(r["bench"], r)
    return lines


def load_json(out, name):
    path = os.path.join(out, name)
    return json.load(open(path)) if os.path.exists(path) else None


def verdict(ratio, target):
    return f"<= {target:.2f} {'met' if ratio <= target else 'NOT met'}"


def main(out):
    h3 = h3_lines(out)
    peer_vae, peer_vision = load_json(out, "peer_vae.json"), load_json(out, "peer_vision.json")
    missing = [what for what, have in (("keyframe_encode line", "keyframe_encode" in h3),
                                       ("vision_tower line", "vision_tower" in h3),
                                       ("fl2va_generation line", "fl2va_generation" in h3),
                                       ("peer_vae.json", peer_vae is not None),
                                       ("peer_vision.json", peer_vision is not None)) if not have]
    missed = False
    print(f"{'what':<58} {'h3':>10} {'reference':>10} {'ratio':>7}  target")

    if "keyframe_encode" in h3 and peer_vae is not None:
        k, ref = h3["keyframe_encode"], peer_vae.get(PEER_ENCODE_KEY, {})
        if "s" in ref:
            ref_s = min(ref["s"])
            ratio = k["median_device_s"] / ref_s
            missed |= ratio > TARGET_KEYFRAME
            print(f"{'(a) keyframe encode ' + str(k['width']) + 'x' + str(k['height']) + ' (device; reference best of ' + str(len(ref['s'])) + ')':<58} "
                  f"{k['median_device_s']:10.4f} {ref_s:10.4f} {ratio:7.3f}  {verdict(ratio, TARGET_KEYFRAME)}")
            print(f"{'    the same, h3 wall time':<58} {k['median_wall_s']:10.4f} {ref_s:10.4f} "
                  f"{k['median_wall_s'] / ref_s:7.3f}")
        else:
            missing.append(f"peer_vae.json {PEER_ENCODE_KEY} ({ref.get('error', 'absent')})")

    if "vision_tower" in h3 and peer_vision is not None:
        v = h3["vision_tower"]
        ref_s = peer_vision["median_s"]
        ratio = v["median_device_s"] / ref_s
        same_grid = list(v["grid_thw"]) == list(peer_vision["grid_thw"])
        missed |= ratio > TARGET_VISION or not same_grid
        note = "" if same_grid else f"; GRIDS DIFFER (reference {peer_vision['grid_thw']}: not like for like)"
        print(f"{'(b) vision tower, grid ' + str(tuple(v['grid_thw'])) + ' (device; ' + peer_vision['attn_implementation'] + ' bf16)':<58} "
              f"{v['median_device_s']:10.4f} {ref_s:10.4f} {ratio:7.3f}  {verdict(ratio, TARGET_VISION)}{note}")
        print(f"{'    the same, h3 wall time':<58} {v['median_wall_s']:10.4f} {ref_s:10.4f} "
              f"{v['median_wall_s'] / ref_s:7.3f}")

    if "fl2va_generation" in h3:
        g = h3["fl2va_generation"]
        t2va, fl2va, padded = g["t2va"], g["fl2va"], g["t2va_padded"]
        ratio = g["fl2va_over_t2va_padded"]
        missed |= ratio > TARGET_PASS or not g["lengths_match"]
        note = "" if g["lengths_match"] else "; LENGTHS DIFFER (not like for like)"
        print(f"{'(c) per pass, fl2va (L ' + str(fl2va['L']) + ') / t2va padded (L ' + str(padded['L']) + ')':<58} "
              f"{fl2va['per_pass_s']:10.4f} {padded['per_pass_s']:10.4f} {ratio:7.3f}  "
              f"{verdict(ratio, TARGET_PASS)}{note}")
        print(f"{'    per pass, fl2va / t2va same canvas (L ' + str(t2va['L']) + ')':<58} "
              f"{fl2va['per_pass_s']:10.4f} {t2va['per_pass_s']:10.4f} {g['fl2va_over_t2va']:7.3f}  "
              f"informational: fl2va adds {g['extra_rows']} rows ({100 * g['extra_row_share']:.1f}% of its L: "
              f"{g['extra_keyframe_rows']} keyframe, {g['extra_conditioner_rows']} conditioner)")
        print(f"    {g['shape']}, {g['passes']} passes, keyframes {', '.join(g['keyframes'])}")

    if missing:
        print("missing: " + "; ".join(missing))
        return 2
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
