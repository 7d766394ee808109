#!/usr/bin/env bash
# Builds, HERE, the CUDA test binary and the CUDA benchmarks for the GPU machine and copies them (with run.sh, the
# reference's peer_dit.py and peer_vae.py, and ref2va's peer_audio_encoder.py, peer_ref2va_dit.py and
# ref2va_ratios.py) into DEST, an ignored folder of the checkout the device tool sends
# (default /work/main/.gpu; name it in the run's `carry`).
#
# The binaries link libh3 statically and only what the CUDA tests and benchmarks use (no FFmpeg, PCRE2, utf8proc:
# the GPU machine's image has none of them); the CUDA runtime is static, cuBLAS(Lt) and cuDNN are found there.
# The device code is built for the H200 alone (H3_CUDA_ARCHITECTURES=90a without PTX, several times faster to
# compile here than the fat default of cmake/cuda_architectures.cmake); H3_CUDA_ARCHITECTURES="80;86;..." and
# H3_CUDA_PTX=ON in the environment build another list (e.g. the fat one, for another GPU).
#   scripts/gpu/bundle.sh [DEST]
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$SRC/build-cuda}
DEST=${1:-$SRC/.gpu}
CUDA_LIB=${CUDA_LIB:-/usr/local/cuda/lib64}

cmake -S "$SRC" -B "$BUILD" -G Ninja -DH3_WERROR=ON -DH3_CUDA=ON -DH3_CUDA_ARCHITECTURES="${H3_CUDA_ARCHITECTURES:-90a}" \
  -DH3_CUDA_PTX="${H3_CUDA_PTX:-OFF}" >/dev/null
ninja -C "$BUILD" h3lib h3_tests bench_cuda_block bench_dit bench_pipeline bench_ref2va gpu_tool
mkdir -p "$DEST"

# The image decoders' stand-in (no FFmpeg, libjpeg or libwebp there): linked before libh3, so libh3's
# image_input.o is never pulled in.
g++ -std=c++20 -O2 -I"$SRC/src" -I"$SRC/include" -c "$SRC/scripts/gpu/no_media_files.cpp" -o "$BUILD/no_media_files.o"

# link OUT "OBJECTS" [LIBRARIES...]: the objects, libh3, then the libraries they need.
link() {
  local out=$1 objects=$2
  shift 2
  # shellcheck disable=SC2086
  g++ -o "$DEST/$out" $objects "$BUILD/no_media_files.o" "$BUILD/libh3.a" "$@" -L"$CUDA_LIB" -lcudart_static -lcublasLt -lcublas -lcudnn \
    -ldl -lrt -lpthread -Wl,--as-needed -lsleef -Wl,--no-as-needed
  strip "$DEST/$out"
}
tests=""
for t in backend_cuda dit_cuda backend_vae_ops pipeline_cuda models_random pipeline_memory backend_video_encoder_ops \
  video_vae_encoder qwen_vision_cuda audio_vae_encoder backend_row_pairs_cuda dit_speed_cuda fp8_cuda fp8_fused_cuda attention_fp8_cuda dit_streaming_cuda memory_budget_cuda portable_cuda cuda_arch sparse_attention_cuda \
  parallel_cuda; do
  tests="$tests $BUILD/CMakeFiles/h3_tests.dir/tests/test_$t.cpp.o"
done
link h3_cuda_tests "$tests" -lgtest_main -lgtest -Wl,-Bstatic -lpcre2-8 -lutf8proc -Wl,-Bdynamic
link bench_cuda_block "$BUILD/CMakeFiles/bench_cuda_block.dir/bench/bench_cuda_block.cpp.o"
link bench_dit "$BUILD/CMakeFiles/bench_dit.dir/bench/bench_dit.cpp.o"
# The whole pipeline (its prompt goes through the tokenizer: PCRE2 and utf8proc).
link bench_pipeline "$BUILD/CMakeFiles/bench_pipeline.dir/bench/bench_pipeline.cpp.o" -Wl,-Bstatic -lpcre2-8 \
  -lutf8proc -Wl,-Bdynamic
# ref2va's acceptance (the audio VAE encoder and the DiT only: no tokenizer libraries beyond the tiny one's).
link bench_ref2va "$BUILD/CMakeFiles/bench_ref2va.dir/bench/bench_ref2va.cpp.o" -Wl,-Bstatic -lpcre2-8 -lutf8proc \
  -Wl,-Bdynamic
# The tool runner (h3 tool ... without FFmpeg/libedit): PCRE2 and utf8proc linked statically, SLEEF (shared only
# in Debian) carried beside it.
link gpu_tool "$BUILD/CMakeFiles/gpu_tool.dir/bench/gpu_tool.cpp.o" -Wl,-Bstatic -lpcre2-8 -lutf8proc -Wl,-Bdynamic
# The special-function unit's throughputs (standalone CUDA, no libh3).
"${NVCC:-/usr/local/cuda/bin/nvcc}" -O3 -arch=sm_90a -o "$DEST/sfu_throughput" "$SRC/bench/sfu_throughput.cu"
mkdir -p "$DEST/lib"
cp -L /usr/lib/x86_64-linux-gnu/libsleef.so.3 "$DEST/lib/"
cp "$SRC/scripts/gpu/run.sh" "$DEST/"
for peer in peer_dit.py peer_vae.py; do
  if [ -f "$SRC/../shared/bench/$peer" ]; then cp -f "$SRC/../shared/bench/$peer" "$DEST/"; fi
done
# ref2va's, the keyframe bench's and the VSA bench's reference scripts travel with the bundle, so that run.sh
# --ref2va-bench, --keyframe-bench and --vsa-bench do not depend on the checkout sent.
for peer in peer_audio_encoder.py peer_ref2va_dit.py ref2va_ratios.py peer_keyframe.py keyframe_ratios.py peer_vsa.py \
  fastvideo_source.py; do
  cp -f "$SRC/tools/reference/$peer" "$DEST/"
done
ls -la "$DEST"
du -sh "$DEST"
