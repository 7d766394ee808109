#!/usr/bin/env bash
# Builds, HERE, the CUDA test binary and the CUDA benchmarks for the GPU machine and copies them (with run.sh and
# the reference's peer_dit.py) into DEST, an ignored folder of the checkout the device tool sends (default
# /work/main/.gpu; name it in the run's `carry`).
#
# The binaries link libh3 statically and only what the CUDA tests and benchmarks use (no FFmpeg, PCRE2, utf8proc:
# the GPU machine's image has none of them); the CUDA runtime is static, cuBLAS(Lt) and cuDNN are found there.
#   scripts/gpu/bundle.sh [DEST]
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$SRC/build-cuda}
DEST=${1:-/work/main/.gpu}
CUDA_LIB=${CUDA_LIB:-/usr/local/cuda/lib64}

cmake -S "$SRC" -B "$BUILD" -G Ninja -DH3_WERROR=ON -DH3_CUDA=ON >/dev/null
ninja -C "$BUILD" h3lib h3_tests bench_cuda_block bench_dit gpu_tool
mkdir -p "$DEST"

link() {
  local out=$1
  shift
  g++ -o "$DEST/$out" "$@" "$BUILD/libh3.a" -L"$CUDA_LIB" -lcudart_static -lcublasLt -lcublas -lcudnn -ldl -lrt \
    -lpthread
  strip "$DEST/$out"
}
link h3_cuda_tests "$BUILD/CMakeFiles/h3_tests.dir/tests/test_backend_cuda.cpp.o" \
  "$BUILD/CMakeFiles/h3_tests.dir/tests/test_dit_cuda.cpp.o" -lgtest_main -lgtest
link bench_cuda_block "$BUILD/CMakeFiles/bench_cuda_block.dir/bench/bench_cuda_block.cpp.o"
link bench_dit "$BUILD/CMakeFiles/bench_dit.dir/bench/bench_dit.cpp.o"
# The tool runner (h3 tool ... without FFmpeg/libedit): PCRE2 and utf8proc linked statically, SLEEF (shared only
# in Debian) carried beside it.
link gpu_tool "$BUILD/CMakeFiles/gpu_tool.dir/bench/gpu_tool.cpp.o" -Wl,-Bstatic -lpcre2-8 -lutf8proc -Wl,-Bdynamic -lsleef
mkdir -p "$DEST/lib"
cp -L /usr/lib/x86_64-linux-gnu/libsleef.so.3 "$DEST/lib/"
cp "$SRC/scripts/gpu/run.sh" "$DEST/"
if [ -f /work/shared/bench/peer_dit.py ]; then cp /work/shared/bench/peer_dit.py "$DEST/"; fi
ls -la "$DEST"
du -sh "$DEST"
