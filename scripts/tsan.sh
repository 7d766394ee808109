#!/usr/bin/env bash
# The thread pool's tests under ThreadSanitizer (a small separate build: the pool and its tests only), with more
# threads than cores so that the interleavings vary. Any data race fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build-tsan
mkdir -p "$out"
g++ -std=c++20 -fsanitize=thread -O1 -g src/util/thread_pool.cpp src/util/env.cpp tests/test_util_thread_pool.cpp -Iinclude -Isrc \
  -lgtest_main -lgtest -pthread -o "$out/thread_pool_tsan"
H3_THREADS=8 TSAN_OPTIONS="halt_on_error=1 exitcode=66" "$out/thread_pool_tsan"
