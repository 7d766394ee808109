#!/usr/bin/env bash
# The test command: installs what is missing, builds everything, runs every test, the thread pool under
# ThreadSanitizer, then a short fuzz run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
scripts/tsan.sh
scripts/fuzz.sh "${H3_FUZZ_SECONDS:-20}"
