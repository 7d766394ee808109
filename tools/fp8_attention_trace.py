#!/usr/bin/env python3
"""Reads the clock stamps H3_FP8_ATTENTION_TRACE writes (kernels_attention_fp8_sm90.cu, launch_traced) and prints,
per phase of a key tile, the median cycles a consumer warp spends there, the tile period, and how the two consumer
warpgroups' softmaxes overlap on one scheduler (warp w of each warpgroup shares scheduler w).

    python3 tools/fp8_attention_trace.py TRACE_FILE [--skip N]   (the first and last N tiles are left out; 8)
"""
import statistics
import struct
import sys

PHASES = ["loads", "issue", "S wait", "softmax", "PV wait+fold", "round P"]


def launches(path):
    with open(path, "rb") as f:
        data = f.read()
    at = 0
    while at < len(data):
        ctas, heads, head, tiles, phases = struct.unpack_from("<8i", data, at)[:5]
        at += 32
        n = ctas * 8 * tiles * phases
        words = struct.unpack_from(f"<{n}I", data, at)
        at += 4 * n
        yield ctas, tiles, phases, words


def delta(a, b):
    return (b - a) & 0xFFFFFFFF


def summarize(ctas, tiles, phases, words, skip):
    def stamp(cta, warp, j, k):
        return words[((cta * 8 + warp) * tiles + j) * phases + k]

    lo, hi = 1 + skip, tiles - skip
    if hi - lo < 4:
        print(f"  {tiles} tiles: too few to summarize with --skip {skip}")
        return
    per_phase = [[] for _ in PHASES]
    periods, overlap, both_idle = [], [], []
    for cta in range(ctas):
        for warp in range(8):
            for j in range(lo, hi):
                for k in range(phases - 1):
                    per_phase[k].append(delta(stamp(cta, warp, j, k), stamp(cta, warp, j, k + 1)))
                periods.append(delta(stamp(cta, warp, j, 0), stamp(cta, warp, j + 1, 0)))
        # Softmax windows [S ready, softmax done] of warp w of warpgroup 0 and 1 (the same scheduler), tile by tile.
        base = stamp(cta, 0, lo, 0)
        for w in range(4):
            spans = []
            for c in range(2):
                for j in range(lo, hi):
                    a, b = delta(base, stamp(cta, 4 * c + w, j, 4)), delta(base, stamp(cta, 4 * c + w, j, 5))
                    spans.append((a, b, c))
            spans.sort()
            # Time covered by exactly both, by at least one, over the traced window.
            events = []
            for a, b, c in spans:
                events += [(a, 1), (b, -1)]
            events.sort()
            depth, last, cover, twice = 0, events[0][0], 0, 0
            for t, d in events:
                if depth >= 1:
                    cover += t - last
                if depth >= 2:
                    twice += t - last
                depth += d
                last = t
            window = events[-1][0] - events[0][0]
            overlap.append(twice / max(cover, 1))
            both_idle.append(1 - cover / max(window, 1))
    print(f"  {ctas} CTAs x 8 consumer warps, tiles {lo}..{hi - 1} of {tiles}")
    total = 0
    for name, v in zip(PHASES, per_phase):
        m = statistics.median(v)
        total += m
        q1, _, q3 = statistics.quantiles(v, n=4)
        print(f"  {name:>14}: median {m:7.0f} cycles (quartiles {q1:.0f}..{q3:.0f})")
    print(f"  {'sum of medians':>14}: {total:7.0f};  tile period per warp: median {statistics.median(periods):.0f}")
    print(f"  softmax windows on one scheduler: both warpgroups at once {100 * statistics.mean(overlap):.0f}% of "
          f"the covered time; neither {100 * statistics.mean(both_idle):.0f}% of the window")


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    skip = 8
    if "--skip" in argv:
        skip = int(argv[argv.index("--skip") + 1])
    for i, (ctas, tiles, phases, words) in enumerate(launches(argv[1])):
        print(f"launch {i}:")
        summarize(ctas, tiles, phases, words, skip)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
