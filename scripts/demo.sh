#!/usr/bin/env bash
# The main job: installs what is missing, builds, makes the tiny random-weight model and runs it on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build/h3 tool make-tiny-model tiny-model
build/h3 --info -d tiny-model
