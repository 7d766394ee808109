#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (address + undefined sanitizers) and runs each for N seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DH3_CUDA=OFF -DH3_TESTS=OFF -DH3_FUZZ=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" >/dev/null
targets=$(cd fuzz && ls *.cpp 2>/dev/null | sed 's/\.cpp$//')
[ -n "$targets" ] || exit 0
cmake --build build-fuzz -j "$(nproc)" --target $targets
for t in $targets; do
  corpus=build-fuzz/corpus-$t
  mkdir -p "$corpus"
  [ -d "fuzz/seeds/$t" ] && cp -n fuzz/seeds/$t/* "$corpus"/ 2>/dev/null || true
  echo "fuzz: $t for ${seconds}s"
  log=build-fuzz/$t.log
  if ! build-fuzz/$t -max_total_time="$seconds" -max_len=65536 -print_final_stats=1 "$corpus" >"$log" 2>&1; then
    tail -40 "$log" >&2
    echo "fuzz: $t found a crash (reproducer in build-fuzz/, log $log)" >&2
    exit 1
  fi
  grep -E "stat::number_of_executed_units|stat::new_units_added|cov:" "$log" | tail -3
done
