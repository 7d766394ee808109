"""The ref2va acceptance (issue 15) from one GPU run's outputs, h3 against the reference in the same run:

  (a) audio VAE encode of a 15 s stereo reference: h3's (bench_ref2va, `audio_vae_encode`: the median device time of
      AudioVaeEncoder::encode_reference — host check, upload, encode, rows back on the host) over the reference's
      `encode(waveform[:, None])` + `posterior.mode()` on a waveform already on the GPU, float32
      (tools/reference/peer_audio_encoder.py, peer_audio_encoder.json "median_s") — target <= 0.5; over the
      reference's whole encoder-step audio path from a host waveform ("pipeline_median_s") too, for information;
  (b) per pass at the canvas (864x480x124), one image reference and one 5 s video reference with its soundtrack
      (bench_ref2va, `ref2va_passes`): ref2va's time beside t2va's on the same canvas, the row counts and the share of
      the rows ref2va adds; with `--padded`, ref2va over t2va padded to ref2va's length; with peer_ref2va_dit.json
      (tools/reference/peer_ref2va_dit.py on the same exported layouts), h3 over the reference on each layout.

    python3 tools/reference/ref2va_ratios.py OUT

OUT holds what `scripts/gpu/run.sh --ref2va-bench` wrote: summary.jsonl (the `JSON` lines of every step's log),
peer_audio_encoder.json and, when that step ran, peer_ref2va_dit.json. Where h3 measured something more than once,
the first line counts. Exit status 1 when the audio target is missed, 2 when an input is missing.
"""
import json
import os
import sys

TARGET_AUDIO = 0.5


def h3_lines(out):
    """bench_ref2va's JSON lines by "bench", first occurrence: the default run's log (ref2va_bench.log) first, then
    summary.jsonl, which also holds the twins' runs (--ref2va-env) in whatever order the shell's glob sorted them."""
    lines = {}
    for name in ("ref2va_bench.log", "summary.jsonl"):
        path = os.path.join(out, name)
        if not os.path.exists(path):
            continue
        for line in open(path):
            line = line.strip()
            if not line:
                continue
            if name.endswith(".log") and not line.startswith("JSON "):
                continue
            r = json.loads(line.split("JSON ", 1)[1]) if line.startswith("JSON ") else json.loads(line)
            if "bench" in r:
                lines.setdefault(r["bench"], r)
    return lines


def load_json(out, name):
    path = os.path.join(out, name)
    return json.load(open(path)) if os.path.exists(path) else None


def rows_text(r):
    return (f"text {r['text']}, conditioning video {r['condition_video']}, reference audio {r['reference_audio']}, "
            f"target audio {r['target_audio']}, target video {r['target_video']}")


def main(out):
    h3 = h3_lines(out)
    peer_audio, peer_dit = load_json(out, "peer_audio_encoder.json"), load_json(out, "peer_ref2va_dit.json")
    missing = [what for what, have in (("audio_vae_encode line", "audio_vae_encode" in h3),
                                       ("ref2va_passes line", "ref2va_passes" in h3),
                                       ("peer_audio_encoder.json", peer_audio is not None)) if not have]
    missed = False
    print(f"{'what':<64} {'h3':>10} {'reference':>10} {'ratio':>7}  target")

    if "audio_vae_encode" in h3 and peer_audio is not None:
        a = h3["audio_vae_encode"]
        same = a["samples"] == peer_audio["samples"] and a["channels"] == peer_audio["channels"]
        ratio = a["median_device_s"] / peer_audio["median_s"]
        missed |= ratio > TARGET_AUDIO or not same or not a["ok"] or not peer_audio["ok"]
        note = "" if same else f"; SHAPES DIFFER (reference {peer_audio['samples']} samples: not like for like)"
        label = (f"(a) audio VAE encode, {a['seconds']:g} s stereo ({a['samples']} samples; reference "
                 f"{peer_audio['dtype']})")
        print(f"{label:<64} {a['median_device_s']:10.4f} {peer_audio['median_s']:10.4f} {ratio:7.3f}  "
              f"<= {TARGET_AUDIO:.2f} {'met' if ratio <= TARGET_AUDIO else 'NOT met'}{note}")
        print(f"{'    over the reference from a host waveform to host rows':<64} {a['median_device_s']:10.4f} "
              f"{peer_audio['pipeline_median_s']:10.4f} {a['median_device_s'] / peer_audio['pipeline_median_s']:7.3f}  "
              f"informational")

    if "ref2va_passes" in h3:
        g = h3["ref2va_passes"]
        t2va, ref2va = g["t2va"], g["ref2va"]
        print(f"{'(b) per pass, ref2va (L ' + str(ref2va['rows']['L']) + ') / t2va (L ' + str(t2va['rows']['L']) + '), same canvas':<64} "
              f"{ref2va['per_pass_s']:10.4f} {t2va['per_pass_s']:10.4f} {g['ref2va_over_t2va']:7.3f}  "
              f"informational (both h3)")
        if "t2va_padded" in g:
            p = g["t2va_padded"]
            print(f"{'    ref2va / t2va padded to the same L (' + str(p['rows']['L']) + ')':<64} "
                  f"{ref2va['per_pass_s']:10.4f} {p['per_pass_s']:10.4f} {g['ref2va_over_t2va_padded']:7.3f}  "
                  f"informational (both h3)")
        if peer_dit is not None:
            for name, ours in (("t2va", t2va), ("ref2va", ref2va)):
                ref = peer_dit["layouts"].get(name)
                if ref is None:
                    continue
                same = ref["L"] == ours["rows"]["L"]
                note = "" if same else f"; LENGTHS DIFFER (reference L {ref['L']})"
                print(f"{'    ' + name + ' per pass, h3 / reference transformer (' + peer_dit['backend'] + ' SDPA, bf16)':<64} "
                      f"{ours['per_pass_s']:10.4f} {ref['median_s']:10.4f} {ours['per_pass_s'] / ref['median_s']:7.3f}  "
                      f"informational{note}")
        v, im = g["video"], g["image"]
        print(f"    {g['shape']}, {g['passes']} measured passes after {g['warmup']}; image {im['photo'][0]}x{im['photo'][1]} "
              f"-> {im['encoded'][0]}x{im['encoded'][1]} ({im['rows']} rows, {im['tokens']} vision tokens); video "
              f"{v['seconds']:g} s {v['source'][0]}x{v['source'][1]} -> {v['canvas'][0]}x{v['canvas'][1]}, "
              f"{v['frames_encoded']} frames encoded ({v['rows']} rows, {v['tokens']} vision tokens), soundtrack "
              f"{v['audio_latents']} latents x 2")
        print(f"    t2va rows: {rows_text(t2va['rows'])}")
        print(f"    ref2va rows: {rows_text(ref2va['rows'])}")
        print(f"    ref2va adds {g['extra_rows']} rows ({100 * g['extra_row_share']:.1f}% of its L): {g['extra_text_rows']} "
              f"text (vision blocks and labels), {g['extra_image_rows']} image-reference, {g['extra_video_rows']} "
              f"video-reference, {g['extra_reference_audio_rows']} reference-audio; peak {ref2va['peak_GB']:.1f} GB")

    if missing:
        print("missing: " + "; ".join(missing))
        return 2
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
