#!/usr/bin/env bash
# On the GPU machine, from the repository root, with the bundle of scripts/gpu/bundle.sh in .gpu/:
# the CUDA tests (our Hopper attention kernel's in a process of their own), the block benchmark, our full DiT
# forward and the reference's, one after another, each under its own time limit, logs under $OUT.
#   --peer        run the reference (peer_dit.py); --peer-if-ok: only when our Hopper kernel's tests passed
#   --twin        also run the DiT forward with cuDNN's attention (H3_DISABLE_HOPPER_ATTENTION=1)
#   --head-major  also run the DiT forward with H3_ATTENTION_LAYOUT=head-major
#   --attention-tests-only  of the tests, only BackendCudaAttention.* and DitCuda* (the DiT fixtures on CUDA)
#   --pipeline    also the GPU pipeline: its tests (PipelineCuda*, ModelsRandom*, PipelineMemory*; BackendCudaVae*
#                 is part of BackendCuda*) and bench_pipeline (the whole pipeline at full size with random weights
#                 made on the GPU: isolated conditioner / audio / video decode timings, one generation per shape,
#                 peak memory; JSON lines also in $OUT/bench_pipeline.jsonl), options from --pipeline-args
#   --only-pipeline  --pipeline without the block and DiT benchmarks
#   --with-pipeline-tests  add the pipeline's CUDA tests to the test step (--pipeline adds them too, with its
#                 benchmark)
#   --peer-vae    the reference's video and audio VAE decodes (peer_vae.py, after ours: it holds up to ~20 GB)
#   --fl2va-bench  fl2va's acceptance in one run: bench_pipeline --fl2va at 864x480x124 with 3 passes (keyframe
#                 encode, vision tower, per-pass time of t2va / fl2va / t2va padded to fl2va's length; every
#                 component resident), then the references — peer_vae.py (its keyframe encode; also its decodes) and
#                 tools/reference/peer_vision.py (transformers' vision tower) — and tools/reference/fl2va_ratios.py's
#                 table of the three ratios; options for bench_pipeline from --fl2va-args. Needs .ref (diffusers)
#   --only-fl2va-bench  --fl2va-bench without the tests and the block and DiT benchmarks (step limits 220 + 240 +
#                 120 s; expected ~4 min on an H200)
#   --ref2va-bench  ref2va's acceptance (issue 15) in one run: bench_ref2va (the audio VAE encode of a 15 s stereo
#                 reference; the DiT's time per pass on t2va and on ref2va with one image and one 5 s video with its
#                 soundtrack at 864x480x124, their rows; the layouts exported to $REF2VA_LAYOUTS, by default ${TMPDIR:-/tmp}/h3-ref2va-layouts), then the
#                 reference's audio encode (peer_audio_encoder.py) and tools/reference/ref2va_ratios.py's table;
#                 options for bench_ref2va from --ref2va-args (e.g. "--padded": also t2va padded to ref2va's length,
#                 ~+60 s). Needs .ref (diffusers; DIFFUSERS=)
#   --ref2va-peer-dit  with --ref2va-bench, also the reference's transformer on the same two packed sequences
#                 (peer_ref2va_dit.py, ~+90 s)
#   --only-ref2va-bench  --ref2va-bench without the tests and the block and DiT benchmarks (expected ~2.5 min on an
#                 H200; ~4 min with --ref2va-peer-dit and --padded)
#   --ref2va-env "NAME=VALUE ... [-- ARGS]"  with --ref2va-bench, also bench_ref2va (its --ref2va-args, then ARGS)
#                 under that environment (repeatable; several variables in one: a twin configuration), after the
#                 default run (whose JSON lines the ratios use)
#   --ref2va-profile  with --ref2va-bench, also bench_ref2va once with H3_CUDA_PROFILE=1 (device time per op; the
#                 convolutions by shape and what served them), its --ref2va-args less --conv-report
#   --keyframe-bench  the keyframe encode alone (fl2va's target (a), issue 14) in one run: bench_pipeline
#                 --keyframe-only (the release encoder with random weights, nothing else resident; one 864x480 frame
#                 encoded under the default and under each twin configuration, each with a backend of its own, then
#                 once profiled; options from --keyframe-args, e.g. --keyframe-configs "...;..."), then the
#                 reference's encode alone (tools/reference/peer_keyframe.py) and tools/reference/keyframe_ratios.py's
#                 table; with the tests only under --with-tests (then: --tests-filter). Needs .ref (diffusers;
#                 DIFFUSERS=); ~1.5 min on an H200
#   --speed-controls-bench  the speed controls (issue 16) in one run: bench_pipeline --speed-controls at
#                 864x480x124 and 512x512x22 with 20 passes, every component resident: the exact path's denoise, then
#                 each setting of $SPEED_CONFIGS (request JSON keys; default: each control alone and h3.c's presets,
#                 balanced {"layers":45,"reuse":2}, with token reduction on top, aggressive 320x320 render + layers 40
#                 + reuse 3 at 512²; a setting a shape does not allow, or a key this build lacks, is reported skipped):
#                 denoise device time and its ratio to the exact path's, resident and peak memory, final-latent
#                 relative L2 to the exact path's (JSON lines `speed_controls`); options from --speed-args. Runs
#                 without the tests and the block and DiT benchmarks (step limit 540 s; expected ~5 min on an H200)
#   --cancel-bench  cancel latency on the GPU (bench_pipeline --cancel-latency at 864x480x124, 4 passes): per phase,
#                 the wall time from raising the cancel flag to generate()'s throw and to the device's idle (~1 min)
#   --fp8-bench   FP8 (issue 18) in one run: the Fp8Cuda*, Fp8FusedCuda* and Fp8AttentionCuda* tests, then one
#                 bench_dit --precision fp8 --fp8-scaling channel --fp8-fused on --fp8-attention at 864x480x124 and
#                 1344x768x124: bf16, fp8-channel (FP8 linears with per-channel scales, their activations quantized
#                 by their producers, bf16 attention) and fp8-channel+attn (the same with the attention computed in
#                 FP8): forward time and its ratio to bf16, velocity cosine and relative L2 per modality against bf16,
#                 resident bytes. Options for bench_dit from --fp8-args, added after those (e.g. '--fp8-scaling
#                 block' adds the 128-block models, '--fp8-fused both' the separate-pass twin with its bit-for-bit
#                 check). Without the other tests and benchmarks (step limits 150 + 300 s; expected ~3 min on an H200)
#   --fp8-profile  with --fp8-bench, the bench runs with H3_CUDA_PROFILE=1: every timed forward also prints its
#                 device time per op (no extra forwards)
#   --streaming-bench  block streaming (issue 17): bench_dit at 864x480x124 and 1344x768x124, the resident DiT, then
#                 the same random DiT with its blocks streamed from pinned host copies (~40 GB of host memory)
#                 through --streaming-slots N (default 2) device slots: forward time as a ratio to the resident
#                 one, bytes copied per pass, the measured H2D bandwidth and the floor it sets, compute's wait (JSON
#                 lines `dit_streaming`). The Disk source is measured by the DitStreamingCuda tests. Runs without the
#                 tests and the other benchmarks (step limit 300 s; expected < 3 min on an H200)
#   --residency-bench  the residency plans (issue 17) in one run: bench_pipeline --memory-budgets 80,48,24 at
#                 1344x768x124 with 8 passes, then at 864x480x124 with 20 passes: per shape, the t2va denoise with no
#                 budget (resident on an H200), then under each budget on a fresh engine — per-pass denoise time as a
#                 ratio to the unbudgeted run's, measured peak vs the budget, the plan, H2D bytes per pass, copy
#                 bandwidth and overlap (JSON lines `memory_budget`). Every pass costs the same (the AdaLN tables
#                 are made before the first), so 8 passes measure 1344's ~5 s pass as 20 would, and keep the whole
#                 under 9 minutes (step limits 330 + 210 s). Options from --residency-args. Runs without the tests
#                 and the block and DiT benchmarks
#   --portable-bench  the non-Hopper paths forced on this GPU (H3_FORCE_PORTABLE=1, issue 17): the CUDA test
#                 binary under it (the test step's filter, plus PortableCuda*), then bench_dit at 864x480x124 and
#                 1344x768x124 on the default (Hopper) paths and with H3_FORCE_PORTABLE=1, and both times side by
#                 side. Without the default test step and the block and DiT benchmarks (--with-tests adds the
#                 former); ~3 min on an H200
#   --fasth3-bench  issue 23's full few-step generation: bench_pipeline --fasth3 at 1344x768x124 (the transformer a
#                 FastH3 student with random gates, every component resident): the student's request (4 passes,
#                 VSA-H3 tile 64 with its gates) end to end, decodes included, a first and a second generation in
#                 the process, at the student's sparsity (0) and any of --fasth3-args (e.g. "--sparsities 0,0.9");
#                 without the tests and the other benchmarks (~2 min on an H200)
#   --step "NAME LIMIT [VAR=VALUE ...] BINARY ARGS..."  also run the bundle's BINARY with ARGS (under those
#                 variables) as a step of its own after the tests, its log NAME.log (repeatable; in the order given)
#   --with-tests  run the test step even after an --only-* option
#   --no-benchmarks  without the default block and DiT benchmarks (the tests, --step's and the named modes only)
#   --dit-env NAME=VALUE  also run the DiT forward with that environment (repeatable: one run each)
#   --profile     also the DiT forward (and with --pipeline the video decode) once with H3_CUDA_PROFILE=1: device
#                 time per op
#   --zero-vectors  also the DiT forward with every 1-D weight zero (bench_dit --zero-vectors: peer_dit.py's init)
#   --peer-vectors  the reference's forward under both initializations of its 1-D weights
#                 (tools/reference/peer_dit_vectors.py: zero as peer_dit.py, random as ours), after --peer
#   --pipeline-env NAME=VALUE  also bench_pipeline with that environment (repeatable), with --pipeline
#   --no-hopper-tests  skip the separate step of our Hopper kernel's tests
#   --tests-filter F  the gtest filter of the CUDA test step (default: every CUDA suite but our Hopper kernel's)
#   --vsa-bench   issue 23 (FastH3's VSA-H3) in one run, ~4 minutes: the SparseAttentionCuda* tests, then bench_dit
#                 --vsa 0.9,0.0 at 864x480x124 and 1344x768x124 (the dense forward, then VSA-H3 tile 64 with
#                 random gates at each sparsity: time ratios and distances to the dense forward; options from
#                 --vsa-args; with --profile also a profiled 1344 run), then FastVideo's own VSA-H3 attention
#                 (tools/reference/peer_vsa.py: its Triton kernel, one block's attention at the same shapes) from
#                 FASTVIDEO_SRC, else from .ship/fastvideo.tgz + .ship/fastvideo_kernel.tgz unpacked here
#   .gpu/run.sh [--peer|--peer-if-ok] [--twin] [--head-major] [--skip-tests] [--attention-tests-only]
#               [--dit-shapes WxHxF,...] [--block-args "..."] [--pipeline|--only-pipeline] [--pipeline-args "..."]
#               [--peer-vae] [--fl2va-bench|--only-fl2va-bench] [--fl2va-args "..."]
#               [--ref2va-bench|--only-ref2va-bench] [--ref2va-args "..."] [--ref2va-peer-dit]
#               [--speed-controls-bench] [--speed-args "..."] [--cancel-bench]   (SPEED_CONFIGS="NAME=JSON;..." replaces the settings)
#               [--streaming-bench] [--streaming-slots N]
#               [--residency-bench] [--residency-args "..."]
#               [--vsa-bench] [--vsa-args "..."] [--fasth3-bench] [--fasth3-args "..."] [--step "..."]
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-out}
export OUT
mkdir -p "$OUT"
PEER=0
TESTS=1
BLOCK=1
FULLWIDTH=0
TWIN=0
HEAD_MAJOR=0
TEST_FILTER='BackendCuda*:DitCuda*'
BLOCK_ARGS=""
DIT_SHAPES=512x512x22,864x480x124,1344x768x124
PIPELINE=0
DIT=1
PIPELINE_ARGS=""
PEER_VAE=0
FL2VA_BENCH=0
FL2VA_ARGS=""
KEYFRAME_BENCH=0
KEYFRAME_ARGS=""
REF2VA_BENCH=0
REF2VA_ARGS=""
REF2VA_PEER_DIT=0
REF2VA_ENVS=()
REF2VA_PROFILE=0
SPEED_BENCH=0
STREAMING_BENCH=0
STREAMING_SLOTS=2
SPEED_ARGS=""
CANCEL_BENCH=0
FP8_BENCH=0
FP8_ARGS=""
FP8_PROFILE=0
RESIDENCY_BENCH=0
RESIDENCY_ARGS=""
PORTABLE_BENCH=0
VSA_BENCH=0
VSA_ARGS=""
FASTH3_BENCH=0
FASTH3_ARGS=""
EXTRA_STEPS=()
# The settings of --speed-controls-bench (NAME=JSON;...). layers, token_reduction and core_reuse are the DiT-level
# controls' request keys.
SPEED_DEFAULT='reuse2={"reuse":2};reuse3={"reuse":3};layers45={"layers":45};layers40={"layers":40};'
SPEED_DEFAULT+='token_reduction={"token_reduction":true};core_reuse4={"core_reuse":4};'
SPEED_DEFAULT+='render576x320={"render_width":576,"render_height":320};render384={"render_width":384,"render_height":384};'
SPEED_DEFAULT+='render320={"render_width":320,"render_height":320};balanced={"layers":45,"reuse":2};'
SPEED_DEFAULT+='balanced_token_reduction={"layers":45,"reuse":2,"token_reduction":true};'
SPEED_DEFAULT+='aggressive={"render_width":320,"render_height":320,"layers":40,"reuse":3}'
SPEED_CONFIGS=${SPEED_CONFIGS:-$SPEED_DEFAULT}
WITH_TESTS=0
DIT_ENVS=()
PROFILE=0
ZERO_VECTORS=0
PEER_VECTORS=0
PIPELINE_ENVS=()
HOPPER_TESTS=1
while [ $# -gt 0 ]; do
  case $1 in
    --peer) PEER=1 ;;
    --peer-if-ok) PEER=if-ok ;;
    --twin) TWIN=1 ;;
    --head-major) HEAD_MAJOR=1 ;;
    --skip-tests) TESTS=0 ;;
    --no-benchmarks) DIT=0; BLOCK=0 ;;
    --skip-block) BLOCK=0 ;;
    --fullwidth) FULLWIDTH=1 ;;
    --attention-tests-only) TEST_FILTER='BackendCudaAttention.*:DitCuda*' ;;
    --dit-shapes) DIT_SHAPES=$2; shift ;;
    --block-args) BLOCK_ARGS=$2; shift ;;
    --pipeline) PIPELINE=1 ;;
    --only-pipeline) PIPELINE=1; DIT=0; BLOCK=0 ;;
    --pipeline-args) PIPELINE_ARGS=$2; shift ;;
    --peer-vae) PEER_VAE=1 ;;
    --fl2va-bench) FL2VA_BENCH=1 ;;
    --only-fl2va-bench) FL2VA_BENCH=1; TESTS=0; DIT=0; BLOCK=0 ;;
    --fl2va-args) FL2VA_ARGS=$2; shift ;;
    --keyframe-bench) KEYFRAME_BENCH=1; TESTS=0; DIT=0; BLOCK=0 ;;
    --keyframe-args) KEYFRAME_ARGS=$2; shift ;;
    --ref2va-bench) REF2VA_BENCH=1 ;;
    --only-ref2va-bench) REF2VA_BENCH=1; TESTS=0; DIT=0; BLOCK=0 ;;
    --ref2va-args) REF2VA_ARGS=$2; shift ;;
    --ref2va-peer-dit) REF2VA_PEER_DIT=1 ;;
    --ref2va-env) REF2VA_ENVS+=("$2"); shift ;;
    --ref2va-profile) REF2VA_PROFILE=1 ;;
    --speed-controls-bench) SPEED_BENCH=1; TESTS=0; DIT=0; BLOCK=0 ;;
    --speed-args) SPEED_ARGS=$2; shift ;;
    --cancel-bench) CANCEL_BENCH=1 ;;
    --fp8-bench) FP8_BENCH=1; TEST_FILTER='Fp8Cuda*:Fp8FusedCuda*:Fp8AttentionCuda*'; HOPPER_TESTS=0; DIT=0; BLOCK=0 ;;
    --fp8-args) FP8_ARGS=$2; shift ;;
    --fp8-profile) FP8_PROFILE=1 ;;
    --streaming-bench) STREAMING_BENCH=1; TESTS=0; DIT=0; BLOCK=0 ;;
    --streaming-slots) STREAMING_SLOTS=$2; shift ;;
    --residency-bench) RESIDENCY_BENCH=1; TESTS=0; DIT=0; BLOCK=0 ;;
    --residency-args) RESIDENCY_ARGS=$2; shift ;;
    --portable-bench) PORTABLE_BENCH=1; TESTS=0; DIT=0; BLOCK=0 ;;
    --vsa-bench) VSA_BENCH=1; TEST_FILTER='SparseAttentionCuda*'; HOPPER_TESTS=0; DIT=0; BLOCK=0 ;;
    --vsa-args) VSA_ARGS=$2; shift ;;
    --fasth3-bench) FASTH3_BENCH=1; TESTS=0; DIT=0; BLOCK=0 ;;
    --fasth3-args) FASTH3_ARGS=$2; shift ;;
    --step) EXTRA_STEPS+=("$2"); shift ;;
    --with-tests) WITH_TESTS=1 ;;
    --dit-env) DIT_ENVS+=("$2"); shift ;;
    --profile) PROFILE=1 ;;
    --zero-vectors) ZERO_VECTORS=1 ;;
    --pipeline-env) PIPELINE_ENVS+=("$2"); shift ;;
    --no-hopper-tests) HOPPER_TESTS=0 ;;
    --peer-vectors) PEER_VECTORS=1 ;;
    --tests-filter) TEST_FILTER=$2; shift ;;
    --with-pipeline-tests) PIPELINE_TESTS=1 ;;
    *) echo "unknown argument $1"; exit 2 ;;
  esac
  shift
done

[ $WITH_TESTS = 1 ] && TESTS=1

# cuDNN, cuBLAS(Lt), NVRTC (cuDNN's runtime-compiled engines) and NCCL (opened at run time by the multi-GPU
# transformer) wherever this image keeps them (CUDA toolkit or PyTorch's wheels).
libdirs=$(find /usr/local /opt /usr/lib -xdev \( -name 'libcudnn.so.9' -o -name 'libcublasLt.so.13' \
  -o -name 'libcublas.so.13' -o -name 'libnvrtc.so.13' -o -name 'libnvrtc-builtins.so.13*' -o -name 'libnccl.so.2' \) 2>/dev/null |
  xargs -r -n1 dirname | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH="${libdirs}$HERE/lib:${LD_LIBRARY_PATH:-}"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.mem,temperature.gpu \
  --format=csv | tee "$OUT/nvidia-smi.txt"
ldd "$HERE/h3_cuda_tests" | grep -E "not found|cudnn|cublas|nvrtc" || true

# The bundle's copy of a reference script (bundle.sh copies some beside this file), else the checkout's.
ref_script() { if [ -f "$HERE/$1" ]; then echo "$HERE/$1"; else echo "tools/reference/$1"; fi; }
LAST_RC=0
step() {
  local name=$1 limit=$2
  shift 2
  echo "=== $name (limit ${limit}s): $*"
  local t0=$(date +%s)
  timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
  LAST_RC=${PIPESTATUS[0]}
  echo "=== $name exit $LAST_RC after $(( $(date +%s) - t0 ))s"
}

# Our Hopper kernel's SASS: its GEMMs must be HGMMA (wgmma) instructions.
if command -v cuobjdump >/dev/null; then
  echo "=== HGMMA instructions in h3_cuda_tests: $(cuobjdump --dump-sass "$HERE/h3_cuda_tests" 2>/dev/null | grep -c HGMMA)"
fi
HOPPER_OK=0
TEST_LIMIT=150
# The pipeline's tests run with --with-pipeline-tests, and with the pipeline benchmark (--pipeline, --only-pipeline).
[ $PIPELINE = 1 ] && PIPELINE_TESTS=1
[ "${PIPELINE_TESTS:-0}" = 1 ] && TEST_FILTER="$TEST_FILTER:PipelineCuda*:ModelsRandom*:PipelineMemory*" && TEST_LIMIT=300
if [ $TESTS = 1 ]; then
  H3_SOURCE_DIR=$PWD step tests $TEST_LIMIT "$HERE/h3_cuda_tests" --gtest_filter="$TEST_FILTER:-BackendCudaAttention.Hopper*"
  if [ $HOPPER_TESTS = 1 ]; then
    H3_LOG_LEVEL=debug step tests_hopper 150 "$HERE/h3_cuda_tests" --gtest_filter='BackendCudaAttention.Hopper*'
    [ $LAST_RC = 0 ] && HOPPER_OK=1
  fi
fi
# --step's: NAME LIMIT [VAR=VALUE ...] BINARY ARGS...
for spec in "${EXTRA_STEPS[@]}"; do
  read -r -a words <<< "$spec"
  name=${words[0]} limit=${words[1]}
  vars=()
  i=2
  while [ $i -lt ${#words[@]} ] && [[ ${words[$i]} == [A-Za-z_]*=* ]]; do vars+=("${words[$i]}"); i=$((i + 1)); done
  step "$name" "$limit" env "${vars[@]}" "$HERE/${words[$i]}" "${words[@]:$((i + 1))}"
done
# Issue 17: the paths of a GPU other than Hopper, forced here. Then the DiT forward both ways, same run.
if [ $PORTABLE_BENCH = 1 ]; then
  H3_FORCE_PORTABLE=1 H3_SOURCE_DIR=$PWD step tests_portable $TEST_LIMIT "$HERE/h3_cuda_tests" \
    --gtest_filter="$TEST_FILTER:PortableCuda*:-BackendCudaAttention.Hopper*"
  step dit_hopper 100 "$HERE/bench_dit" --shapes 864x480x124,1344x768x124 --reps 3
  H3_FORCE_PORTABLE=1 step dit_portable 100 "$HERE/bench_dit" --shapes 864x480x124,1344x768x124 --reps 3
  echo "=== DiT forward: default (Hopper) paths vs H3_FORCE_PORTABLE=1, same run (median s)"
  for f in dit_hopper dit_portable; do
    grep -h '^JSON {"bench":"dit"' "$OUT/$f.log" | sed -E "s/.*\"shape\":\"([^\"]*)\".*\"median_s\":([0-9.]*).*/$f \1 \2/"
  done | awk '{ t[$2 " " $1] = $3; if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 } }
    END { printf "%-14s %10s %10s %8s\n", "shape", "hopper", "portable", "ratio"
          for (i = 1; i <= n; i++) { s = order[i]; h = t[s " dit_hopper"]; p = t[s " dit_portable"]
            printf "%-14s %10s %10s %8s\n", s, h, p, (h > 0 && p > 0) ? sprintf("%.3f", p / h) : "-" } }' | tee "$OUT/portable_bench.txt"
fi
# Issue 7's correctness at full width: the reference's 4-block model in bf16 and f32 (tools/reference/dit_fullwidth.py,
# diffusers from .ref), our CUDA forward of the same weights and case, and the distances of both to the f32 result.
if [ $FULLWIDTH = 1 ]; then
  FW=$(mktemp -d)
  PYTHONPATH=$PWD/.ref PYTHONUNBUFFERED=1 step fullwidth_ref 200 python3 tools/reference/dit_fullwidth.py --layers 4 --out $FW
  step fullwidth_ours 150 "$HERE/gpu_tool" dit --transformer $FW/transformer --case $FW/case.safetensors \
    --out $FW/ours.safetensors --device cuda
  step fullwidth_compare 60 python3 tools/reference/compare_fullwidth.py --reference $FW/reference.safetensors \
    --ours $FW/ours.safetensors
  # Issue 18: the same weights and case with --precision fp8 (FP8 products and, on Hopper, FP8 attention).
  step fullwidth_ours_fp8 150 "$HERE/gpu_tool" dit --transformer $FW/transformer --case $FW/case.safetensors \
    --out $FW/ours_fp8.safetensors --device cuda --precision fp8
  step fullwidth_compare_fp8 60 python3 tools/reference/compare_fullwidth.py --reference $FW/reference.safetensors \
    --ours $FW/ours_fp8.safetensors
fi
[ $BLOCK = 1 ] && H3_LOG_LEVEL=debug step block 150 "$HERE/bench_cuda_block" $BLOCK_ARGS
[ $DIT = 1 ] && step dit 150 "$HERE/bench_dit" --shapes "$DIT_SHAPES"
[ $TWIN = 1 ] && H3_DISABLE_HOPPER_ATTENTION=1 step dit_cudnn 150 "$HERE/bench_dit" --shapes "$DIT_SHAPES"
[ $HEAD_MAJOR = 1 ] && H3_ATTENTION_LAYOUT=head-major step dit_head_major 150 "$HERE/bench_dit" --shapes "$DIT_SHAPES"
for kv in "${DIT_ENVS[@]}"; do
  step "dit_$(printf %s "$kv" | tr -c 'A-Za-z0-9_' '_')" 150 env "$kv" "$HERE/bench_dit" --shapes "$DIT_SHAPES"
done
[ $ZERO_VECTORS = 1 ] && step dit_zero_vectors 150 "$HERE/bench_dit" --shapes "$DIT_SHAPES" --zero-vectors
[ $PROFILE = 1 ] && [ $DIT = 1 ] && H3_CUDA_PROFILE=1 step dit_profile 150 "$HERE/bench_dit" --shapes "$DIT_SHAPES" --reps 1
if [ $PEER = 1 ] || { [ $PEER = if-ok ] && [ $HOPPER_OK = 1 ]; }; then
  PYTHONUNBUFFERED=1 step peer 170 python3 "$HERE/peer_dit.py" --backends cudnn --reps 3
fi
if [ $PEER_VECTORS = 1 ]; then
  PYTHONUNBUFFERED=1 step peer_vectors 200 python3 tools/reference/peer_dit_vectors.py --shapes "$DIT_SHAPES"
fi
if [ $PIPELINE = 1 ]; then
  # shellcheck disable=SC2086
  step pipeline 400 "$HERE/bench_pipeline" $PIPELINE_ARGS
  # shellcheck disable=SC2086
  [ $PROFILE = 1 ] && H3_CUDA_PROFILE=1 step pipeline_profile 200 "$HERE/bench_pipeline" --skip-generation \
    --reps-video 1 --reps-audio 1 --reps-conditioner 1
  for kv in "${PIPELINE_ENVS[@]}"; do
    # shellcheck disable=SC2086
    step "pipeline_$(printf %s "$kv" | tr -c 'A-Za-z0-9_' '_')" 400 env "$kv" "$HERE/bench_pipeline" $PIPELINE_ARGS
  done
fi
# fl2va: ours first (every component resident, ~100 GB), then the references one after another.
if [ $FL2VA_BENCH = 1 ]; then
  # shellcheck disable=SC2086
  step fl2va_bench 220 "$HERE/bench_pipeline" --fl2va --skip-isolated --skip-generation --shapes 864x480x124 \
    --passes 3 $FL2VA_ARGS
  PEER_VAE=1
fi
if [ $SPEED_BENCH = 1 ]; then
  # shellcheck disable=SC2086
  step speed_controls_bench 540 "$HERE/bench_pipeline" --speed-controls --skip-isolated --skip-generation \
    --shapes 864x480x124,512x512x22 --passes 20 --speed-configs "$SPEED_CONFIGS" $SPEED_ARGS
fi
if [ $CANCEL_BENCH = 1 ]; then
  step cancel_bench 200 "$HERE/bench_pipeline" --cancel-latency --skip-isolated --skip-generation \
    --shapes 864x480x124 --passes 4
fi
if [ $FP8_BENCH = 1 ]; then
  # shellcheck disable=SC2086
  H3_CUDA_PROFILE=$FP8_PROFILE step fp8_bench 300 "$HERE/bench_dit" --precision fp8 --fp8-scaling channel \
    --fp8-fused on --fp8-attention --shapes 864x480x124,1344x768x124 --reps 2 $FP8_ARGS
fi
if [ $STREAMING_BENCH = 1 ]; then
  step streaming_bench 300 "$HERE/bench_dit" --shapes 864x480x124,1344x768x124 --reps 2 --streaming host \
    --slots "$STREAMING_SLOTS"
fi
if [ $RESIDENCY_BENCH = 1 ]; then
  # shellcheck disable=SC2086
  step residency_bench_1344 330 "$HERE/bench_pipeline" --memory-budgets 80,48,24 --shapes 1344x768x124 --passes 8 \
    $RESIDENCY_ARGS
  # shellcheck disable=SC2086
  step residency_bench_864 210 "$HERE/bench_pipeline" --memory-budgets 80,48,24 --shapes 864x480x124 --passes 20 \
    $RESIDENCY_ARGS
fi
if [ $VSA_BENCH = 1 ]; then
  # shellcheck disable=SC2086
  step vsa_bench 200 "$HERE/bench_dit" --shapes 864x480x124,1344x768x124 --reps 2 --vsa 0.9,0.0 $VSA_ARGS
  # shellcheck disable=SC2086
  [ $PROFILE = 1 ] && H3_CUDA_PROFILE=1 step vsa_profile 120 "$HERE/bench_dit" --shapes 1344x768x124 --reps 1 \
    --vsa 0.9 $VSA_ARGS
  FV=${FASTVIDEO_SRC:-}
  if [ -z "$FV" ] && [ -f .ship/fastvideo.tgz ]; then
    FV=$(mktemp -d)
    tar xzf .ship/fastvideo.tgz -C "$FV"
    [ -f .ship/fastvideo_kernel.tgz ] && tar xzf .ship/fastvideo_kernel.tgz -C "$FV"
  fi
  if [ -n "$FV" ]; then
    FASTVIDEO_SRC=$FV PYTHONUNBUFFERED=1 step peer_vsa 150 python3 "$(ref_script peer_vsa.py)"
  else
    echo "=== peer_vsa skipped: no FASTVIDEO_SRC and no .ship/fastvideo.tgz"
  fi
fi
if [ $FASTH3_BENCH = 1 ]; then
  # shellcheck disable=SC2086
  step fasth3_bench 240 "$HERE/bench_pipeline" --fasth3 --skip-isolated --shapes 1344x768x124 $FASTH3_ARGS
fi
if [ $KEYFRAME_BENCH = 1 ]; then
  # shellcheck disable=SC2086
  step keyframe_bench 200 "$HERE/bench_pipeline" --keyframe-only $KEYFRAME_ARGS
  PYTHONUNBUFFERED=1 step peer_keyframe 120 python3 "$(ref_script peer_keyframe.py)"
fi
if [ $PEER_VAE = 1 ]; then
  PYTHONUNBUFFERED=1 step peer_vae 240 python3 "$HERE/peer_vae.py"
fi
if [ $FL2VA_BENCH = 1 ]; then
  PYTHONUNBUFFERED=1 step peer_vision 120 python3 tools/reference/peer_vision.py
fi
# ref2va: ours first (the DiT alone, ~50 GB), then the references one after another. The scripts come with the
# bundle (bundle.sh copies them beside this file), else from the checkout.
if [ $REF2VA_BENCH = 1 ]; then
  REF2VA_LAYOUTS=${REF2VA_LAYOUTS:-${TMPDIR:-/tmp}/h3-ref2va-layouts}
  rm -rf "$REF2VA_LAYOUTS"
  # shellcheck disable=SC2086
  step ref2va_bench 300 "$HERE/bench_ref2va" --export-layouts "$REF2VA_LAYOUTS" $REF2VA_ARGS
  for kv in "${REF2VA_ENVS[@]}"; do
    vars=${kv%% -- *}
    extra=""
    [ "$vars" != "$kv" ] && extra=${kv#* -- }
    # shellcheck disable=SC2086
    step "ref2va_bench_$(printf %s "$vars" | tr -c 'A-Za-z0-9_' '_')" 300 env $vars "$HERE/bench_ref2va" $REF2VA_ARGS \
      $extra
  done
  # (without --conv-report: the default run's report is the one)
  # shellcheck disable=SC2086
  [ $REF2VA_PROFILE = 1 ] && H3_CUDA_PROFILE=1 step ref2va_bench_profile 300 "$HERE/bench_ref2va" \
    ${REF2VA_ARGS//--conv-report/}
  PYTHONUNBUFFERED=1 step peer_audio_encoder 150 python3 "$(ref_script peer_audio_encoder.py)"
  if [ $REF2VA_PEER_DIT = 1 ]; then
    PYTHONUNBUFFERED=1 step peer_ref2va_dit 240 python3 "$(ref_script peer_ref2va_dit.py)" --layouts "$REF2VA_LAYOUTS"
  fi
fi
LC_ALL=C grep -h '^JSON' "$OUT"/*.log > "$OUT/summary.jsonl" 2>/dev/null || true
if [ -f "$OUT/peer_dit.json" ] || [ -f "$OUT/peer_dit_vectors.json" ]; then
  echo "=== issue 7: h3 / reference, same run"
  python3 tools/reference/dit_ratios.py "$OUT"
fi
if [ $FL2VA_BENCH = 1 ]; then
  echo "=== fl2va: h3 / reference, same run"
  python3 tools/reference/fl2va_ratios.py "$OUT"
fi
if [ $KEYFRAME_BENCH = 1 ]; then
  echo "=== keyframe encode: h3 by configuration / reference, same run"
  python3 "$(ref_script keyframe_ratios.py)" "$OUT"
fi
if [ $REF2VA_BENCH = 1 ]; then
  echo "=== ref2va: h3 / reference, same run"
  python3 "$(ref_script ref2va_ratios.py)" "$OUT"
fi
echo "=== tests"
grep -hE '^\[  (PASSED|FAILED) |^\[  SKIPPED \] [0-9]|FAILED TEST|^=== tests.* exit' "$OUT"/tests*.log 2>/dev/null
grep -hE '^\[  FAILED  \] [A-Za-z]' "$OUT"/tests*.log 2>/dev/null | sort -u
# The device tool brings back only a few files: every step's log in one.
for f in "$OUT"/*.log; do
  [ -f "$f" ] || continue
  echo "##### $(basename "$f")" >> "$OUT/logs.txt"
  cat "$f" >> "$OUT/logs.txt"
  rm -f "$f"
done
echo "=== summary"
cat "$OUT/summary.jsonl" 2>/dev/null
