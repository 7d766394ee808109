"""Issue 7's acceptance from one GPU run's outputs: h3's DiT forward time over the reference's, per shape, for each
initialization both engines were timed with, against the targets (≤ 0.80 at 512×512×22, ≤ 0.93 at the others).

    python3 tools/reference/dit_ratios.py OUT

OUT holds what `scripts/gpu/run.sh ... --zero-vectors --peer --peer-vectors` wrote: summary.jsonl (bench_dit's
JSON lines, each with "vectors": "random" or "zero"), peer_dit.json (../shared/bench/peer_dit.py: zero 1-D
weights) and peer_dit_vectors.json (tools/reference/peer_dit_vectors.py: both). Where h3 ran the same shape more
than once with the same weights (twins, profiling) the first run counts. Exit status 1 when a like-for-like ratio
misses its target.
"""
import json
import os
import sys

TARGETS = {"512x512x22": 0.80, "864x480x124": 0.93, "1344x768x124": 0.93}


def ours(out):
    times = {}
    for line in open(os.path.join(out, "summary.jsonl")):
        r = json.loads(line.split("JSON ", 1)[1]) if line.startswith("JSON ") else json.loads(line)
        if r.get("bench") == "dit" and "vectors" in r:
            times.setdefault((r["vectors"], r["shape"]), r["median_s"])
    return times


def reference(out):
    times = {}
    path = os.path.join(out, "peer_dit_vectors.json")
    if os.path.exists(path):
        for r in json.load(open(path)):
            times[(r["vectors"], r["shape"], "peer_dit_vectors.py")] = r["median_s"]
    path = os.path.join(out, "peer_dit.json")
    if os.path.exists(path):
        for key, r in json.load(open(path))["forward"].items():
            shape, backend = key.split("/")
            if backend == "cudnn":
                times[("zero", shape, "peer_dit.py")] = r["median_s"]
    return times


def main(out):
    h3, ref = ours(out), reference(out)
    missed = False
    print(f"{'h3 weights':<12} {'reference':<34} {'shape':<14} {'h3 s':>8} {'ref s':>8} {'ratio':>6}  target")
    order = list(TARGETS)
    rank = lambda shape: order.index(shape) if shape in order else len(order)  # noqa: E731
    for (vectors, shape, script), ref_s in sorted(ref.items(), key=lambda kv: (kv[0][2], kv[0][0], rank(kv[0][1]))):
        for mine in ("random", "zero"):
            if (mine, shape) not in h3:
                continue
            ratio = h3[(mine, shape)] / ref_s
            like = mine == vectors
            ok = ratio <= TARGETS.get(shape, 1.0)
            missed |= like and not ok
            kind = "same weights" if like else "MIXED weights (not an engine comparison)"
            print(f"{mine:<12} {vectors + ' (' + script + ')':<34} {shape:<14} {h3[(mine, shape)]:8.4f} {ref_s:8.4f} "
                  f"{ratio:6.3f}  <= {TARGETS.get(shape, 1.0):.2f} {'met' if ok else 'NOT met'}; {kind}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
