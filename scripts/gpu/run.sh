#!/usr/bin/env bash
# On the GPU machine, from the repository root, with the bundle of scripts/gpu/bundle.sh in .gpu/:
# the CUDA tests, the block benchmark, our full DiT forward and (with --peer) the reference's, one after another,
# each under its own time limit, logs under $OUT. The DiT forward runs twice: attention on the packed rows (the
# default) and on head-major copies (H3_ATTENTION_LAYOUT=head-major).
#   .gpu/run.sh [--peer] [--skip-tests] [--dit-shapes WxHxF,...]
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/h3-gpu-out}
mkdir -p "$OUT"
PEER=0
TESTS=1
DIT_SHAPES=512x512x22,864x480x124,1344x768x124
while [ $# -gt 0 ]; do
  case $1 in
    --peer) PEER=1 ;;
    --skip-tests) TESTS=0 ;;
    --dit-shapes) DIT_SHAPES=$2; shift ;;
    *) echo "unknown argument $1"; exit 2 ;;
  esac
  shift
done

# cuDNN, cuBLAS(Lt) and NVRTC (cuDNN's runtime-compiled engines) wherever this image keeps them (CUDA toolkit or
# PyTorch's wheels).
libdirs=$(find /usr/local /opt /usr/lib -xdev \( -name 'libcudnn.so.9' -o -name 'libcublasLt.so.13' \
  -o -name 'libcublas.so.13' -o -name 'libnvrtc.so.13' -o -name 'libnvrtc-builtins.so.13*' \) 2>/dev/null |
  xargs -r -n1 dirname | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH="${libdirs}$HERE/lib:${LD_LIBRARY_PATH:-}"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.mem,temperature.gpu \
  --format=csv | tee "$OUT/nvidia-smi.txt"
ldd "$HERE/h3_cuda_tests" | grep -E "not found|cudnn|cublas|nvrtc" || true

step() {
  local name=$1 limit=$2
  shift 2
  echo "=== $name (limit ${limit}s): $*"
  local t0=$(date +%s)
  timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
  echo "=== $name exit ${PIPESTATUS[0]} after $(( $(date +%s) - t0 ))s"
}

[ $TESTS = 1 ] && H3_SOURCE_DIR=$PWD step tests 150 "$HERE/h3_cuda_tests" --gtest_filter='BackendCuda*:DitCuda*'
H3_LOG_LEVEL=debug step block 120 "$HERE/bench_cuda_block"
step dit 150 "$HERE/bench_dit" --shapes "$DIT_SHAPES"
H3_ATTENTION_LAYOUT=head-major step dit_head_major 150 "$HERE/bench_dit" --shapes "$DIT_SHAPES"
if [ $PEER = 1 ]; then
  PYTHONUNBUFFERED=1 step peer 170 python3 "$HERE/peer_dit.py" --backends cudnn --reps 3
fi
grep -h '^JSON' "$OUT"/*.log > "$OUT/summary.jsonl" 2>/dev/null || true
echo "=== summary"
cat "$OUT/summary.jsonl" 2>/dev/null
