#!/usr/bin/env bash
# The main job: installs what is missing, builds the h3 binary, makes the tiny random-weight model (the release's
# exact layout, random weights: the picture and the sound are noise, every stage is real) and turns a prompt into a
# 5-second video with its soundtrack on the CPU (about 3 s of generation on a 2-core machine, after the build).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh h3
build/h3 tool make-tiny-model tiny-model --force  # the demo's own folder: made anew on every run
build/h3 --info -d tiny-model
mkdir -p outputs
out=outputs/demo.mp4
# 256x256, 124 frames (5.17 s at 24 fps), 4 denoising passes, seed 42.
build/h3 -d tiny-model --device cpu --width 256 --height 256 --frames 124 --steps 4 --profile -o "$out" \
  -p "A red fox walks through fresh snow in a pine forest at dawn. Soft footsteps in the snow, wind in the branches."
echo "demo: the video (H.264 + AAC stereo) is $(pwd)/$out"
