#!/usr/bin/env python3
"""libh3 from Python (no PyTorch, no NumPy): one video from a prompt, with progress.

    generate.py MODEL_DIR OUTPUT.mp4 PROMPT [WIDTH HEIGHT FRAMES STEPS]

The h3 package is installed by `cmake --install` under PREFIX/lib/python3/dist-packages (put it on PYTHONPATH).
"""
import sys

import h3


def main(argv):
    if len(argv) not in (4, 8):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    model_dir, output, prompt = argv[1:4]
    settings = {}
    if len(argv) == 8:
        settings = dict(zip(("width", "height", "frames", "steps"), map(int, argv[4:8])))
    print(f"libh3 {h3.version()}")
    with h3.Engine(model_dir) as engine:
        print(engine.description)
        seen = []
        result = engine.generate(prompt=prompt, seed=7, output=output,
                                 on_progress=lambda phase, done, total: print(f"{phase} {done}/{total}",
                                                                              file=sys.stderr),
                                 on_frames=lambda rgb, first, count, w, h: seen.append(count), **settings)
        print(f"wrote {output}: {result.width}x{result.height}, {result.frames} frames ({sum(seen)} seen as they were "
              f"decoded), {len(result.audio) // 2} audio samples at {result.sample_rate} Hz, seed {result.seed}, "
              f"{len(result.video_rgb8)} bytes of RGB24, timings {result.timings}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
