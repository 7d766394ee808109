#!/usr/bin/env bash
# Configures and builds h3 into build/ (CUDA backend included when nvcc is found; H3_CUDA=OFF to skip).
# Arguments name targets to build (e.g. `scripts/build.sh h3`); none builds everything.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DH3_WERROR=ON -DH3_CUDA="${H3_CUDA:-AUTO}" >/dev/null
cmake --build build -j "$(nproc)" ${1:+--target "$@"}
