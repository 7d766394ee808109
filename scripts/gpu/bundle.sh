#!/usr/bin/env bash
# Builds, HERE, the CUDA test binary and the CUDA benchmarks for the GPU machine and copies them (with run.sh and
# the reference's peer_dit.py / peer_vae.py) into DEST, an ignored folder of the checkout the device tool sends
# (default /work/main/.gpu; name it in the run's `carry`).
#
# The binaries link libh3 statically and only what the CUDA tests and benchmarks use (no FFmpeg, libedit: the GPU
# machine's image has none of them); PCRE2 and utf8proc (the tokenizer) link statically, SLEEF (the conditioner's
# rotary tables) is copied beside the binaries and found through their rpath ($ORIGIN). The CUDA runtime is static,
# cuBLAS(Lt) and cuDNN are found there.
#   scripts/gpu/bundle.sh [DEST]
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$SRC/build-cuda}
DEST=${1:-/work/main/.gpu}
CUDA_LIB=${CUDA_LIB:-/usr/local/cuda/lib64}
SLEEF_SO=$(ldconfig -p | awk '/libsleef\.so\.3 /{p = $NF} END {print p}')

cmake -S "$SRC" -B "$BUILD" -G Ninja -DH3_WERROR=ON -DH3_CUDA=ON >/dev/null
ninja -C "$BUILD" h3lib h3_tests bench_cuda_block bench_dit bench_pipeline
mkdir -p "$DEST"

link() {
  local out=$1
  shift
  g++ -o "$DEST/$out" "$@" "$BUILD/libh3.a" -Wl,-Bstatic -lpcre2-8 -lutf8proc -Wl,-Bdynamic -Wl,--as-needed -lsleef \
    -Wl,--no-as-needed -Wl,-rpath,'$ORIGIN' -L"$CUDA_LIB" -lcudart_static -lcublasLt -lcublas -lcudnn -ldl -lrt \
    -lpthread
  strip "$DEST/$out"
}
tests=("$BUILD"/CMakeFiles/h3_tests.dir/tests/test_{backend_cuda,backend_vae_ops,pipeline_cuda,models_random,pipeline_memory}.cpp.o)
link h3_cuda_tests "${tests[@]}" -lgtest_main -lgtest
link bench_cuda_block "$BUILD/CMakeFiles/bench_cuda_block.dir/bench/bench_cuda_block.cpp.o"
link bench_dit "$BUILD/CMakeFiles/bench_dit.dir/bench/bench_dit.cpp.o"
link bench_pipeline "$BUILD/CMakeFiles/bench_pipeline.dir/bench/bench_pipeline.cpp.o"
cp -fL "$SLEEF_SO" "$DEST/"
cp "$SRC/scripts/gpu/run.sh" "$DEST/"
for peer in peer_dit.py peer_vae.py; do
  if [ -f "/work/shared/bench/$peer" ]; then cp -f "/work/shared/bench/$peer" "$DEST/"; fi
done
ls -la "$DEST"
du -sh "$DEST"
