// The CUDA backend: device 0, one stream, activations in bf16, f32 accumulation everywhere. GEMMs through cuBLASLt
// (gemm.h); attention through our Hopper kernel (kernels_attention_sm90.cu) where it applies (the device's paths
// include our Hopper kernels: compute capability 9.0, backend/cuda_arch.h; head_dim 64 or 128, non-causal), else
// cuDNN's fused SDPA (cudnn_sdpa.h), else our flash kernel (the portable fallback and twin); everything else through
// the fused kernels of kernels_*.cu, which run on every supported GPU. Memory through a caching allocator; uploads through
// pinned double-buffered staging with conversion on the device.
//
// Exact twins (environment, read when the backend is made):
//   H3_FORCE_PORTABLE=1            the paths of a GPU other than Hopper (no sm_90a kernel), on any GPU; the same
//                                  switch is also spelled H3_DISABLE_HOPPER_KERNELS=1 (backend/cuda_arch.h)
//   H3_DISABLE_CUBLASLT=1          plain cublasGemmEx instead of cuBLASLt
//   H3_DISABLE_HOPPER_ATTENTION=1  cuDNN's SDPA (or flash) where our Hopper attention kernel would run
//   H3_DISABLE_CUDNN_ATTENTION=1   our flash attention kernel instead of cuDNN's SDPA
//   H3_ATTENTION_LAYOUT=head-major attention reads q/k/v from head-major copies [Hq + 2·Hkv, rows, Dh] written by
//                                  the q/k kernel instead of in place in the packed qkv rows (same function; on an
//                                  H200 with cuDNN 9.19 no faster, BENCHMARKS.md, so not the default)
//   H3_DISABLE_QK_ROW_KERNEL=1     the attention's q/k RMSNorm + RoPE by one warp per head instead of one block per
//                                  row (kernels_attention.cu)
//   H3_DISABLE_TF32_CONV=1         audio and video VAE convolutions in f32 by our kernels (kernels_audio_vae.cu,
//                                  kernels_video_encoder.cu) instead of cuDNN's with TF32 tensor-core math
//                                  (cudnn_conv.h: the reference's default numerics)
//   H3_DISABLE_CUDNN_CONV_GRAPH=1  1-D and 3-D forward convolutions through cuDNN's legacy API (its v7 heuristic's
//                                  first deterministic algorithm within 64 MiB) instead of its graph API
//                                  (cudnn_conv.h)
//   H3_DISABLE_CONV_AUTOTUNE=1     the graph API's heuristic first engine configuration (PyTorch's choice with
//                                  cudnn.benchmark off) instead of the fastest of its first 8, timed once per shape
//   H3_DISABLE_FUSED_CONV_SNAKE=1  conv1d_snake as conv1d (with its bias), residual_add and snake instead of a
//                                  bias-free convolution and one epilogue kernel (bias, shortcut, Snake; the same
//                                  bits, given the same convolution algorithm)
//   H3_DISABLE_TILED_POOLED_ATTENTION=1 the audio encoder's pooled causal attention by its row-per-block kernel
//                                  instead of the tiled one (kernels_audio_encoder.cu)
//   H3_DISABLE_CHANNELS_LAST_CONV=1 the audio encoder's trunk channels-first ([B, C, T]: conv1d_snake) instead of
//                                  channels-last ([B, T, C]: conv1d_snake_nlc on cuDNN's NHWC plans); the
//                                  channels-last trunk needs the graph API and TF32 (prefers_channels_last_conv1d)
//   H3_DISABLE_CUDA_CONV_TILED=1   those f32 convolutions by the direct one-output-per-thread kernels
//   H3_DISABLE_CUDA_AUDIO_KERNELS=1 audio VAE ops (conv1d, conv_transpose1d, snake_beta_aa, divide, and the
//                                  encoder's snake, transpose_last_two, multiply, pooled_causal_attention) through
//                                  the CPU backend (download, compute, upload: the Backend defaults)
//   H3_DISABLE_CONV3D_AS_2D=1      a 3-D convolution with one window over the whole time axis (a keyframe through
//                                  the encoder's causal convolutions) through cuDNN's 3-D plan instead of its 2-D
//                                  one over (channel, frame) pairs (cudnn_conv.h)
//   H3_DISABLE_KEYFRAME_CONV_SLICE=1 a single frame through a causal 3-D convolution (kt − 1 zero frames and the
//                                  frame: one window) convolved with the whole kernel, the zero frames included,
//                                  instead of with the kernel's last frame alone (a cached copy of that slice) over
//                                  the frame padded spatially — the same sums less kt − 1 frames of zero products
//   H3_DISABLE_CHANNELS_LAST_CONV3D=1 those keyframe convolutions channels-first (NCHW) instead of channels-last
//                                  (NHWC: a padding kernel that writes channels-last, cuDNN's NHWC graph plans with a
//                                  cached channels-last weight slice, a transpose back with the bias); needs the
//                                  slice, the 2-D fold, the graph API and TF32
//   H3_DISABLE_SPLIT_GROUP_NORM=1  frame_group_norm by one block per (group, frame) always, instead of splitting
//                                  each over several blocks where there are few (a keyframe's 32; three launches,
//                                  partial sums in float64 added in a fixed order)
//   H3_DISABLE_CUDA_VIDEO_KERNELS=1 video VAE ops (the encoder's conv3d and frame_group_norm, the decoder's
//                                  stitching and pixel conversion) through the CPU backend
//   H3_DISABLE_FUSED_MODULATE=1    gated_residual_modulate as its two kernels (gated residual, then RMSNorm +
//                                  modulate) instead of the fused one-pass kernel (bit-identical results)
//   H3_DISABLE_FUSED_RESIDUAL_NORM=1 residual_rms_norm as residual_add then rms_norm (bit-identical results)
//   H3_DISABLE_SPARSE_KERNEL=1     FastH3's block-sparse attention ops (tile means, scores, routing, the routed
//                                  attention, the pooled branch) by the Backend defaults: download, the CPU's
//                                  float32 reference (models/dit/dit_sparse_attention.h), upload
//   H3_DISABLE_SPARSE_HOPPER=1     the routed block-sparse attention by the portable mma.sync kernel
//                                  (kernels_sparse_attention.cu) instead of the Hopper one on a compute capability 9.0
//                                  device (kernels_sparse_attention_sm90.cu)
// Tuning (the same function): H3_HOPPER_KEY_TILE=128 selects 128-key K/V tiles in our Hopper attention kernel
// instead of 176 (FlashAttention-3's choice for head_dim 128; 2.6-4% faster on an H200, BENCHMARKS.md);
// H3_HOPPER_HD64_CONSUMERS=2 runs head_dim 64 (the video VAE) with two consumer warpgroups and H3_HOPPER_KEY_TILE's
// tiles instead of three with 128-key tiles (16% less attention time in the 864x480x124 decode, BENCHMARKS.md).
// Measurement (not a twin): H3_CUDA_PROFILE=1 records device time per op (cuda_profile.h, Backend::op_profile_report()).
// FP8 (--precision fp8, pipeline/precision.h reads these): H3_DISABLE_FP8=1 runs bf16 instead (the exact twin);
// H3_FP8_WEIGHT_SCALING=block selects 128×128 weight blocks instead of per-channel scales (measurement);
// H3_DISABLE_FP8_FAST_ACCUM=1 runs the FP8 products with cuBLASLt's promoted f32 accumulation instead of its
// fast-accumulation mode (gemm_fp8.h; 2.3% of the 1344x768x124 forward, the same velocity cosine: BENCHMARKS.md);
// H3_DISABLE_FP8_FUSED_QUANT=1 quantizes the FP8 products' activations in a separate pass after the bf16 ops that
// make them instead of inside those ops' kernels (bit-identical results);
// H3_DISABLE_FP8_ATTENTION=1 keeps the transformer's attention bf16 under --precision fp8 (attention computed in FP8,
// self_attention_in_fp8, is our Hopper kernel kernels_attention_fp8_sm90.cu: compute capability 9.0 with the sm_90a
// code; a shape it does not take runs in bf16, said once in the log). With FP8 linears (per-channel scaling), that
// attention writes the out product's activation itself: E4M3 codes, every row of a segment scaled by the segment's
// bound on |O| (cuda_kernels.h's Fp8AttentionCodes); H3_DISABLE_FP8_ATTENTION_CODES=1 writes its bf16 output and
// quantizes that per token by its own largest value in a separate pass instead (the rule of the other activations).
// That kernel's arithmetic choices (cuda_kernels.h's Fp8AttentionSchedule; the emulation follows each):
// H3_FP8_ATTENTION_TILE_ACCUMULATOR=1 gives every key tile's P·V a fresh accumulator added to O in f32 on the CUDA
// cores, with row sums of the unrounded P (the kernel's first design), instead of H3_FP8_ATTENTION_TENSOR_SUM_TILES
// (1, 2 or 4; default 4) tiles' P·V and row sums (an extra column of ones in vᵀ) summed on the tensor cores before
// they go into O; H3_FP8_ATTENTION_POLY_CHUNKS=4 takes 4 of every tile's 16 chunks of 8 keys' exponentials by a
// polynomial on the FMA pipes instead of the SFU (cpu_fp8_attention.h's fp8_attention_exp2_poly);
// H3_FP8_ATTENTION_KEY_TILE=128 sets the keys per tile and rows per k scale (default 192, which takes no polynomial,
// 3 stages or tile accumulator: cuda::fp8_attention_schedule_refusal). Tuning (the same arithmetic):
// H3_FP8_ATTENTION_STAGES=3 gives the 128-key kernel a K / vᵀ ring of three tiles instead of two.
#include "backend/cuda/cuda_backend.h"

#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_allocator.h"
#include "backend/device.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_pinned.h"
#include "backend/cuda/cuda_profile.h"
#include "backend/cuda/cudnn_conv.h"
#include "backend/cuda/cudnn_sdpa.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/gemm_fp8.h"
#include "backend/cuda/kernels_fp8.h"
#include "backend/cuda/kernels_audio_encoder.h"
#include "backend/cuda/kernels_sparse_attention.h"
#include "backend/cuda/kernels_vae.h"
#include "util/env.h"
#include "util/log.h"
#include "util/thread_pool.h"

namespace h3 {

static_assert(cuda::kSnakeRatio == kSnakeAaRatio, "the snake kernel's resampling ratio must be the op's");

namespace {

using cuda::Elem;
using cuda::In;
using cuda::Out;

constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;
constexpr size_t kStagingBytes = size_t(64) << 20;  // per pinned upload buffer (two of them)

int64_t last_dim(const Tensor& t) { return t.ndim() ? t.dim(-1) : 1; }
int64_t rows_of(const Tensor& t) { return t.numel() / std::max<int64_t>(last_dim(t), 1); }

bool is_float16(DType d) { return d == DType::BF16 || d == DType::F16; }
bool is_kernel_float(DType d) { return d == DType::F32 || is_float16(d); }

Elem elem_of(DType d) {
  switch (d) {
    case DType::F32: return Elem::F32;
    case DType::BF16: return Elem::BF16;
    case DType::F16: return Elem::F16;
    default: fail("CUDA backend: no float kernels for dtype ", dtype_name(d));
  }
}

cudaDataType_t cuda_type(DType d) {
  switch (d) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    default: fail("linear on CUDA: dtype ", dtype_name(d), " is not F32, BF16 or F16");
  }
}

void check_device(const Tensor& t, const char* op, const char* what) {
  H3_CHECK(t.device() == Device::CUDA, op, ": ", what, " ", t.str(), " is not a CUDA tensor (use upload/empty)");
}

In in(const Tensor& t, const char* op, const char* what) {
  check_device(t, op, what);
  H3_CHECK(is_kernel_float(t.dtype()), op, ": ", what, " ", t.str(), " must be F32, BF16 or F16");
  return In{t.data(), elem_of(t.dtype())};
}
In in_opt(const Tensor* t, const char* op, const char* what) { return t ? in(*t, op, what) : In{}; }
Out out(const Tensor& t, const char* op, const char* what) {
  const In i = in(t, op, what);
  return Out{const_cast<void*>(i.p), i.t};
}
const int32_t* index(const Tensor& t, const char* op, const char* what) {
  check_device(t, op, what);
  H3_CHECK(t.dtype() == DType::I32, op, ": ", what, " ", t.str(), " must be I32");
  return static_cast<const int32_t*>(t.data());
}

// F32 device data of a signal op's operand (the op's check_* has verified the dtype and shape).
const float* f32_in(const Tensor& t, const char* op) {
  check_device(t, op, "operand");
  return static_cast<const float*>(t.data());
}
float* f32_out(const Tensor& t, const char* op) {
  check_device(t, op, "output");
  return static_cast<float*>(t.data());
}

// A point on the stream's timeline.
class CudaTimePoint final : public DeviceTimePoint {
 public:
  cudaEvent_t event = nullptr;
  ~CudaTimePoint() override {
    if (event) cudaEventDestroy(event);
  }
};

// A device → pinned host copy in flight on the copy stream. Holds the device tensor until the copy has landed (the
// caching allocator must not hand its block out while the copy stream still reads it).
class CudaPendingDownload final : public PendingDownload {
 public:
  CudaPendingDownload(Tensor host, Tensor device, cudaEvent_t done)
      : host_(std::move(host)), device_(std::move(device)), done_(done) {}
  ~CudaPendingDownload() override {
    if (done_) {
      cudaEventSynchronize(done_);
      cudaEventDestroy(done_);
    }
  }
  Tensor wait() override {
    if (done_) {
      const cudaError_t e = cudaEventSynchronize(done_);
      cudaEventDestroy(done_);
      done_ = nullptr;
      device_ = Tensor();
      H3_CUDA_CHECK(e, "download_async");
    }
    return host_;
  }

 private:
  Tensor host_, device_;
  cudaEvent_t done_ = nullptr;
};

class CudaBackend final : public Backend {
 public:
  // On device `ordinal` (made current for the calling thread: a backend's ops run on the thread that has it
  // current, parallel/rank_group.h).
  explicit CudaBackend(const ComputeDevice& device, int ordinal = 0) : compute_device_(device) {
    H3_CUDA_CHECK(cudaSetDevice(ordinal), "backend start");
    cuda_require_kernel_image(compute_device_);
    H3_CUDA_CHECK(cudaGetDeviceProperties(&props_, ordinal), "backend start");
    H3_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "backend start");
    alloc_ = std::make_shared<cuda::CachingAllocator>();
    H3_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&err_host_), sizeof(int), cudaHostAllocMapped),
                  "backend start");
    *err_host_ = 0;
    H3_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&err_dev_), err_host_, 0), "backend start");
    gemm_ws_ = alloc_->allocate(kGemmWorkspaceBytes);
    gemm_ = std::make_unique<cuda::Gemm>(stream_, gemm_ws_.get(), kGemmWorkspaceBytes);
    fp8_gemm_ = std::make_unique<cuda::Fp8Gemm>(stream_, gemm_ws_.get(), kGemmWorkspaceBytes,
                                                 !env_flag("H3_DISABLE_FP8_FAST_ACCUM"));
    sdpa_ = std::make_unique<cuda::CudnnSdpa>(stream_);
    use_cudnn_attention_ = !env_flag("H3_DISABLE_CUDNN_ATTENTION");
    use_hopper_attention_ = compute_device_.hopper_kernels && !env_flag("H3_DISABLE_HOPPER_ATTENTION");
    tiled_conv_ = !env_flag("H3_DISABLE_CUDA_CONV_TILED");
    tf32_conv_ = !env_flag("H3_DISABLE_TF32_CONV");
    const cuda::ConvChoice conv_choice = env_flag("H3_DISABLE_CUDNN_CONV_GRAPH") ? cuda::ConvChoice::Legacy
                                         : env_flag("H3_DISABLE_CONV_AUTOTUNE")  ? cuda::ConvChoice::Heuristic
                                                                                 : cuda::ConvChoice::Autotune;
    cudnn_conv_ = std::make_unique<cuda::CudnnConv>(stream_, !env_flag("H3_DISABLE_CONV3D_AS_2D"), conv_choice);
    fused_conv_snake_ = !env_flag("H3_DISABLE_FUSED_CONV_SNAKE");
    tiled_pooled_attention_ = !env_flag("H3_DISABLE_TILED_POOLED_ATTENTION");
    channels_last_conv_ = !env_flag("H3_DISABLE_CHANNELS_LAST_CONV");
    audio_kernels_ = !env_flag("H3_DISABLE_CUDA_AUDIO_KERNELS");
    video_kernels_ = !env_flag("H3_DISABLE_CUDA_VIDEO_KERNELS");
    keyframe_conv_slice_ = !env_flag("H3_DISABLE_KEYFRAME_CONV_SLICE");
    split_group_norm_ = !env_flag("H3_DISABLE_SPLIT_GROUP_NORM");
    channels_last_conv3d_ = !env_flag("H3_DISABLE_CHANNELS_LAST_CONV3D") && !env_flag("H3_DISABLE_CONV3D_AS_2D");
    qk_row_kernel_ = !env_flag("H3_DISABLE_QK_ROW_KERNEL");
    sparse_kernels_ = !env_flag("H3_DISABLE_SPARSE_KERNEL");
    sparse_hopper_ = compute_device_.hopper_kernels && !env_flag("H3_DISABLE_SPARSE_HOPPER");
    hopper_schedule_.key_tile = env_choice("H3_HOPPER_KEY_TILE", hopper_schedule_.key_tile, {128, 176});
    hopper_schedule_.hd64_consumers =
        env_choice("H3_HOPPER_HD64_CONSUMERS", hopper_schedule_.hd64_consumers, {2, 3});
    fused_modulate_ = !env_flag("H3_DISABLE_FUSED_MODULATE");
    fused_residual_norm_ = !env_flag("H3_DISABLE_FUSED_RESIDUAL_NORM");
    fused_fp8_quant_ = !env_flag("H3_DISABLE_FP8_FUSED_QUANT");
    fp8_attention_codes_ = !env_flag("H3_DISABLE_FP8_ATTENTION_CODES");
    fp8_attention_schedule_.exp2_poly_chunks =
        env_choice("H3_FP8_ATTENTION_POLY_CHUNKS", fp8_attention_schedule_.exp2_poly_chunks, {0, 4});
    fp8_attention_schedule_.stages = env_choice("H3_FP8_ATTENTION_STAGES", fp8_attention_schedule_.stages, {2, 3});
    fp8_attention_schedule_.tensor_sum_tiles =
        env_flag("H3_FP8_ATTENTION_TILE_ACCUMULATOR")
            ? 0
            : env_choice("H3_FP8_ATTENTION_TENSOR_SUM_TILES", fp8_attention_schedule_.tensor_sum_tiles, {1, 2, 4});
    fp8_attention_schedule_.key_tile = env_choice("H3_FP8_ATTENTION_KEY_TILE", fp8_attention_schedule_.key_tile,
                                                  {128, 192});
    if (const char* why = cuda::fp8_attention_schedule_refusal(fp8_attention_schedule_))
      fail("FP8 attention schedule (H3_FP8_ATTENTION_*): ", why);
    H3_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "backend start");
    pinned_ = std::make_shared<cuda::PinnedPool>();
    head_major_ = env_word("H3_ATTENTION_LAYOUT", "packed", {"packed", "head-major"}) == "head-major";
    if (env_flag("H3_CUDA_PROFILE")) profiler_ = std::make_unique<cuda::OpProfiler>(stream_);
  }

  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    profiler_.reset();
    sdpa_.reset();
    cudnn_conv_.reset();  // their cuDNN handles work on stream_: gone before it
    gemm_.reset();
    fp8_gemm_.reset();
    for (auto& st : staging_) {
      if (st.event) cudaEventDestroy(st.event);
      if (st.host) cudaFreeHost(st.host);
    }
    if (err_host_) cudaFreeHost(err_host_);
    if (copy_stream_) {
      cudaStreamSynchronize(copy_stream_);
      cudaStreamDestroy(copy_stream_);
    }
    if (stream_) cudaStreamDestroy(stream_);
  }

  Device device() const override { return Device::CUDA; }
  std::string name() const override { return "cuda"; }
  // bf16 on every supported GPU (compute capability 8.0 and newer have bf16 tensor cores: backend/cuda_arch.h).
  DType activation_dtype() const override { return DType::BF16; }

  // ---- memory ----
  Tensor empty(const Shape& shape, DType dt) override {
    for (int64_t d : shape) H3_CHECK(d >= 0, "negative dimension in shape ", shape_str(shape));
    const size_t bytes = std::max<size_t>(1, static_cast<size_t>(shape_numel(shape)) * dtype_size(dt));
    std::shared_ptr<void> block = alloc_->allocate(bytes);
    void* p = block.get();
    return Tensor::view(p, shape, dt, std::move(block), Device::CUDA);
  }

  Tensor upload(const Tensor& host, DType dt) override {
    const cuda::OpScope op_scope(profiler_.get(), "upload");
    H3_CHECK(host.device() == Device::CPU, "upload: source ", host.str(), " is not a CPU tensor");
    Tensor dst = empty(host.shape(), dt);
    if (host.numel() == 0) return dst;
    // The device converts between F32, BF16 and F16; anything else is converted on the host first.
    const bool device_converts = is_kernel_float(host.dtype()) && is_kernel_float(dt);
    const Tensor src = (host.dtype() == dt || device_converts) ? host : host.to(dt);
    copy_to_device(src, dst);
    return dst;
  }

  Tensor download(const Tensor& t) override {
    const cuda::OpScope op_scope(profiler_.get(), "download");
    check_device(t, "download", "source");
    Tensor h = Tensor::empty(t.shape(), t.dtype());
    if (t.nbytes()) H3_CUDA_CHECK(cudaMemcpyAsync(h.data(), t.data(), t.nbytes(), cudaMemcpyDeviceToHost, stream_),
                                  "download");
    synchronize();
    return h;
  }

  void convert(const Tensor& src, Tensor& dst) override {
    const cuda::OpScope op_scope(profiler_.get(), "convert");
    check_device(src, "convert", "source");
    check_device(dst, "convert", "destination");
    H3_CHECK(src.numel() == dst.numel(), "convert: ", src.str(), " -> ", dst.str(), " differ in element count");
    if (src.dtype() == dst.dtype()) {
      if (src.nbytes() && src.data() != dst.data())
        H3_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDeviceToDevice, stream_),
                      "convert");
      return;
    }
    cuda::launch_convert(in(src, "convert", "source"), out(dst, "convert", "destination"), src.numel(), stream_);
  }

  void fill(Tensor& t, float value) override {
    const cuda::OpScope op_scope(profiler_.get(), "fill");
    check_device(t, "fill", "tensor");
    if (t.numel() == 0) return;
    if (value == 0.f && !std::signbit(value)) {
      H3_CUDA_CHECK(cudaMemsetAsync(t.data(), 0, t.nbytes(), stream_), "fill");
      return;
    }
    H3_CHECK(is_kernel_float(t.dtype()), "fill on CUDA: ", t.str(), " can only be filled with 0");
    cuda::launch_fill(out(t, "fill", "tensor"), t.numel(), value, stream_);
  }

  void fill_random_normal(Tensor& t, uint64_t seed, float mean, float stddev) override {
    cuda::launch_fill_random_normal(out(t, "fill_random_normal", "tensor"), t.numel(), seed, stddev, stream_, mean);
  }

  void synchronize() override {
    H3_CUDA_CHECK(cudaStreamSynchronize(stream_), "synchronize");
    check_device_errors();
  }

  // The copy runs on its own stream after everything enqueued so far, into pinned memory from a reused pool, so
  // the compute stream goes on with later work meanwhile.
  std::unique_ptr<PendingDownload> download_async(const Tensor& t) override {
    const cuda::OpScope op_scope(profiler_.get(), "download_async");
    check_device(t, "download_async", "source");
    std::shared_ptr<void> block = pinned_->allocate(t.nbytes());
    Tensor host = Tensor::view(block.get(), t.shape(), t.dtype(), block, Device::CPU);
    cudaEvent_t ready = nullptr, done = nullptr;
    H3_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "download_async");
    H3_CUDA_CHECK(cudaEventRecord(ready, stream_), "download_async");
    H3_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, ready, 0), "download_async");
    cudaEventDestroy(ready);  // released once the wait has happened
    if (t.nbytes())
      H3_CUDA_CHECK(cudaMemcpyAsync(host.data(), t.data(), t.nbytes(), cudaMemcpyDeviceToHost, copy_stream_),
                    "download_async");
    H3_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "download_async");
    H3_CUDA_CHECK(cudaEventRecord(done, copy_stream_), "download_async");
    return std::make_unique<CudaPendingDownload>(std::move(host), t, done);
  }

  // ---- the copy queue: copy_stream_, beside stream_ ----
  Tensor pinned_host_buffer(size_t bytes) override {
    std::shared_ptr<void> block = pinned_->allocate(bytes);  // cudaHostAlloc's blocks are page-aligned
    void* p = block.get();
    return Tensor::view(p, {static_cast<int64_t>(bytes)}, DType::U8, std::move(block), Device::CPU);
  }

  // upload()'s conversions on the copy stream: the bytes as they are, or raw into a device scratch buffer and
  // converted there by the same kernel, or (dtypes the kernels do not convert) converted on the host first.
  void upload_async(const Tensor& host, Tensor& dst) override {
    H3_CHECK(host.device() == Device::CPU, "upload_async: source ", host.str(), " is not a CPU tensor");
    check_device(dst, "upload_async", "destination");
    H3_CHECK(host.numel() == dst.numel(), "upload_async: ", host.str(), " -> ", dst.str(), " differ in element count");
    if (host.numel() == 0) return;
    const bool device_converts = is_kernel_float(host.dtype()) && is_kernel_float(dst.dtype());
    if (host.dtype() == dst.dtype() || !device_converts) {
      // A host-converted temporary is pageable memory, which cudaMemcpyAsync has read before it returns.
      const Tensor src = host.dtype() == dst.dtype() ? host : host.to(dst.dtype());
      H3_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyHostToDevice, copy_stream_),
                    "upload_async");
      return;
    }
    if (copy_scratch_bytes_ < host.nbytes()) {
      H3_CUDA_CHECK(cudaStreamSynchronize(copy_stream_), "upload_async");  // the old scratch is no longer read
      copy_scratch_ = alloc_->allocate(host.nbytes());
      copy_scratch_bytes_ = host.nbytes();
    }
    H3_CUDA_CHECK(cudaMemcpyAsync(copy_scratch_.get(), host.data(), host.nbytes(), cudaMemcpyHostToDevice,
                                  copy_stream_),
                  "upload_async");
    cuda::launch_convert(In{copy_scratch_.get(), elem_of(host.dtype())}, Out{dst.data(), elem_of(dst.dtype())},
                         host.numel(), copy_stream_);
  }

  std::shared_ptr<DeviceTimePoint> mark_copy_time() override {
    auto tp = std::make_shared<CudaTimePoint>();
    H3_CUDA_CHECK(cudaEventCreate(&tp->event), "mark_copy_time");
    H3_CUDA_CHECK(cudaEventRecord(tp->event, copy_stream_), "mark_copy_time");
    return tp;
  }
  void compute_wait(const DeviceTimePoint& mark) override {
    H3_CUDA_CHECK(cudaStreamWaitEvent(stream_, event_of(mark, "compute_wait"), 0), "compute_wait");
  }
  void copy_wait(const DeviceTimePoint& mark) override {
    H3_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, event_of(mark, "copy_wait"), 0), "copy_wait");
  }
  void host_wait(const DeviceTimePoint& mark) override {
    H3_CUDA_CHECK(cudaEventSynchronize(event_of(mark, "host_wait")), "host_wait");
  }

  // ---- statistics ----
  MemoryStats memory_stats() const override {
    const auto st = alloc_->stats();
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
      cudaGetLastError();
      free_b = total_b = 0;
    }
    // Under a budget the device is the budget: what the allocator may still take from the driver is free.
    if (const std::optional<size_t> limit = alloc_->limit()) {
      free_b = std::min(free_b, *limit - std::min(*limit, st.reserved_bytes));
      total_b = std::min(total_b, *limit);
    }
    return MemoryStats{st.in_use_bytes, st.peak_in_use_bytes, st.reserved_bytes - st.in_use_bytes, free_b, total_b,
                       pinned_->cached_bytes()};
  }
  void reset_peak_memory() override { alloc_->reset_peak(); }
  void set_memory_limit(std::optional<uint64_t> bytes) { alloc_->set_limit(bytes); }
  std::optional<uint64_t> memory_limit() const { return alloc_->limit(); }

  std::shared_ptr<DeviceTimePoint> mark_time() override {
    auto tp = std::make_shared<CudaTimePoint>();
    H3_CUDA_CHECK(cudaEventCreate(&tp->event), "mark_time");
    H3_CUDA_CHECK(cudaEventRecord(tp->event, stream_), "mark_time");
    return tp;
  }
  double device_seconds(const DeviceTimePoint& from, const DeviceTimePoint& to) override {
    const auto* a = dynamic_cast<const CudaTimePoint*>(&from);
    const auto* b = dynamic_cast<const CudaTimePoint*>(&to);
    H3_CHECK(a && b, "device_seconds: time points of another backend");
    H3_CUDA_CHECK(cudaEventSynchronize(b->event), "device_seconds");
    float ms = 0.f;
    H3_CUDA_CHECK(cudaEventElapsedTime(&ms, a->event, b->event), "device_seconds");
    return ms / 1e3;
  }

  // ---- dense algebra ----
  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) override {
    check_device(x, "linear", "input");
    check_device(w, "linear", "weight");
    check_device(y, "linear", "output");
    const int64_t K = last_dim(x), M = rows_of(x);
    H3_CHECK(w.ndim() == 2 && w.dim(1) == K, "linear: weight ", w.str(), " does not match input ", x.str());
    const int64_t N = w.dim(0);
    const cuda::OpScope op_scope(profiler_.get(), [&] { return cat("linear ", K, "->", N, " ", dtype_name(w.dtype())); });
    H3_CHECK(rows_of(y) == M && last_dim(y) == N, "linear: output ", y.str(), " should be [", M, ", ", N, "]");
    if (bias) {
      check_device(*bias, "linear", "bias");
      H3_CHECK(bias->numel() == N, "linear: bias ", bias->str(), " does not match ", N, " outputs");
    }
    H3_CHECK(y.dtype() == w.dtype() || y.dtype() == DType::F32, "linear on CUDA: output ", y.str(),
             " must have the weight's dtype ", dtype_name(w.dtype()), " or F32");
    // An input in another dtype is rounded to the weight's first (the reference casts the activation to the
    // layer's dtype in the same place).
    Tensor xc = x;
    if (x.dtype() != w.dtype()) {
      xc = empty(x.shape(), w.dtype());
      convert(x, xc);
    }
    const bool fused_bias = bias && bias->dtype() == y.dtype();
    const bool bias_done = gemm_->run(xc.data(), w.data(), fused_bias ? bias->data() : nullptr, y.data(), M, N, K,
                                      cuda_type(w.dtype()), cuda_type(y.dtype()));
    if (bias && (!fused_bias || !bias_done))
      cuda::launch_add_bias(out(y, "linear", "output"), in(*bias, "linear", "bias"), M, N, stream_);
  }

  // ---- FP8 linears (issue 18): quantization kernels_fp8.cu, products gemm_fp8.h ----
  // The activations of the DiT blocks' products are quantized by the kernels that make them (the *_fp8 producers
  // below; H3_DISABLE_FP8_FUSED_QUANT=1: a separate pass after the bf16 op, the same bits).
  std::string fp8_unsupported_reason() const override {
    const int cc = props_.major * 10 + props_.minor;
    if (cc < 89)
      return cat("--precision fp8 needs a GPU of compute capability 8.9 or newer (FP8 tensor cores); ", props_.name,
                 " is ", props_.major, ".", props_.minor, " (use --precision bf16)");
    if (cublasLtGetVersion() < 120900)
      return cat("--precision fp8 needs cuBLASLt 12.9 or newer (its per-channel and block scaling); this one is ",
                 cublasLtGetVersion(), " (use --precision bf16)");
    return {};
  }

  // A Block weight whose products cuBLASLt refuses (Fp8Gemm::block_refusal) is stored per channel instead, with one
  // log line per weight shape naming it and cuBLASLt's reason.
  Fp8Weight quantize_weight_fp8(const Tensor& w, Fp8Scaling scaling) override {
    check_device(w, "quantize_weight_fp8", "weight");
    H3_CHECK(w.ndim() == 2, "quantize_weight_fp8: weight ", w.str(), " must be 2-D");
    const int64_t N = w.dim(0), K = w.dim(1);
    if (scaling == Fp8Scaling::Block) {
      if (const std::string why = fp8_gemm_->block_refusal(N, K); !why.empty()) {
        if (fp8_block_refused_.insert({N, K}).second)
          log_info("--precision fp8: ", N, "x", K, " weights keep per-channel scales: ", why);
        scaling = Fp8Scaling::Channel;
      }
    }
    const cuda::OpScope op_scope(profiler_.get(), "fp8_quantize_weight");
    Fp8Weight q;
    q.scaling = scaling;
    q.data = empty({N, K}, DType::U8);
    const In src = in(w, "quantize_weight_fp8", "weight");
    if (scaling == Fp8Scaling::Channel) {
      q.scale = empty({N}, DType::F32);
      cuda::launch_fp8_quantize_rows(src, N, K, false, q.data.ptr<uint8_t>(), q.scale.ptr<float>(), stream_);
    } else {
      const int64_t ld = (fp8_blocks(K) + 3) / 4 * 4;
      q.scale = empty({fp8_blocks(N), ld}, DType::F32);
      cuda::launch_fp8_quantize_weight_blocks(src, N, K, ld, q.data.ptr<uint8_t>(), q.scale.ptr<float>(), stream_);
    }
    return q;
  }

  // An uninitialized Fp8Activation of rows × K, its padding rows set (backend.h's layout).
  Fp8Activation fp8_activation(int64_t rows, int64_t K, Fp8Scaling scaling) {
    Fp8Activation q;
    q.rows = rows;
    q.scaling = scaling;
    q.codes = empty({fp8_activation_rows(rows, scaling), K}, DType::U8);
    q.scale = empty({fp8_activation_scale_count(rows, K, scaling)}, DType::F32);
    if (scaling == Fp8Scaling::Block)
      cuda::launch_fp8_pad_rows(rows, K, q.codes.ptr<uint8_t>(), q.scale.ptr<float>(), stream_);
    return q;
  }
  cuda::Fp8Out fp8_out(Fp8Activation& q) const {
    return cuda::Fp8Out{q.codes.ptr<uint8_t>(), q.scale.ptr<float>(), q.rows, q.scaling == Fp8Scaling::Block,
                        elem_of(activation_dtype())};
  }

  void quantize_activation_fp8(const Tensor& x, Fp8Scaling scaling, Fp8Activation& q) override {
    check_device(x, "fp8 activation quantize", "input");
    const int64_t K = last_dim(x), M = rows_of(x);
    q = fp8_activation(M, K, scaling);
    const cuda::OpScope op_scope(profiler_.get(), "fp8_quantize_activation");
    cuda::launch_fp8_quantize_rows(in(x, "fp8 activation quantize", "input"), M, K, scaling == Fp8Scaling::Block,
                                   q.codes.ptr<uint8_t>(), q.scale.ptr<float>(), stream_);
  }

  void linear_fp8_quantized(const Fp8Activation& x, const Fp8Weight& w, const Tensor* bias, Tensor& y) override {
    check_device(y, "linear_fp8", "output");
    H3_CHECK(w.defined() && w.data.ndim() == 2, "linear_fp8: no FP8 weight");
    H3_CHECK(x.defined() && x.codes.ndim() == 2, "linear_fp8: no FP8 activation");
    const int64_t K = x.codes.dim(1), M = x.rows, N = w.data.dim(0);
    H3_CHECK(w.data.dim(1) == K && x.scaling == w.scaling, "linear_fp8: weight ", w.data.str(),
             " does not match the activation ", x.codes.str(), " (or its scaling)");
    H3_CHECK(rows_of(y) == M && last_dim(y) == N && (y.dtype() == DType::BF16 || y.dtype() == DType::F32),
             "linear_fp8: output ", y.str(), " should be BF16 or F32 [", M, ", ", N, "]");
    const bool channel = w.scaling == Fp8Scaling::Channel;
    Tensor tail;
    if (!channel && M % 4 != 0) tail = empty({4, N}, y.dtype());
    const cuda::OpScope op_scope(profiler_.get(),
                                 [&] { return cat("linear_fp8 ", K, "->", N, channel ? " channel" : " block"); });
    fp8_gemm_->run(x.codes.ptr<uint8_t>(), x.scale.ptr<float>(), w.data.ptr<uint8_t>(), w.scale.ptr<float>(),
                   w.scaling, y.data(), M, N, K, cuda_type(y.dtype()), tail.defined() ? tail.data() : nullptr);
    if (bias) {
      check_device(*bias, "linear_fp8", "bias");
      H3_CHECK(bias->numel() == N, "linear_fp8: bias ", bias->str(), " does not match ", N, " outputs");
      cuda::launch_add_bias(out(y, "linear_fp8", "output"), in(*bias, "linear_fp8", "bias"), M, N, stream_);
    }
  }

  void rms_norm_modulate_fp8(const Tensor& x, const Tensor& w, float eps, const Tensor& table, int shift_param,
                             int scale_param, const Tensor& idx, Fp8Scaling scaling, Fp8Activation& q) override {
    const auto unfused = [&] {
      Backend::rms_norm_modulate_fp8(x, w, eps, table, shift_param, scale_param, idx, scaling, q);
    };
    if (!fused_fp8_quant_) return unfused();
    const char* op = "rms_norm_modulate_fp8";
    const cuda::RowTable mod = modulation_of(op, x, w, table, shift_param, scale_param, idx, x);
    q = fp8_activation(rows_of(x), last_dim(x), scaling);
    const cuda::OpScope op_scope(profiler_.get(), op);
    if (!cuda::launch_rms_norm_modulate_fp8(in(x, op, "input"), in(w, op, "norm weight"), eps, mod.table, mod.rows,
                                            mod.params, shift_param, scale_param, mod.idx, fp8_out(q), rows_of(x),
                                            last_dim(x), err_dev_, stream_))
      unfused();
  }

  void gated_residual_modulate_fp8(Tensor& x, const Tensor& y, const Tensor& gate_table, int gate_param,
                                   const Tensor& gate_idx, const Tensor& w, float eps, const Tensor& table,
                                   int shift_param, int scale_param, const Tensor& idx, Fp8Scaling scaling,
                                   Fp8Activation& q) override {
    const auto unfused = [&] {
      Backend::gated_residual_modulate_fp8(x, y, gate_table, gate_param, gate_idx, w, eps, table, shift_param,
                                           scale_param, idx, scaling, q);
    };
    if (!fused_fp8_quant_ || !fused_modulate_) return unfused();
    const char* op = "gated_residual_modulate_fp8";
    const cuda::RowTable gate = gate_of(op, x, y, gate_table, gate_param, gate_idx);
    const cuda::RowTable mod = modulation_of(op, x, w, table, shift_param, scale_param, idx, x);
    q = fp8_activation(rows_of(x), last_dim(x), scaling);
    const cuda::OpScope op_scope(profiler_.get(), op);
    if (!cuda::launch_gated_residual_modulate_fp8(out(x, op, "residual"), in(y, op, "branch output"), gate,
                                                  gate_param, in(w, op, "norm weight"), eps, mod, shift_param,
                                                  scale_param, fp8_out(q), rows_of(x), last_dim(x), err_dev_,
                                                  stream_))
      unfused();
  }

  void swiglu_fp8(const Tensor& u, bool value_first, Fp8Scaling scaling, Fp8Activation& q) override {
    const auto unfused = [&] { Backend::swiglu_fp8(u, value_first, scaling, q); };
    if (!fused_fp8_quant_) return unfused();
    const int64_t R = rows_of(u), F = last_dim(u) / 2;
    H3_CHECK(last_dim(u) % 2 == 0, "swiglu: input ", u.str(), " must have an even last dimension (value | gate)");
    q = fp8_activation(R, F, scaling);
    const cuda::OpScope op_scope(profiler_.get(), "swiglu_fp8");
    if (!cuda::launch_swiglu_fp8(in(u, "swiglu", "input"), value_first, fp8_out(q), R, F, stream_)) unfused();
  }

  bool fused_fp8_quant() const { return fused_fp8_quant_; }
  void set_fused_fp8_quant(bool on) { fused_fp8_quant_ = on; }

  // ---- normalization ----
  void rms_norm(const Tensor& x, const Tensor* w, float eps, Tensor& y) override {
    const cuda::OpScope op_scope(profiler_.get(), "rms_norm");
    const int64_t D = last_dim(x);
    H3_CHECK(y.numel() == x.numel(), "rms_norm: output ", y.str(), " vs input ", x.str());
    if (w) H3_CHECK(w->numel() == D, "rms_norm: weight ", w->str(), " must have ", D, " elements");
    cuda::launch_rms_norm(in(x, "rms_norm", "input"), in_opt(w, "rms_norm", "weight"), eps,
                          out(y, "rms_norm", "output"), rows_of(x), D, stream_);
  }

  void layer_norm(const Tensor& x, const Tensor* w, const Tensor* b, float eps, Tensor& y) override {
    const cuda::OpScope op_scope(profiler_.get(), "layer_norm");
    const int64_t D = last_dim(x);
    H3_CHECK(y.numel() == x.numel(), "layer_norm: output ", y.str(), " vs input ", x.str());
    if (w) H3_CHECK(w->numel() == D, "layer_norm: weight ", w->str(), " must have ", D, " elements");
    if (b) H3_CHECK(b->numel() == D, "layer_norm: bias ", b->str(), " must have ", D, " elements");
    cuda::launch_layer_norm(in(x, "layer_norm", "input"), in_opt(w, "layer_norm", "weight"),
                            in_opt(b, "layer_norm", "bias"), eps, out(y, "layer_norm", "output"), rows_of(x), D,
                            stream_);
  }

  void rms_norm_modulate(const Tensor& x, const Tensor& w, float eps, const Tensor& table, int shift_param,
                         int scale_param, const Tensor& idx, Tensor& y) override {
    const cuda::OpScope op_scope(profiler_.get(), "rms_norm_modulate");
    const char* op = "modulate";
    const cuda::RowTable mod = modulation_of(op, x, w, table, shift_param, scale_param, idx, y);
    cuda::launch_rms_norm_modulate(in(x, op, "input"), in(w, op, "norm weight"), eps, mod.table, mod.rows,
                                   mod.params, shift_param, scale_param, mod.idx, out(y, op, "output"), rows_of(x),
                                   last_dim(x), err_dev_, stream_);
  }

  // ---- residuals and elementwise ----
  void gated_residual(Tensor& x, const Tensor& y, const Tensor& table, int gate_param, const Tensor& idx) override {
    const cuda::OpScope op_scope(profiler_.get(), "gated_residual");
    const char* op = "gated_residual";
    const cuda::RowTable gate = gate_of(op, x, y, table, gate_param, idx);
    cuda::launch_gated_residual(out(x, op, "residual"), in(y, op, "branch output"), gate.table, gate.rows, gate.params,
                                gate_param, gate.idx, rows_of(x), last_dim(x), err_dev_, stream_);
  }

  void gated_residual_modulate(Tensor& x, const Tensor& y, const Tensor& gate_table, int gate_param,
                               const Tensor& gate_idx, const Tensor& w, float eps, const Tensor& table,
                               int shift_param, int scale_param, const Tensor& idx, Tensor& h) override {
    if (!fused_modulate_)
      return Backend::gated_residual_modulate(x, y, gate_table, gate_param, gate_idx, w, eps, table, shift_param,
                                              scale_param, idx, h);
    const cuda::OpScope op_scope(profiler_.get(), "gated_residual_modulate");
    const char* op = "gated_residual_modulate";
    const cuda::RowTable gate = gate_of(op, x, y, gate_table, gate_param, gate_idx);
    const cuda::RowTable mod = modulation_of(op, x, w, table, shift_param, scale_param, idx, h);
    cuda::launch_gated_residual_modulate(out(x, op, "residual"), in(y, op, "branch output"), gate, gate_param,
                                         in(w, op, "norm weight"), eps, mod, shift_param, scale_param,
                                         out(h, op, "output"), rows_of(x), last_dim(x), err_dev_, stream_);
  }

  void residual_add(Tensor& x, const Tensor& y, const Tensor* scale) override {
    const cuda::OpScope op_scope(profiler_.get(), "residual_add");
    const int64_t D = last_dim(x);
    H3_CHECK(y.numel() == x.numel(), "residual_add: ", x.str(), " vs ", y.str());
    if (scale) H3_CHECK(scale->numel() == D, "residual_add: scale ", scale->str(), " must have ", D, " elements");
    cuda::launch_residual_add(out(x, "residual_add", "residual"), in(y, "residual_add", "branch"),
                              in_opt(scale, "residual_add", "scale"), x.numel(), D, stream_);
  }

  void residual_rms_norm(Tensor& x, const Tensor& y, const Tensor* scale, const Tensor* w, float eps,
                         Tensor& h) override {
    if (!fused_residual_norm_) return Backend::residual_rms_norm(x, y, scale, w, eps, h);
    const cuda::OpScope op_scope(profiler_.get(), "residual_rms_norm");
    const char* op = "residual_rms_norm";
    const int64_t D = last_dim(x);
    H3_CHECK(y.numel() == x.numel(), op, ": ", x.str(), " vs ", y.str());
    H3_CHECK(h.numel() == x.numel(), op, ": output ", h.str(), " vs ", x.str());
    if (scale) H3_CHECK(scale->numel() == D, op, ": scale ", scale->str(), " must have ", D, " elements");
    if (w) H3_CHECK(w->numel() == D, op, ": weight ", w->str(), " must have ", D, " elements");
    cuda::launch_residual_rms_norm(out(x, op, "residual"), in(y, op, "branch"), in_opt(scale, op, "scale"),
                                   in_opt(w, op, "weight"), eps, out(h, op, "output"), rows_of(x), D, stream_);
  }

  void swiglu(const Tensor& u, bool value_first, Tensor& a) override {
    const cuda::OpScope op_scope(profiler_.get(), "swiglu");
    const int64_t F = last_dim(a), R = rows_of(a);
    H3_CHECK(last_dim(u) == 2 * F && rows_of(u) == R, "swiglu: input ", u.str(), " must be [", R, ", ", 2 * F, "]");
    cuda::launch_swiglu(in(u, "swiglu", "input"), value_first, out(a, "swiglu", "output"), R, F, stream_);
  }

  void silu(const Tensor& x, Tensor& y) override {
    const cuda::OpScope op_scope(profiler_.get(), "silu");
    H3_CHECK(y.numel() == x.numel(), "silu: ", x.str(), " vs ", y.str());
    cuda::launch_silu(in(x, "silu", "input"), out(y, "silu", "output"), x.numel(), stream_);
  }

  void gelu(const Tensor& x, bool tanh_approx, Tensor& y) override {
    const cuda::OpScope op_scope(profiler_.get(), "gelu");
    H3_CHECK(y.numel() == x.numel(), "gelu: ", x.str(), " vs ", y.str());
    cuda::launch_gelu(in(x, "gelu", "input"), tanh_approx, out(y, "gelu", "output"), x.numel(), stream_);
  }

  // ---- attention ----
  void self_attention(Tensor& qkv, const AttentionSpec& s, Tensor& out_t) override {
    attention(qkv, s, &out_t, false);
  }

  std::string fp8_attention_unsupported_reason() const override {
    if (compute_device_.hopper_kernels) return {};
    return cat("FP8 attention needs h3's Hopper kernels (a compute capability 9.0 GPU, a build with sm_90a code, ",
               "H3_FORCE_PORTABLE unset); this is ", props_.name, ", compute capability ", compute_device_.cc_major,
               ".", compute_device_.cc_minor, ", kernels: ", compute_device_.kernels);
  }

  void self_attention_in_fp8(Tensor& qkv, const AttentionSpec& s, Tensor& out_t) override {
    if (const std::string why = fp8_attention_unsupported_reason(); !why.empty()) throw Error(why + ".");
    attention(qkv, s, &out_t, true);
  }

  // The attention in FP8 writes the out product's activation itself where it can (cuda_kernels.h's
  // Fp8AttentionCodes: per-token scaling, every row of a segment scaled by the segment's bound on |O|, the codes
  // of the bf16 output) — or, with the separate passes (H3_DISABLE_FP8_FUSED_QUANT), its bf16 output and then
  // those codes by launch_fp8_quantize_rows_by_bound, the same bits. Elsewhere (block scaling, a shape the kernel
  // does not take, a schedule without codes, H3_DISABLE_FP8_ATTENTION_CODES=1), the backend default: the attention's
  // output quantized per token by its own largest value.
  void self_attention_fp8(Tensor& qkv, const AttentionSpec& s, bool attention_in_fp8, Fp8Scaling scaling,
                          Fp8Activation& q) override {
    const auto by_default = [&] { Backend::self_attention_fp8(qkv, s, attention_in_fp8, scaling, q); };
    if (!attention_in_fp8 || scaling != Fp8Scaling::Channel || !fp8_attention_codes_ ||
        cuda::fp8_attention_codes_refusal(fp8_attention_schedule_) || !fp8_attention_unsupported_reason().empty())
      return by_default();
    const int64_t R = rows_of(qkv), OW = int64_t(s.heads_q) * s.head_dim;
    Fp8Activation codes = fp8_activation(R, OW, Fp8Scaling::Channel);
    Tensor separate;
    if (!fused_fp8_quant_) separate = empty({R, OW}, qkv.dtype());
    if (!attention(qkv, s, separate.defined() ? &separate : nullptr, true, &codes)) return by_default();
    q = std::move(codes);
  }

  // self_attention (fp8 false) or self_attention_in_fp8 into out_t; with `codes` (self_attention_fp8 above), the FP8
  // attention's codes into *codes, from out_t when given (the separate pass), else by the kernel. With codes,
  // returns false having done nothing where a segment's shape is not the FP8 kernel's.
  bool attention(Tensor& qkv, const AttentionSpec& s, Tensor* out_t, bool fp8, Fp8Activation* codes = nullptr) {
    const cuda::OpScope op_scope(profiler_.get(), fp8 ? "attention_in_fp8" : "attention");
    check_device(qkv, "attention", "qkv");
    const int64_t R = rows_of(qkv), Dh = s.head_dim, Hq = s.heads_q, Hkv = s.heads_kv;
    H3_CHECK(Hq > 0 && Hkv > 0 && Hq % Hkv == 0 && Dh > 0, "attention: bad head configuration ", Hq, "/", Hkv, "x",
             Dh);
    const int64_t W = (Hq + 2 * Hkv) * Dh;
    H3_CHECK(last_dim(qkv) == W, "attention: qkv ", qkv.str(), " must have ", W, " channels per row");
    H3_CHECK(out_t || codes, "attention: no output");
    if (out_t) {
      check_device(*out_t, "attention", "output");
      H3_CHECK(rows_of(*out_t) == R && last_dim(*out_t) == Hq * Dh, "attention: output ", out_t->str(),
               " must be [", R, ", ", Hq * Dh, "]");
      H3_CHECK(is_float16(qkv.dtype()) && out_t->dtype() == qkv.dtype(), "attention on CUDA: qkv ", qkv.str(),
               " and output ", out_t->str(), " must both be BF16 or both F16");
    }
    H3_CHECK(!codes || (fp8 && is_float16(qkv.dtype())), "attention: codes from the FP8 attention of 16-bit rows only");
    std::vector<int64_t> seg = s.segments.empty() ? std::vector<int64_t>{0, R} : s.segments;
    H3_CHECK(seg.size() >= 2 && seg.front() == 0 && seg.back() == R, "attention: segments must span [0, ", R, ")");
    for (size_t i = 0; i + 1 < seg.size(); ++i)
      H3_CHECK(seg[i] <= seg[i + 1], "attention: segments must be non-decreasing");
    // Consecutive non-empty segments of equal length run as one batched call: {first row, length, count}.
    struct Group {
      int64_t first, len;
      int batch;
    };
    std::vector<Group> groups;
    for (size_t i = 0; i + 1 < seg.size();) {
      const int64_t len = seg[i + 1] - seg[i];
      if (len == 0) {
        ++i;
        continue;
      }
      size_t j = i + 1;
      while (j + 1 < seg.size() && seg[j + 1] - seg[j] == len) ++j;
      groups.push_back({seg[i], len, static_cast<int>(j - i)});
      i = j;
    }

    // q, k, v as attention reads them: in place in the packed rows (normalized and rotated there), or head-major
    // copies [Hq + 2·Hkv, R, Dh], every head one contiguous [R, Dh] block (H3_ATTENTION_LAYOUT=head-major).
    const size_t esz = dtype_size(qkv.dtype());
    Tensor hm;
    AttnSource src;
    if (head_major_) {
      hm = empty({Hq + 2 * Hkv, R, Dh}, qkv.dtype());
      src.q = static_cast<const char*>(hm.data());
      src.k = src.q + static_cast<size_t>(Hq * R * Dh) * esz;
      src.v = src.q + static_cast<size_t>((Hq + Hkv) * R * Dh) * esz;
      src.row = Dh;
      src.q_head = src.kv_head = R * Dh;
    } else {
      src.q = static_cast<const char*>(qkv.data());
      src.k = src.q + static_cast<size_t>(Hq * Dh) * esz;
      src.v = src.q + static_cast<size_t>((Hq + Hkv) * Dh) * esz;
      src.row = W;
      src.q_head = src.kv_head = Dh;
    }
    if (codes)
      for (const Group& g : groups)
        if (cuda::hopper_attention_fp8_refusal(flash_params(src, qkv.dtype(), s, out_t, g.first, g.len, g.batch)))
          return false;
    {
      const cuda::OpScope qk_scope(profiler_.get(), "attention: q/k norm + rope");
      prepare_qk(qkv, hm, s, R);
    }
    const cuda::OpScope sdpa_scope(profiler_.get(), [&] { return cat("attention: sdpa, head_dim ", Dh); });
    for (const Group& g : groups) {
      if (codes)
        attend_fp8_codes(src, qkv.dtype(), s, out_t, *codes, g.first, g.len, g.batch);
      else if (fp8)
        attend_fp8(src, qkv.dtype(), s, *out_t, g.first, g.len, g.batch);
      else
        attend(src, qkv.dtype(), s, *out_t, g.first, g.len, g.batch);
    }
    return true;
  }

  void qk_norm_rope(Tensor& qkv, const AttentionSpec& s) override {
    const cuda::OpScope op_scope(profiler_.get(), "attention: q/k norm + rope");
    check_device(qkv, "qk_norm_rope", "qkv");
    const int64_t W = (s.heads_q + 2 * s.heads_kv) * s.head_dim;
    H3_CHECK(s.heads_q > 0 && s.heads_kv > 0 && s.head_dim > 0 && last_dim(qkv) == W, "qk_norm_rope: qkv ", qkv.str(),
             " must have ", W, " channels per row");
    prepare_qk(qkv, Tensor(), s, rows_of(qkv));
  }

  // ---- block-sparse attention (VSA-H3: kernels_sparse_attention.cu; H3_DISABLE_SPARSE_KERNEL=1: the defaults) ----
  void tile_means(const Tensor& x, int64_t channel0, int64_t heads, int64_t head_dim, const SparseTiles& tiles,
                  Tensor& means) override {
    if (!sparse_kernels_) return Backend::tile_means(x, channel0, heads, head_dim, tiles, means);
    const cuda::OpScope op_scope(profiler_.get(), "sparse attention: tile means");
    const char* op = "tile_means";
    H3_CHECK(channel0 >= 0 && heads > 0 && head_dim > 0 && channel0 + heads * head_dim <= last_dim(x) &&
                 rows_of(x) == tiles.rows,
             op, ": ", heads, " heads of ", head_dim, " at channel ", channel0, " do not fit ", x.str(), " (",
             tiles.rows, " rows)");
    cuda::launch_tile_means(in(x, op, "input"), last_dim(x), channel0, static_cast<int>(heads),
                            static_cast<int>(head_dim), tile_table(tiles),
                            f32_of(means, op, "means", {heads, tiles.tiles, head_dim}), stream_);
  }

  void tile_scores(const Tensor& q_means, const Tensor& k_means, Tensor& scores) override {
    if (!sparse_kernels_) return Backend::tile_scores(q_means, k_means, scores);
    const cuda::OpScope op_scope(profiler_.get(), "sparse attention: tile scores");
    const char* op = "tile_scores";
    H3_CHECK(q_means.ndim() == 3, op, ": tile means must be [heads, tiles, head_dim], got ", q_means.str());
    const int64_t heads = q_means.dim(0), n = q_means.dim(1), dim = q_means.dim(2);
    // The CPU reference's divisor: √head_dim in double, rounded to float.
    const auto root = static_cast<float>(std::sqrt(static_cast<double>(dim)));
    cuda::launch_tile_scores(f32_of(q_means, op, "q means", q_means.shape()),
                             f32_of(k_means, op, "k means", q_means.shape()), static_cast<int>(heads),
                             static_cast<int>(n), static_cast<int>(dim), root,
                             f32_of(scores, op, "scores", {heads, n, n}), stream_);
  }

  void route_key_tiles(const Tensor& scores, const SparseTiles& tiles, int64_t keep, bool compete,
                       SparseKeyTiles& lists) override {
    if (!sparse_kernels_) return Backend::route_key_tiles(scores, tiles, keep, compete, lists);
    const cuda::OpScope op_scope(profiler_.get(), "sparse attention: routing");
    const char* op = "route_key_tiles";
    const int64_t n = tiles.tiles, heads = scores.ndim() == 3 ? scores.dim(0) : 0;
    H3_CHECK(keep >= 1 && keep <= n - tiles.prefix_tiles, op, ": keeps 1 to ", n - tiles.prefix_tiles,
             " video tiles, got ", keep);
    const float* s = f32_of(scores, op, "scores", {heads, n, n});
    lists.index = empty({heads, n, n}, DType::I32);
    lists.count = empty({heads, n}, DType::I32);
    cuda::launch_route_key_tiles(s, static_cast<int>(heads), static_cast<int>(n), static_cast<int>(tiles.prefix_tiles),
                                 static_cast<int>(keep), compete, static_cast<int32_t*>(lists.index.data()),
                                 static_cast<int32_t*>(lists.count.data()), stream_);
  }

  // Dense (no lists) through self_attention's kernels on the packed rows; routed through the block-sparse kernel.
  void block_sparse_attention(const Tensor& qkv, int64_t heads, int64_t head_dim, const SparseTiles& tiles,
                              const SparseKeyTiles* lists, Tensor& out_t) override {
    if (!sparse_kernels_) return Backend::block_sparse_attention(qkv, heads, head_dim, tiles, lists, out_t);
    const char* op = "block_sparse_attention";
    const int64_t R = rows_of(qkv), inner = heads * head_dim;
    H3_CHECK(heads > 0 && head_dim > 0 && last_dim(qkv) == 3 * inner && R == tiles.rows && rows_of(out_t) == R &&
                 last_dim(out_t) == inner && out_t.dtype() == qkv.dtype(),
             op, ": qkv ", qkv.str(), " and output ", out_t.str(), " must be [", tiles.rows, ", 3·", inner, "] and [",
             tiles.rows, ", ", inner, "] of one dtype");
    check_device(qkv, op, "qkv");
    check_device(out_t, op, "output");
    AttentionSpec spec;
    spec.heads_q = spec.heads_kv = static_cast<int>(heads);
    spec.head_dim = static_cast<int>(head_dim);
    spec.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
    if (lists == nullptr) {
      const cuda::OpScope op_scope(profiler_.get(), [&] { return cat("attention: sdpa, head_dim ", head_dim); });
      const size_t esz = dtype_size(qkv.dtype());
      AttnSource src;
      src.q = static_cast<const char*>(qkv.data());
      src.k = src.q + static_cast<size_t>(inner) * esz;
      src.v = src.q + static_cast<size_t>(2 * inner) * esz;
      src.row = 3 * inner;
      src.q_head = src.kv_head = head_dim;
      attend(src, qkv.dtype(), spec, out_t, 0, R, 1);
      return;
    }
    const cuda::OpScope op_scope(profiler_.get(), "sparse attention: block-sparse");
    cuda::BlockSparseParams p;
    const size_t esz = dtype_size(qkv.dtype());
    p.q = qkv.data();
    p.k = static_cast<const char*>(qkv.data()) + static_cast<size_t>(inner) * esz;
    p.v = static_cast<const char*>(qkv.data()) + static_cast<size_t>(2 * inner) * esz;
    p.o = out_t.data();
    p.dtype = elem_of(qkv.dtype());
    p.row = 3 * inner;
    p.o_row = inner;
    p.heads = static_cast<int>(heads);
    p.head_dim = static_cast<int>(head_dim);
    p.scale = spec.scale;
    p.t = tile_table(tiles);
    H3_CHECK(lists->index.numel() == heads * tiles.tiles * tiles.tiles && lists->count.numel() == heads * tiles.tiles,
             op, ": key-tile lists ", lists->index.str(), " and ", lists->count.str(), " must be [", heads, ", ",
             tiles.tiles, ", ", tiles.tiles, "] and [", heads, ", ", tiles.tiles, "]");
    p.index = index(lists->index, op, "key-tile index");
    p.count = index(lists->count, op, "key-tile count");
    if (sparse_hopper_) {
      // The tile-ordered copy of q, k and v the Hopper kernel reads; the stream orders its reuse after the kernel.
      Tensor workspace = empty({static_cast<int64_t>(cuda::block_sparse_hopper_workspace_bytes(p))}, DType::U8);
      const char* why = cuda::launch_block_sparse_attention_hopper(p, workspace.data(), err_dev_, stream_);
      if (why == nullptr) return;
      if (why != last_sparse_hopper_refusal_) {
        log_debug("the Hopper block-sparse attention kernel does not apply (", heads, " heads x ", head_dim,
                  ", tile ", tiles.tile_elems, "): ", why, "; the portable kernel runs instead");
        last_sparse_hopper_refusal_ = why;
      }
    }
    const char* why = cuda::launch_block_sparse_attention(p, stream_);
    if (why == nullptr) return;
    if (why != last_sparse_refusal_) {
      log_debug("the block-sparse attention kernel does not apply (", heads, " heads x ", head_dim, ", tile ",
                tiles.tile_elems, "): ", why, "; the reference runs instead");
      last_sparse_refusal_ = why;
    }
    Backend::block_sparse_attention(qkv, heads, head_dim, tiles, lists, out_t);
  }

  void add_pooled_attention(const Tensor& scores, const Tensor& v_means, const Tensor& gate, const SparseTiles& tiles,
                            Tensor& out_t) override {
    if (!sparse_kernels_) return Backend::add_pooled_attention(scores, v_means, gate, tiles, out_t);
    const cuda::OpScope op_scope(profiler_.get(), "sparse attention: pooled branch");
    const char* op = "add_pooled_attention";
    H3_CHECK(v_means.ndim() == 3, op, ": v means must be [heads, tiles, head_dim], got ", v_means.str());
    const int64_t heads = v_means.dim(0), n = tiles.tiles, dim = v_means.dim(2);
    H3_CHECK(rows_of(gate) == tiles.rows && last_dim(gate) == heads * dim && rows_of(out_t) == tiles.rows &&
                 last_dim(out_t) == heads * dim,
             op, ": gate ", gate.str(), " and output ", out_t.str(), " must be [", tiles.rows, ", ", heads * dim, "]");
    cuda::launch_add_pooled_attention(f32_of(scores, op, "scores", {heads, n, n}),
                                      f32_of(v_means, op, "v means", {heads, n, dim}), in(gate, op, "gate"),
                                      last_dim(gate), out(out_t, op, "output"), last_dim(out_t),
                                      static_cast<int>(heads), static_cast<int>(dim), tile_table(tiles), stream_);
  }

  // ---- audio VAE (f32 tensors: cuDNN TF32 convolutions, else the f32 kernels of kernels_audio_vae.cu) ----
  // cuDNN's convolution with TF32 math where it has an algorithm for the shape (and H3_DISABLE_TF32_CONV is unset).
  bool cudnn_conv(const cuda::Conv1dShape& shape, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) {
    if (!tf32_conv_) {
      last_conv_path_ = "h3-f32";
      return false;
    }
    const char* op = shape.transposed ? "conv_transpose1d" : "conv1d";
    using Served = cuda::CudnnConv::Served;
    const Served served = cudnn_conv_->run(shape, f32_in(x, op), f32_in(w, op), bias ? f32_in(*bias, op) : nullptr,
                                           f32_out(y, op), [this](size_t b) { return attention_workspace(b); });
    last_conv_path_ = served == Served::Refused ? "h3-f32" : served == Served::TensorCores ? "cudnn-tf32" : "cudnn-fma";
    return served != Served::Refused;
  }

  // The profile's name of a 1-D forward convolution: its shape and what serves it (once it has run).
  std::string conv_scope_name(const cuda::Conv1dShape& shape) const {
    std::string path = tf32_conv_ ? cudnn_conv_->describe(shape) : std::string("h3-f32");
    if (path.empty()) path = "planning";
    if (path.starts_with("refused")) path = "h3-f32";
    return cat("conv1d ", cuda::shape_text(shape), " [", path, "]");
  }

  // Counts the calls of each 1-D forward shape (the first kMaxRecordedConvShapes distinct ones), for
  // cuda_conv1d_report.
  void record_conv(const cuda::Conv1dShape& shape) {
    auto it = conv_calls_.find(shape);
    if (it != conv_calls_.end()) {
      ++it->second;
    } else if (conv_calls_.size() < kMaxRecordedConvShapes) {
      conv_calls_.emplace(shape, 1);
      conv_order_.push_back(shape);
    }
  }

  // y = conv1d(x, w) (+ bias): cuDNN where it serves, else our f32 kernel. Returns whether the bias was applied
  // (always, unless skip_bias asked cuDNN's run to leave it out).
  bool run_conv1d(const cuda::Conv1dShape& shape, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y,
                  bool skip_bias) {
    if (cudnn_conv(shape, x, w, skip_bias ? nullptr : bias, y)) return !skip_bias;
    cuda::launch_conv1d(f32_in(x, "conv1d"), f32_in(w, "conv1d"), bias ? f32_in(*bias, "conv1d") : nullptr,
                        f32_out(y, "conv1d"), x.dim(0), x.dim(1), x.dim(2), w.dim(0), y.dim(2), w.dim(2),
                        shape.stride, shape.padding, shape.dilation, tiled_conv_, stream_);
    return true;
  }

  void conv1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding, int64_t dilation,
              Tensor& y) override {
    if (!audio_kernels_) {
      const cuda::OpScope op_scope(profiler_.get(), "conv1d");
      return Backend::conv1d(x, w, bias, stride, padding, dilation, y);
    }
    check_conv1d(x, w, bias, stride, padding, dilation, y);
    const cuda::Conv1dShape shape{x.dim(0), x.dim(1), x.dim(2), w.dim(0), y.dim(2), w.dim(2),
                                  stride,   padding,   dilation, false};
    const cuda::OpScope op_scope(profiler_.get(), [&] { return conv_scope_name(shape); });
    record_conv(shape);
    run_conv1d(shape, x, w, bias, y, /*skip_bias=*/false);
  }

  // A bias-free convolution, then one epilogue kernel: bias (unless our f32 kernel, serving a shape cuDNN refuses,
  // applied it), shortcut and Snake — the bits of conv1d + residual_add + snake (the twin,
  // H3_DISABLE_FUSED_CONV_SNAKE=1) when the convolution's algorithm is the same.
  void conv1d_snake(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                    int64_t dilation, const Tensor* residual, const Tensor& alpha, Tensor& y, Tensor& act) override {
    if (!audio_kernels_ || !fused_conv_snake_)
      return Backend::conv1d_snake(x, w, bias, stride, padding, dilation, residual, alpha, y, act);
    check_conv1d_snake(x, w, bias, stride, padding, dilation, residual, alpha, y, act);
    const cuda::Conv1dShape shape{x.dim(0), x.dim(1), x.dim(2), w.dim(0), y.dim(2), w.dim(2),
                                  stride,   padding,   dilation, false};
    bool bias_applied = false;
    {
      const cuda::OpScope op_scope(profiler_.get(), [&] { return conv_scope_name(shape); });
      record_conv(shape);
      bias_applied = run_conv1d(shape, x, w, bias, y, /*skip_bias=*/true);
    }
    const char* op = "conv1d_snake epilogue";
    const cuda::OpScope op_scope(profiler_.get(), op);
    cuda::launch_bias_residual_snake(f32_out(y, op), bias && !bias_applied ? f32_in(*bias, op) : nullptr,
                                     residual ? f32_in(*residual, op) : nullptr, f32_in(alpha, op), f32_out(act, op),
                                     /*store_y=*/act.data() != y.data(), y.dim(0) * y.dim(1), y.dim(1), y.dim(2),
                                     stream_);
  }

  // Channels-last: cuDNN's NHWC graph plans (Hopper's TF32 convolution kernels read NHWC), the bias, shortcut and
  // Snake in one channels-last epilogue. Where cuDNN has no plan for a shape (or TF32 convolutions are off), the
  // Backend defaults: transposes around the channels-first ops.
  bool prefers_channels_last_conv1d() const override {
    return channels_last_conv_ && audio_kernels_ && tf32_conv_ && cudnn_conv_->choice() != cuda::ConvChoice::Legacy;
  }

  // y = conv(x, w) on channels-last tensors through cuDNN, no bias; false (nothing launched) when it has no plan.
  bool cudnn_conv_nlc(const cuda::Conv1dShape& shape, const Tensor& x, const Tensor& w, Tensor& y) {
    if (!tf32_conv_) return false;
    const char* op = "conv1d (channels-last)";
    using Served = cuda::CudnnConv::Served;
    const Served served = cudnn_conv_->run(shape, f32_in(x, op), f32_in(w, op), nullptr, f32_out(y, op),
                                           [this](size_t b) { return attention_workspace(b); });
    if (served == Served::Refused) return false;
    last_conv_path_ = served == Served::TensorCores ? "cudnn-tf32" : "cudnn-fma";
    return true;
  }

  static cuda::Conv1dShape nlc_shape(const Tensor& x, const Tensor& w, const Tensor& y, int64_t stride,
                                     int64_t padding, int64_t dilation) {
    cuda::Conv1dShape s{x.dim(0), x.dim(2), x.dim(1), w.dim(0), y.dim(1), w.dim(1), stride, padding, dilation, false};
    s.nhwc = true;
    return s;
  }

  void conv1d_nlc(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                  int64_t dilation, Tensor& y) override {
    check_conv1d_nlc(x, w, bias, stride, padding, dilation, y);
    const cuda::Conv1dShape shape = nlc_shape(x, w, y, stride, padding, dilation);
    bool served = false;
    if (audio_kernels_) {
      const cuda::OpScope op_scope(profiler_.get(), [&] { return conv_scope_name(shape); });
      record_conv(shape);
      served = cudnn_conv_nlc(shape, x, w, y);
    }
    if (!served) return Backend::conv1d_nlc(x, w, bias, stride, padding, dilation, y);
    if (!bias) return;
    const char* op = "conv1d bias (channels-last)";
    const cuda::OpScope op_scope(profiler_.get(), op);
    cuda::launch_bias_residual_snake_nlc(f32_out(y, op), f32_in(*bias, op), nullptr, nullptr, nullptr, true,
                                         y.dim(0) * y.dim(1), y.dim(2), stream_);
  }

  void conv1d_snake_nlc(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                        int64_t dilation, const Tensor* residual, const Tensor& alpha, Tensor& y,
                        Tensor& act) override {
    check_conv1d_snake_nlc(x, w, bias, stride, padding, dilation, residual, alpha, y, act);
    const cuda::Conv1dShape shape = nlc_shape(x, w, y, stride, padding, dilation);
    bool served = false;
    if (audio_kernels_) {
      const cuda::OpScope op_scope(profiler_.get(), [&] { return conv_scope_name(shape); });
      record_conv(shape);
      served = cudnn_conv_nlc(shape, x, w, y);
    }
    if (!served) return Backend::conv1d_snake_nlc(x, w, bias, stride, padding, dilation, residual, alpha, y, act);
    const char* op = "conv1d_snake epilogue (channels-last)";
    const cuda::OpScope op_scope(profiler_.get(), op);
    cuda::launch_bias_residual_snake_nlc(f32_out(y, op), bias ? f32_in(*bias, op) : nullptr,
                                         residual ? f32_in(*residual, op) : nullptr, f32_in(alpha, op),
                                         f32_out(act, op), /*store_y=*/act.data() != y.data(), y.dim(0) * y.dim(1),
                                         y.dim(2), stream_);
  }

  // See cuda_backend.h.
  CudaConvReport conv1d_report(int reps, int64_t runs) {
    synchronize();
    CudaConvReport report;
    const char* strategies[] = {"legacy", "heuristic", "autotune", "autotune-other-layout", "h3-f32"};
    std::vector<double> totals(std::size(strategies), 0.0);
    std::string& t = report.table;
    t += cat("1-D forward convolutions: device ms per call (the fastest of ", reps,
             " runs after a warm-up, on scratch operands), calls per run (", runs, " runs)\n");
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    H3_CUDA_CHECK(cudaEventCreate(&e0), "conv report");
    H3_CUDA_CHECK(cudaEventCreate(&e1), "conv report");
    for (const cuda::Conv1dShape& s : conv_order_) {
      const double calls = static_cast<double>(conv_calls_.at(s)) / static_cast<double>(std::max<int64_t>(runs, 1));
      // Channels-first buffers; a channels-last shape reads the same sizes in its own layout.
      Tensor x = empty({s.B, s.Cin, s.T}, DType::F32), w = empty({s.Cout, s.Cin, s.k}, DType::F32);
      Tensor y = empty({s.B, s.Cout, s.Tout}, DType::F32);
      fill_random_normal(x, 1, 0.f, 1.f);
      fill_random_normal(w, 2, 0.f, 1.f / std::sqrt(static_cast<float>(s.Cin * s.k)));
      std::vector<cuda::ConvTiming> ts = cudnn_conv_->compare(s, f32_in(x, "conv report"), f32_in(w, "conv report"),
                                                              f32_out(y, "conv report"),
                                                              [this](size_t b) { return attention_workspace(b); },
                                                              reps);
      // Our f32 kernel (tiled unless H3_DISABLE_CUDA_CONV_TILED), channels-first.
      float f32_ms = -1;
      for (int i = 0; i <= reps; ++i) {
        H3_CUDA_CHECK(cudaEventRecord(e0, stream_), "conv report");
        cuda::launch_conv1d(f32_in(x, "conv report"), f32_in(w, "conv report"), nullptr, f32_out(y, "conv report"),
                            s.B, s.Cin, s.T, s.Cout, s.Tout, s.k, s.stride, s.padding, s.dilation, tiled_conv_,
                            stream_);
        H3_CUDA_CHECK(cudaEventRecord(e1, stream_), "conv report");
        H3_CUDA_CHECK(cudaEventSynchronize(e1), "conv report");
        float ms = 0;
        H3_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1), "conv report");
        if (i > 0) f32_ms = f32_ms < 0 ? ms : std::min(f32_ms, ms);
      }
      ts.push_back({"h3-f32", tiled_conv_ ? "tiled f32 kernel" : "direct f32 kernel", f32_ms});
      const double gflop = cuda::conv_flops(s) / 1e9;
      const std::string served = tf32_conv_ ? cudnn_conv_->describe(s, /*verbose=*/true) : std::string("h3-f32");
      t += cat("  ", cuda::shape_text(s), ": ", calls, " calls/run, ", gflop, " GFLOP; served by ",
               served.empty() || served.starts_with("refused") ? cat("h3's f32 kernel ", served) : served, "\n");
      for (size_t k = 0; k < std::size(strategies); ++k) {
        const auto it = std::find_if(ts.begin(), ts.end(), [&](const cuda::ConvTiming& c) {
          return c.strategy == strategies[k];
        });
        if (it == ts.end() || it->ms < 0) {
          totals[k] = -1e300;  // incomplete
          t += cat("      ", strategies[k], ": ", it == ts.end() ? std::string("-") : it->what, "\n");
          continue;
        }
        totals[k] += calls * it->ms;
        char line[96];
        std::snprintf(line, sizeof(line), "      %-14s %8.3f ms  %6.1f TFLOPS  ", strategies[k], it->ms,
                      gflop / it->ms);
        t += cat(line, it->what, "\n");
      }
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    t += "  per run (the calls of every shape at each way's time):";
    for (size_t k = 0; k < std::size(strategies); ++k) {
      report.per_run_ms.emplace_back(strategies[k], totals[k] < 0 ? -1.0 : totals[k]);
      if (totals[k] < 0)
        t += cat(" ", strategies[k], " incomplete;");
      else {
        char v[64];
        std::snprintf(v, sizeof(v), " %s %.2f ms;", strategies[k], totals[k]);
        t += v;
      }
    }
    t += "\n";
    return report;
  }

  void conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                        Tensor& y) override {
    const cuda::OpScope op_scope(profiler_.get(), "conv_transpose1d");
    if (!audio_kernels_) return Backend::conv_transpose1d(x, w, bias, stride, padding, y);
    check_conv_transpose1d(x, w, bias, stride, padding, y);
    const cuda::Conv1dShape shape{x.dim(0), x.dim(1), x.dim(2), w.dim(1), y.dim(2), w.dim(2), stride, padding, 1, true};
    if (cudnn_conv(shape, x, w, bias, y)) return;
    const char* op = "conv_transpose1d";
    cuda::launch_conv_transpose1d(f32_in(x, op), f32_in(w, op), bias ? f32_in(*bias, op) : nullptr, f32_out(y, op),
                                  x.dim(0), x.dim(1), x.dim(2), w.dim(1), y.dim(2), w.dim(2), stride, padding,
                                  tiled_conv_, stream_);
  }

  void snake_beta_aa(const Tensor& x, const Tensor& log_alpha, const Tensor& log_beta, const Tensor& up_filter,
                     const Tensor& down_filter, Tensor& y) override {
    const cuda::OpScope op_scope(profiler_.get(), "snake_beta_aa");
    const bool fits = up_filter.numel() <= cuda::kSnakeMaxTaps && down_filter.numel() <= cuda::kSnakeMaxTaps;
    if (!audio_kernels_ || !fits) return Backend::snake_beta_aa(x, log_alpha, log_beta, up_filter, down_filter, y);
    check_snake_beta_aa(x, log_alpha, log_beta, up_filter, down_filter, y);
    const char* op = "snake_beta_aa";
    cuda::launch_snake_beta_aa(f32_in(x, op), f32_in(log_alpha, op), f32_in(log_beta, op), f32_in(up_filter, op),
                               up_filter.numel(), f32_in(down_filter, op), down_filter.numel(), f32_out(y, op),
                               x.dim(0) * x.dim(1), x.dim(1), x.dim(2), stream_);
  }

  void divide(Tensor& x, float divisor) override {
    const cuda::OpScope op_scope(profiler_.get(), "divide");
    if (!audio_kernels_) return Backend::divide(x, divisor);
    H3_CHECK(x.dtype() == DType::F32, "divide: input must be F32, got ", x.str());
    cuda::launch_divide(f32_out(x, "divide"), x.numel(), divisor, stream_);
  }

  // ---- audio VAE encoder (f32 kernels of kernels_audio_encoder.cu) ----
  void snake(const Tensor& x, const Tensor& alpha, Tensor& y) override {
    const cuda::OpScope op_scope(profiler_.get(), "snake");
    if (!audio_kernels_) return Backend::snake(x, alpha, y);
    check_snake(x, alpha, y);
    cuda::launch_snake(f32_in(x, "snake"), f32_in(alpha, "snake"), f32_out(y, "snake"), x.dim(0) * x.dim(1),
                       x.dim(1), x.dim(2), stream_);
  }

  void transpose_last_two(const Tensor& x, Tensor& y) override {
    const cuda::OpScope op_scope(profiler_.get(), "transpose_last_two");
    if (!audio_kernels_) return Backend::transpose_last_two(x, y);
    check_transpose_last_two(x, y);
    const char* op = "transpose_last_two";
    cuda::launch_transpose_last_two(f32_in(x, op), f32_out(y, op), x.dim(0), x.dim(1), x.dim(2), stream_);
  }

  void multiply(Tensor& x, const Tensor& y) override {
    const cuda::OpScope op_scope(profiler_.get(), "multiply");
    if (!audio_kernels_) return Backend::multiply(x, y);
    check_multiply(x, y);
    cuda::launch_multiply(f32_out(x, "multiply"), f32_in(y, "multiply"), x.numel(), stream_);
  }

  void pooled_causal_attention(const Tensor& qkv, int64_t batch, int64_t heads, float scale, Tensor& y) override {
    const char* op = "pooled_causal_attention";
    const cuda::OpScope op_scope(profiler_.get(), op);
    if (!audio_kernels_) return Backend::pooled_causal_attention(qkv, batch, heads, scale, y);
    check_pooled_causal_attention(qkv, batch, heads, y);
    const int64_t head_dim = qkv.dim(1) / (3 * heads);
    std::shared_ptr<void> per_head;  // the tiled kernel's [rows, heads, head_dim]
    if (tiled_pooled_attention_ && head_dim <= cuda::kTiledAttentionMaxHeadDim)
      per_head = alloc_->allocate(static_cast<size_t>(qkv.dim(0) * heads * head_dim) * sizeof(float));
    cuda::launch_pooled_causal_attention(f32_in(qkv, op), f32_out(y, op), batch, qkv.dim(0) / batch, heads, head_dim,
                                         y.dim(1), scale, static_cast<float*>(per_head.get()), stream_);
  }

  // ---- video VAE encoder (f32: padding kernel + cuDNN TF32 convolution, else our f32 kernel; group norm) ----
  // Frame t of the kernel w [Cout, Cin, kt, kh, kw] as [Cout, Cin, 1, kh, kw] (channels-first) or
  // [Cout, kh, kw, Cin] (nhwc), made once per weight and kept while the weight lives (uncached for a weight without
  // an owner).
  Tensor keyframe_slice(const Tensor& w, int64_t t, bool nhwc) {
    const auto make = [&] {
      Tensor out = empty({w.dim(0), w.dim(1), 1, w.dim(3), w.dim(4)}, DType::F32);
      cuda::launch_conv3d_weight_slice(f32_in(w, "conv3d"), f32_out(out, "conv3d"), w.dim(0), w.dim(1), w.dim(2),
                                       w.dim(3), w.dim(4), t, nhwc, stream_);
      return out;
    };
    if (!w.owner()) return make();
    const auto key = std::make_pair(static_cast<const void*>(w.data()), nhwc);
    auto it = weight_slices_.find(key);
    if (it != weight_slices_.end() && !it->second.owner.expired() && it->second.owner.lock() == w.owner() &&
        it->second.shape == w.shape())
      return it->second.slice;
    // Forget the slices of weights that are gone (their memory may be reused).
    for (auto i = weight_slices_.begin(); i != weight_slices_.end();)
      i = i->second.owner.expired() ? weight_slices_.erase(i) : std::next(i);
    WeightSlice ws{w.owner(), w.shape(), make()};
    return (weight_slices_[key] = std::move(ws)).slice;
  }

  // A padding kernel (into xp, allocated here unless nothing is padded), then cuDNN's convolution of xp (TF32), else
  // our f32 kernel. `front`: the zero frames prepended.
  void conv3d_padded(const Tensor& x, const Tensor& w, const float* b, const Conv3dGeometry& g, int64_t front,
                     Tensor& y) {
    const char* op = "conv3d";
    // cuDNN pads with zeros only: the padded input is a scratch copy, unless nothing is padded.
    const int64_t Tp = x.dim(1) + front, Hp = x.dim(2) + g.pad_top + g.pad_bottom;
    const int64_t Wp = x.dim(3) + g.pad_left + g.pad_right;
    const bool padded = Tp != x.dim(1) || Hp != x.dim(2) || Wp != x.dim(3);
    const Tensor xp = padded ? empty({x.dim(0), Tp, Hp, Wp}, DType::F32) : x;
    if (padded) {
      cuda::Pad3dParams p = pad_params(x, g, front, Tp, Hp, Wp);
      p.xp = f32_out(xp, op);
      cuda::launch_pad3d(p, stream_);
    }
    const cuda::Conv3dShape shape{x.dim(0), Tp,        Hp,        Wp,       w.dim(0),   y.dim(1),   y.dim(2),
                                  y.dim(3), w.dim(2),  w.dim(3),  w.dim(4), g.stride_t, g.stride_h, g.stride_w};
    last_conv_path_ = "h3-f32";
    if (tf32_conv_) {
      using Served = cuda::CudnnConv::Served;
      const Served served = cudnn_conv_->run(shape, f32_in(xp, op), f32_in(w, op), b, f32_out(y, op),
                                             [this](size_t bytes) { return attention_workspace(bytes); });
      if (served != Served::Refused) {
        last_conv_path_ = served == Served::TensorCores ? "cudnn-tf32" : "cudnn-fma";
        return;
      }
    }
    cuda::Conv3dParams p;
    p.xp = f32_in(xp, op);
    p.w = f32_in(w, op);
    p.bias = b;
    p.y = f32_out(y, op);
    p.Cin = shape.Cin;
    p.Tp = Tp;
    p.Hp = Hp;
    p.Wp = Wp;
    p.Cout = shape.Cout;
    p.To = shape.To;
    p.Ho = shape.Ho;
    p.Wo = shape.Wo;
    p.kt = shape.kt;
    p.kh = shape.kh;
    p.kw = shape.kw;
    p.st = shape.st;
    p.sh = shape.sh;
    p.sw = shape.sw;
    cuda::launch_conv3d(p, stream_);
  }

  cuda::Pad3dParams pad_params(const Tensor& x, const Conv3dGeometry& g, int64_t front, int64_t Tp, int64_t Hp,
                               int64_t Wp) {
    cuda::Pad3dParams p;
    p.x = f32_in(x, "conv3d");
    p.C = x.dim(0);
    p.T = x.dim(1);
    p.H = x.dim(2);
    p.W = x.dim(3);
    p.front = front;
    p.top = g.pad_top;
    p.left = g.pad_left;
    p.Tp = Tp;
    p.Hp = Hp;
    p.Wp = Wp;
    p.mode = g.spatial_mode == PadMode::Reflect     ? cuda::Pad3dMode::Reflect
             : g.spatial_mode == PadMode::Replicate ? cuda::Pad3dMode::Replicate
                                                    : cuda::Pad3dMode::Zeros;
    return p;
  }

  // The keyframe convolution channels-last (see H3_DISABLE_CHANNELS_LAST_CONV3D): x [Cin, 1, H, W], the weight's
  // last frame, one output frame; false (nothing written) when cuDNN serves no NHWC plan for the shape.
  bool keyframe_conv_nhwc(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv3dGeometry& g, Tensor& y) {
    const char* op = "conv3d";
    const int64_t Hp = x.dim(2) + g.pad_top + g.pad_bottom, Wp = x.dim(3) + g.pad_left + g.pad_right;
    const int64_t Cin = x.dim(0), Cout = w.dim(0), P = y.dim(2) * y.dim(3);
    const cuda::Conv3dShape shape{Cin,      1,        Hp,       Wp, Cout, 1, y.dim(2), y.dim(3), 1,
                                  w.dim(3), w.dim(4), 1,        g.stride_h, g.stride_w, /*nhwc=*/true};
    const Tensor ws = keyframe_slice(w, w.dim(2) - 1, /*nhwc=*/true);
    const Tensor xp = empty({Hp, Wp, Cin}, DType::F32), yn = empty({P, Cout}, DType::F32);
    cuda::Pad3dParams p = pad_params(x, g, 0, 1, Hp, Wp);
    p.xp = f32_out(xp, op);
    cuda::launch_pad2d_nhwc(p, stream_);
    using Served = cuda::CudnnConv::Served;
    const Served served = cudnn_conv_->run(shape, f32_in(xp, op), f32_in(ws, op), nullptr, f32_out(yn, op),
                                           [this](size_t bytes) { return attention_workspace(bytes); });
    if (served == Served::Refused) return false;
    cuda::launch_nhwc_to_nchw(f32_in(yn, op), bias ? f32_in(*bias, op) : nullptr, f32_out(y, op), P, Cout, stream_);
    last_conv_path_ = served == Served::TensorCores ? "cudnn-tf32-nhwc" : "cudnn-fma-nhwc";
    return true;
  }

  void conv3d(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv3dGeometry& g, Tensor& y) override {
    const cuda::OpScope op_scope(profiler_.get(), "conv3d");
    if (!video_kernels_) return Backend::conv3d(x, w, bias, g, y);
    check_conv3d(x, w, bias, g, y);
    const float* b = bias ? f32_in(*bias, "conv3d") : nullptr;
    // A keyframe through a causal convolution: one frame after kt − 1 zero frames, one output frame — only the
    // kernel's last frame meets data (H3_DISABLE_KEYFRAME_CONV_SLICE).
    const int64_t kt = w.dim(2);
    if (keyframe_conv_slice_ && x.dim(1) == 1 && g.pad_front == kt - 1 && y.dim(1) == 1) {
      // (Channel counts of whole 32-byte rows only: conv_in's 3 stay channels-first, where cuDNN's NHWC kernels
      // would be FMA ones or none.)
      if (channels_last_conv3d_ && tf32_conv_ && cudnn_conv_->choice() != cuda::ConvChoice::Legacy &&
          x.dim(0) % 8 == 0 && w.dim(0) % 8 == 0 && keyframe_conv_nhwc(x, w, bias, g, y))
        return;
      const Tensor ws = kt == 1 ? w : keyframe_slice(w, kt - 1, /*nhwc=*/false);
      return conv3d_padded(x, ws, b, g, 0, y);
    }
    conv3d_padded(x, w, b, g, g.pad_front, y);
  }

  void frame_group_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t groups, float eps,
                        bool silu, Tensor& y) override {
    const cuda::OpScope op_scope(profiler_.get(), "frame_group_norm");
    if (!video_kernels_) return Backend::frame_group_norm(x, weight, bias, groups, eps, silu, y);
    check_frame_group_norm(x, weight, bias, groups, y);
    const char* op = "frame_group_norm";
    const int64_t C = x.dim(0), T = x.dim(1), plane = x.dim(2) * x.dim(3);
    const int chunks = split_group_norm_ ? cuda::split_group_norm_chunks(C, T, plane, groups) : 1;
    if (chunks > 1) {
      const std::shared_ptr<void> partials =
          alloc_->allocate(static_cast<size_t>(2 * groups * T * chunks) * sizeof(double));
      cuda::launch_split_group_norm(f32_in(x, op), f32_in(weight, op), f32_in(bias, op), f32_out(y, op), C, T, plane,
                                    groups, eps, silu, chunks, static_cast<double*>(partials.get()), stream_);
      return;
    }
    cuda::launch_frame_group_norm(f32_in(x, op), f32_in(weight, op), f32_in(bias, op), f32_out(y, op), C, T, plane,
                                  groups, eps, silu, stream_);
  }

  // ---- video VAE output (kernels_video_vae.cu) ----
  void stitch_video_tiles(const Tensor& features, const VideoTileGrid& g, int64_t frame_begin, int64_t frame_end,
                          Tensor& canvas) override {
    const cuda::OpScope op_scope(profiler_.get(), "stitch_video_tiles");
    const int64_t ny = static_cast<int64_t>(g.y_starts.size()), nx = static_cast<int64_t>(g.x_starts.size());
    if (!video_kernels_ || ny > cuda::kStitchMaxTiles || nx > cuda::kStitchMaxTiles)
      return Backend::stitch_video_tiles(features, g, frame_begin, frame_end, canvas);
    check_stitch_video_tiles(features, g, frame_begin, frame_end, canvas);
    cuda::StitchParams p;
    p.features = in(features, "stitch_video_tiles", "features");
    p.canvas = f32_out(canvas, "stitch_video_tiles");
    p.channels = g.channels;
    p.r = g.temporal_patch;
    p.s = g.spatial_patch;
    p.lh = g.tile_latent_h;
    p.lw = g.tile_latent_w;
    p.tokens = g.tile_tokens();
    p.P = g.features();
    p.tile_h = g.tile_height();
    p.tile_w = g.tile_width();
    p.H = g.height();
    p.W = g.width();
    p.frame_begin = frame_begin;
    p.frames = frame_end - frame_begin;
    p.ny = static_cast<int>(ny);
    p.nx = static_cast<int>(nx);
    for (int64_t i = 0; i < ny; ++i) {
      p.y_starts[i] = static_cast<int32_t>(g.y_starts[i]);
      p.y_fade[i] = static_cast<int32_t>(i > 0 ? std::min(g.y_overlaps[i - 1], p.tile_h) : 0);
    }
    for (int64_t j = 0; j < nx; ++j) {
      p.x_starts[j] = static_cast<int32_t>(g.x_starts[j]);
      p.x_fade[j] = static_cast<int32_t>(j > 0 ? std::min(g.x_overlaps[j - 1], p.tile_w) : 0);
    }
    cuda::launch_stitch_video_tiles(p, stream_);
  }

  void video_frames_to_pixels(const Tensor& frames, const Tensor* fade_from, int64_t fade_extent,
                              const std::vector<float>& mean, const std::vector<float>& std,
                              Tensor& pixels) override {
    const cuda::OpScope op_scope(profiler_.get(), "video_frames_to_pixels");
    if (!video_kernels_ || frames.ndim() != 4 || frames.dim(0) > cuda::kPixelMaxChannels)
      return Backend::video_frames_to_pixels(frames, fade_from, fade_extent, mean, std, pixels);
    check_video_frames_to_pixels(frames, fade_from, fade_extent, mean, std, pixels);
    const char* op = "video_frames_to_pixels";
    cuda::PixelParams p;
    p.frames = f32_in(frames, op);
    p.fade_from = fade_from ? f32_in(*fade_from, op) : nullptr;
    p.pixels = f32_out(pixels, op);
    p.channels = frames.dim(0);
    p.frames_in = frames.dim(1);
    p.frames_fade = fade_from ? fade_from->dim(1) : 0;
    p.frames_out = pixels.dim(1);
    p.plane = frames.dim(2) * frames.dim(3);
    p.extent = fade_from ? std::min({fade_extent, p.frames_fade, p.frames_in}) : 0;
    for (int64_t c = 0; c < p.channels; ++c) {
      p.mean[c] = mean[c];
      p.std[c] = std[c];
    }
    cuda::launch_video_frames_to_pixels(p, stream_);
  }

  // ---- row movement ----
  void scatter_rows(const Tensor& src, const Tensor& idx, Tensor& dst) override {
    const cuda::OpScope op_scope(profiler_.get(), "scatter_rows");
    move_rows(src, idx, dst, /*scatter=*/true);
  }
  void gather_rows(const Tensor& src, const Tensor& idx, Tensor& dst) override {
    const cuda::OpScope op_scope(profiler_.get(), "gather_rows");
    move_rows(src, idx, dst, /*scatter=*/false);
  }
  void pool_row_pairs(const Tensor& full, const Tensor& pairs, Tensor& reduced) override {
    const char* op = "pool_row_pairs";
    const cuda::OpScope op_scope(profiler_.get(), op);
    check_row_pairs(op, full, pairs, reduced);
    cuda::launch_pool_row_pairs(in(full, op, "full"), index(pairs, op, "pairs"), out(reduced, op, "reduced"),
                                pairs.dim(0), full.dim(1), full.dim(0), err_dev_, stream_);
  }
  void unpool_row_pairs(const Tensor& reduced, const Tensor& pairs, Tensor& full) override {
    const char* op = "unpool_row_pairs";
    const cuda::OpScope op_scope(profiler_.get(), op);
    check_row_pairs(op, full, pairs, reduced);
    cuda::launch_unpool_row_pairs(in(reduced, op, "reduced"), index(pairs, op, "pairs"), out(full, op, "full"),
                                  pairs.dim(0), full.dim(1), full.dim(0), err_dev_, stream_);
  }

  // ---- beyond the interface (cuda_backend.h) ----
  cudaStream_t stream() const { return stream_; }
  CudaMemoryStats cuda_memory_stats() const {
    const auto st = alloc_->stats();
    return CudaMemoryStats{st.in_use_bytes, st.peak_in_use_bytes, st.reserved_bytes, st.device_allocations};
  }
  const std::string& last_attention_path() const { return last_attention_path_; }
  cpu::Fp8AttentionArithmetic fp8_attention_arithmetic() const {
    return {fp8_attention_schedule_.exp2_poly_chunks, fp8_attention_schedule_.tensor_sum_tiles == 0,
            fp8_attention_schedule_.key_tile};
  }
  const std::string& last_conv_path() const { return last_conv_path_; }
  std::string op_profile_report() override { return profiler_ ? profiler_->report() : std::string(); }
  std::string summary() const {
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    return cat(props_.name, " (", props_.multiProcessorCount, " SMs, ", props_.totalGlobalMem >> 20,
               " MiB, compute capability ", compute_device_.cc_major, ".", compute_device_.cc_minor,
               "; kernels: ", compute_device_.kernels, "), CUDA runtime ", rt, ", cuDNN ", cuda::CudnnSdpa::version(), ", cuBLASLt ",
               cublasLtGetVersion(), "; GEMMs: ", gemm_->lt_enabled() ? "cuBLASLt" : "cublasGemmEx (H3_DISABLE_CUBLASLT)",
               "; attention: ",
               use_hopper_attention_ ? cat("h3 Hopper kernel where it applies (", hopper_schedule_.key_tile,
                                           "-key tiles; head_dim 64: ", hopper_schedule_.hd64_consumers,
                                           " consumer warpgroups), ")
               : compute_device_.hopper_kernels ? std::string("(H3_DISABLE_HOPPER_ATTENTION) ")
                                        : std::string(),
               use_cudnn_attention_ ? "cuDNN SDPA, flash fallback" : "flash (H3_DISABLE_CUDNN_ATTENTION)",
               head_major_ ? " on head-major q|k|v (H3_ATTENTION_LAYOUT=head-major)" : " on the packed rows",
               "; gated residual + modulate: ",
               fused_modulate_ ? "one fused kernel" : "two kernels (H3_DISABLE_FUSED_MODULATE)",
               "; residual + RMSNorm: ",
               fused_residual_norm_ ? "one fused kernel" : "two kernels (H3_DISABLE_FUSED_RESIDUAL_NORM)",
               "; fp8 activations: ",
               fused_fp8_quant_ ? "quantized by their producers" : "a separate pass (H3_DISABLE_FP8_FUSED_QUANT)",
               "; audio VAE: ", !audio_kernels_ ? "CPU round trips (H3_DISABLE_CUDA_AUDIO_KERNELS)"
                                : tf32_conv_    ? "cuDNN TF32 convolutions, else tiled f32 kernels"
                                : tiled_conv_   ? "tiled f32 kernels (H3_DISABLE_TF32_CONV)"
                                                : "direct f32 kernels (H3_DISABLE_TF32_CONV, H3_DISABLE_CUDA_CONV_TILED)",
               tf32_conv_ ? (cudnn_conv_->choice() == cuda::ConvChoice::Legacy ? ", 1-D: legacy API (H3_DISABLE_CUDNN_CONV_GRAPH)"
                             : cudnn_conv_->choice() == cuda::ConvChoice::Heuristic
                                 ? ", 1-D: graph API, heuristic's first (H3_DISABLE_CONV_AUTOTUNE)"
                                 : ", 1-D: graph API, autotuned")
                          : "",
               fused_conv_snake_ ? "; conv + Snake: fused epilogue" : "; conv + Snake: three ops (H3_DISABLE_FUSED_CONV_SNAKE)",
               prefers_channels_last_conv1d() ? "; audio encoder trunk: channels-last"
                                              : "; audio encoder trunk: channels-first",
               tiled_pooled_attention_ ? "; pooled attention: tiled"
                                       : "; pooled attention: row kernel (H3_DISABLE_TILED_POOLED_ATTENTION)",
               "; video VAE ops: ", video_kernels_ ? "CUDA kernels" : "CPU round trips (H3_DISABLE_CUDA_VIDEO_KERNELS)",
               "; sparse attention: ", sparse_kernels_ ? "block-sparse kernels" : "CPU reference (H3_DISABLE_SPARSE_KERNEL)");
  }

 private:
  struct Staging {
    void* host = nullptr;              // pinned
    std::shared_ptr<void> device;      // raw bytes before conversion (made on first use)
    cudaEvent_t event = nullptr;       // recorded after the last use of both buffers
  };

  void check_device_errors() {
    const int e = *reinterpret_cast<volatile int*>(err_host_);
    if (e == 0) return;
    *err_host_ = 0;
    switch (static_cast<cuda::DeviceError>(e)) {
      case cuda::DeviceError::TableRowOutOfRange:
        fail("modulation table row index out of range (rms_norm_modulate, gated_residual or ",
             "gated_residual_modulate)");
      case cuda::DeviceError::RowIndexOutOfRange:
        fail("row index out of range (scatter_rows, gather_rows, pool_row_pairs or unpool_row_pairs)");
      case cuda::DeviceError::AttentionStalled:
        fail("h3's Hopper attention kernel stalled (a pipeline wait never completed: a bug; ",
             "H3_DISABLE_HOPPER_ATTENTION=1 selects cuDNN's attention)");
      default: fail("a CUDA kernel reported error code ", e);
    }
  }

  static cudaEvent_t event_of(const DeviceTimePoint& mark, const char* op) {
    const auto* p = dynamic_cast<const CudaTimePoint*>(&mark);
    H3_CHECK(p != nullptr, op, ": a time point of another backend");
    return p->event;
  }

  Staging& staging(int i) {
    Staging& st = staging_[i];
    if (!st.host) {
      H3_CUDA_CHECK(cudaHostAlloc(&st.host, kStagingBytes, cudaHostAllocDefault), "upload");
      H3_CUDA_CHECK(cudaEventCreateWithFlags(&st.event, cudaEventDisableTiming), "upload");
    }
    return st;
  }

  // Host bytes → device through two pinned buffers: while chunk i is copied (and converted) on the stream, the host
  // fills the other buffer with chunk i + 1. Chunk boundaries fall on multiples of 8 elements.
  void copy_to_device(const Tensor& src, Tensor& dst) {
    const bool same = src.dtype() == dst.dtype();
    const size_t esz = dtype_size(src.dtype()), dsz = dtype_size(dst.dtype());
    const int64_t n = src.numel();
    const int64_t chunk = static_cast<int64_t>(kStagingBytes / esz) / 8 * 8;
    const char* from = static_cast<const char*>(src.data());
    int which = 0;
    for (int64_t first = 0; first < n; first += chunk, which ^= 1) {
      const int64_t count = std::min(chunk, n - first);
      const size_t bytes = static_cast<size_t>(count) * esz;
      Staging& st = staging(which);
      H3_CUDA_CHECK(cudaEventSynchronize(st.event), "upload");  // the buffer's previous chunk has left
      char* pinned = static_cast<char*>(st.host);
      const char* chunk_src = from + static_cast<size_t>(first) * esz;
      parallel_for(0, static_cast<int64_t>(bytes), int64_t(4) << 20, [&](int64_t b0, int64_t b1) {
        std::memcpy(pinned + b0, chunk_src + b0, static_cast<size_t>(b1 - b0));
      });
      char* dst_bytes = static_cast<char*>(dst.data()) + static_cast<size_t>(first) * dsz;
      if (same) {
        H3_CUDA_CHECK(cudaMemcpyAsync(dst_bytes, pinned, bytes, cudaMemcpyHostToDevice, stream_), "upload");
      } else {
        if (!st.device) st.device = alloc_->allocate(kStagingBytes);
        H3_CUDA_CHECK(cudaMemcpyAsync(st.device.get(), pinned, bytes, cudaMemcpyHostToDevice, stream_), "upload");
        cuda::launch_convert(In{st.device.get(), elem_of(src.dtype())}, Out{dst_bytes, elem_of(dst.dtype())}, count,
                             stream_);
      }
      H3_CUDA_CHECK(cudaEventRecord(st.event, stream_), "upload");
    }
  }

  // Where attention reads q, k and v: head 0 of row 0 of each, and the strides (elements) between rows and heads.
  struct AttnSource {
    const char* q = nullptr;
    const char* k = nullptr;
    const char* v = nullptr;
    int64_t row = 0, q_head = 0, kv_head = 0;
  };

  void prepare_qk(Tensor& qkv, const Tensor& head_major, const AttentionSpec& s, int64_t R) {
    const int rot = s.rotary_dim;
    In cos{}, sin{};
    if (rot) {
      H3_CHECK(rot % 2 == 0 && rot <= s.head_dim, "attention: rotary_dim ", rot, " must be even and <= head_dim ",
               s.head_dim);
      H3_CHECK(s.cos && s.sin, "attention: rotary tables missing");
      H3_CHECK(s.cos->numel() == R * rot && s.sin->numel() == R * rot, "attention: rotary tables ", s.cos->str(),
               " must be [", R, ", ", rot, "]");
      cos = in(*s.cos, "attention", "rope cos");
      sin = in(*s.sin, "attention", "rope sin");
    }
    In wq{}, wk{};
    if (s.qk_norm) {
      wq = in_opt(s.q_norm_weight, "attention", "q norm weight");
      wk = in_opt(s.k_norm_weight, "attention", "k norm weight");
      if (s.q_norm_weight) H3_CHECK(s.q_norm_weight->numel() == s.head_dim, "attention: q norm weight size");
      if (s.k_norm_weight) H3_CHECK(s.k_norm_weight->numel() == s.head_dim, "attention: k norm weight size");
    }
    const Out dst = head_major.defined() ? out(head_major, "attention", "head-major q|k|v") : Out{};
    cuda::launch_qk_norm_rope(out(qkv, "attention", "qkv"), dst, R, s.heads_q, s.heads_kv, s.head_dim, s.qk_norm,
                              s.qk_norm_eps, wq, wk, rot, cos, sin, qk_row_kernel_, stream_);
  }

  // The kernels' view of attention over `batch` consecutive segments of `len` rows starting at row `first`, out_t's
  // rows (o: null without one).
  static cuda::FlashParams flash_params(const AttnSource& src, DType dt, const AttentionSpec& s, Tensor* out_t,
                                        int64_t first, int64_t len, int batch) {
    const int64_t Dh = s.head_dim, Hq = s.heads_q, Hkv = s.heads_kv, OW = Hq * Dh;
    const size_t esz = dtype_size(dt), skip = static_cast<size_t>(first * src.row) * esz;
    H3_CHECK(len < (int64_t(1) << 31), "attention: segment of ", len, " rows is too long");
    cuda::FlashParams p;
    p.q = src.q + skip;
    p.k = src.k + skip;
    p.v = src.v + skip;
    p.o = out_t ? static_cast<char*>(out_t->data()) + static_cast<size_t>(first * OW) * esz : nullptr;
    p.t = elem_of(dt);
    p.q_row = p.k_row = p.v_row = src.row;
    p.o_row = OW;
    p.q_head = src.q_head;
    p.kv_head = src.kv_head;
    p.o_head = Dh;
    p.q_batch = p.kv_batch = len * src.row;
    p.o_batch = len * OW;
    p.batch = batch;
    p.seq_len = static_cast<int>(len);
    p.heads_q = static_cast<int>(Hq);
    p.heads_kv = static_cast<int>(Hkv);
    p.head_dim = static_cast<int>(Dh);
    p.scale = s.scale;
    p.causal = s.causal;
    return p;
  }

  // Attention over `batch` consecutive segments of `len` rows starting at row `first`.
  void attend(const AttnSource& src, DType dt, const AttentionSpec& s, Tensor& out_t, int64_t first, int64_t len,
              int batch) {
    const int64_t Dh = s.head_dim, Hq = s.heads_q, Hkv = s.heads_kv, OW = Hq * Dh;
    const cuda::FlashParams p = flash_params(src, dt, s, &out_t, first, len, batch);
    const void *q = p.q, *k = p.k, *v = p.v, *base = p.q;
    void* o = p.o;
    if (use_hopper_attention_) {
      const char* why = cuda::launch_hopper_attention(p, hopper_schedule_, err_dev_, stream_);
      if (!why) {
        last_attention_path_ = "h3-hopper";
        return;
      }
      if (why != last_hopper_refusal_) {
        log_debug("h3's Hopper attention kernel does not apply (", batch, "x", len, " rows, ", Hq, "/", Hkv,
                  " heads x ", Dh, s.causal ? ", causal" : "", "): ", why);
        last_hopper_refusal_ = why;
      }
    }
    // cuDNN reads 16-byte vectors: every head must start 16-byte aligned.
    const bool cudnn_layout = Dh % 8 == 0 && (reinterpret_cast<uintptr_t>(base) & 15u) == 0 &&
                              (reinterpret_cast<uintptr_t>(o) & 15u) == 0;
    if (use_cudnn_attention_ && cudnn_layout) {
      cuda::SdpaShape sh;
      sh.batch = batch;
      sh.heads_q = static_cast<int>(Hq);
      sh.heads_kv = static_cast<int>(Hkv);
      sh.seq = static_cast<int>(len);
      sh.head_dim = static_cast<int>(Dh);
      const int64_t qs[4] = {len * src.row, src.q_head, src.row, 1}, ks[4] = {len * src.row, src.kv_head, src.row, 1};
      const int64_t os[4] = {len * OW, Dh, OW, 1};
      std::copy(qs, qs + 4, sh.q_stride);
      std::copy(ks, ks + 4, sh.k_stride);
      std::copy(ks, ks + 4, sh.v_stride);
      std::copy(os, os + 4, sh.o_stride);
      sh.causal = s.causal;
      sh.dtype = dt == DType::BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
      std::string why;
      if (sdpa_->run(sh, q, k, v, o, s.scale, [this](size_t bytes) { return attention_workspace(bytes); }, &why)) {
        last_attention_path_ = "cudnn-" + sdpa_->form_of(sh);
        return;
      }
      if (!warned_fallback_) {
        log_warn("cuDNN SDPA refused attention (", batch, "x", len, " rows, ", Hq, "/", Hkv, " heads x ", Dh,
                 s.causal ? ", causal" : "", "): ", why, "using h3's flash attention kernel instead");
        warned_fallback_ = true;
      }
    }
    cuda::launch_flash_attention(p, stream_);
    last_attention_path_ = "flash";
  }

  static cuda::TileTable tile_table(const SparseTiles& t) {
    H3_CHECK(t.order.numel() == t.rows && t.begin.numel() == t.tiles + 1, "sparse attention: tile tables ",
             t.order.str(), " and ", t.begin.str(), " must be [", t.rows, "] and [", t.tiles + 1, "]");
    cuda::TileTable table;
    table.order = index(t.order, "sparse attention", "tile order");
    table.begin = index(t.begin, "sparse attention", "tile starts");
    table.tiles = static_cast<int>(t.tiles);
    table.prefix_tiles = static_cast<int>(t.prefix_tiles);
    table.tile_elems = static_cast<int>(t.tile_elems);
    return table;
  }

  // The F32 device data of a sparse-attention operand of shape `shape`.
  static float* f32_of(const Tensor& t, const char* op, const char* what, const Shape& shape) {
    check_device(t, op, what);
    H3_CHECK(t.dtype() == DType::F32 && t.shape() == shape, op, ": ", what, " ", t.str(), " must be F32",
             shape_str(shape));
    return static_cast<float*>(t.data());
  }


  // FP8 attention's operand buffers for `batch` segments of `len` rows (cuda_kernels.h's Fp8AttentionBuffers).
  struct Fp8AttentionScratch {
    Tensor q, k, vt, qs, ks, vs, amax, bound;
    cuda::Fp8AttentionBuffers buffers() const {
      return {q.ptr<uint8_t>(),
              k.ptr<uint8_t>(),
              vt.ptr<uint8_t>(),
              qs.ptr<float>(),
              ks.ptr<float>(),
              vs.ptr<float>(),
              reinterpret_cast<uint32_t*>(amax.ptr<int32_t>()),
              reinterpret_cast<uint32_t*>(bound.ptr<int32_t>())};
    }
  };
  Fp8AttentionScratch fp8_attention_scratch(const AttentionSpec& s, int64_t len, int64_t batch) {
    const int64_t T = fp8_attention_schedule_.key_tile, Lp = cpu::fp8_attention_padded_rows(len, T);
    const int64_t Hq = s.heads_q, Hkv = s.heads_kv, Dh = s.head_dim;
    return {empty({batch, Hq, Lp, Dh}, DType::U8),    empty({batch, Hkv, Lp, Dh}, DType::U8),
            empty({batch, Hkv, Dh, Lp}, DType::U8),   empty({batch, Hq, Lp / cuda::kFp8AttentionBlock}, DType::F32),
            empty({batch, Hkv, Lp / T}, DType::F32),  empty({batch, Hkv, Dh}, DType::F32),
            empty({batch, Hkv, Dh}, DType::I32),      empty({batch}, DType::I32)};
  }

  // attend() in FP8 (our Hopper kernel), or in bf16 where the kernel does not take the shape (said once per reason).
  void attend_fp8(const AttnSource& src, DType dt, const AttentionSpec& s, Tensor& out_t, int64_t first, int64_t len,
                  int batch) {
    const cuda::FlashParams p = flash_params(src, dt, s, &out_t, first, len, batch);
    if (const char* why = cuda::hopper_attention_fp8_refusal(p)) {
      if (why != last_fp8_attention_refusal_) {
        log_info("FP8 attention does not apply to ", batch, "x", len, " rows, ", s.heads_q, "/", s.heads_kv,
                 " heads x ", s.head_dim, " (", why, "): that attention runs in bf16");
        last_fp8_attention_refusal_ = why;
      }
      attend(src, dt, s, out_t, first, len, batch);
      return;
    }
    const Fp8AttentionScratch scratch = fp8_attention_scratch(s, len, batch);
    cuda::launch_hopper_attention_fp8(p, scratch.buffers(), fp8_attention_schedule_, err_dev_, stream_);
    last_attention_path_ = "h3-hopper-fp8";
  }

  // attend_fp8 with its output as the out product's FP8 activation (self_attention_fp8 above): the kernel's codes
  // into q's rows, or (separate, not null) its 16-bit output there and then those codes from it. The shape must be
  // the kernel's (attention() checked).
  void attend_fp8_codes(const AttnSource& src, DType dt, const AttentionSpec& s, Tensor* separate, Fp8Activation& q,
                        int64_t first, int64_t len, int batch) {
    cuda::FlashParams p = flash_params(src, dt, s, separate, first, len, batch);
    const int64_t OW = int64_t(s.heads_q) * s.head_dim;
    const Fp8AttentionScratch scratch = fp8_attention_scratch(s, len, batch);
    const cuda::Fp8AttentionBuffers buffers = scratch.buffers();
    uint8_t* const codes = q.codes.ptr<uint8_t>() + first * OW;
    float* const scale = q.scale.ptr<float>() + first;
    if (separate) {
      cuda::launch_hopper_attention_fp8(p, buffers, fp8_attention_schedule_, err_dev_, stream_);
      const In rows{p.o, elem_of(dt)};  // the group's first row of the 16-bit output
      cuda::launch_fp8_quantize_rows_by_bound(rows, len * batch, OW, buffers.v_bound, len, codes, scale, stream_);
    } else {
      p.o = codes;
      const cuda::Fp8AttentionCodes out{scale};
      cuda::launch_hopper_attention_fp8(p, buffers, fp8_attention_schedule_, err_dev_, stream_, &out);
    }
    last_attention_path_ = "h3-hopper-fp8";
  }

 public:
  // The quantization step of self_attention_in_fp8 alone, on qkv's packed rows as they stand (cuda_backend.h).
  cpu::Fp8AttentionOperands quantize_attention_fp8(const Tensor& qkv, const AttentionSpec& s, int64_t first,
                                                   int64_t len, int batch) {
    check_device(qkv, "fp8 attention quantize", "qkv");
    const int64_t W = (s.heads_q + 2 * s.heads_kv) * s.head_dim;
    H3_CHECK(last_dim(qkv) == W && first >= 0 && len > 0 && batch > 0 && first + batch * len <= rows_of(qkv),
             "fp8 attention quantize: qkv ", qkv.str(), " and rows [", first, ", ", first + batch * len, ")");
    const size_t esz = dtype_size(qkv.dtype());
    AttnSource src;
    src.q = static_cast<const char*>(qkv.data());
    src.k = src.q + static_cast<size_t>(s.heads_q * s.head_dim) * esz;
    src.v = src.q + static_cast<size_t>((s.heads_q + s.heads_kv) * s.head_dim) * esz;
    src.row = W;
    src.q_head = src.kv_head = s.head_dim;
    const cuda::FlashParams p = flash_params(src, qkv.dtype(), s, nullptr, first, len, batch);
    if (const char* why = cuda::hopper_attention_fp8_refusal(p)) fail("fp8 attention quantize: ", why);
    const Fp8AttentionScratch scratch = fp8_attention_scratch(s, len, batch);
    cuda::launch_attention_fp8_quantize(p, scratch.buffers(), fp8_attention_schedule_, stream_);
    cpu::Fp8AttentionOperands o;
    o.q = download(scratch.q);
    o.k = download(scratch.k);
    o.vt = download(scratch.vt);
    o.qs = download(scratch.qs);
    o.ks = download(scratch.ks);
    o.vs = download(scratch.vs);
    o.batch = batch;
    o.len = len;
    o.padded = scratch.q.dim(2);
    o.key_tile = fp8_attention_schedule_.key_tile;
    return o;
  }

 private:
  void* attention_workspace(size_t bytes) {
    if (!attn_ws_ || attn_ws_bytes_ < bytes) {
      attn_ws_ = alloc_->allocate(bytes);
      attn_ws_bytes_ = bytes;
    }
    return attn_ws_.get();
  }

  // The checked gate lookup of a gated residual x += table[idx[r], gate_param] · y (op names the op in messages).
  static cuda::RowTable gate_of(const char* op, const Tensor& x, const Tensor& y, const Tensor& table, int gate_param,
                                const Tensor& idx) {
    const int64_t D = last_dim(x), R = rows_of(x);
    H3_CHECK(y.numel() == x.numel(), op, ": branch output ", y.str(), " must have the residual's shape ", x.str());
    H3_CHECK(table.ndim() == 3 && table.dim(2) == D, op, ": gate table ", table.str(), " must be [R, P, ", D, "]");
    const int P = static_cast<int>(table.dim(1));
    H3_CHECK(gate_param >= 0 && gate_param < P, op, ": gate parameter ", gate_param, " out of range [0, ", P, ")");
    H3_CHECK(idx.numel() == R, op, ": ", idx.numel(), " gate row indices for ", R, " rows");
    return cuda::RowTable{in(table, op, "gate table"), table.dim(0), P, index(idx, op, "gate row index")};
  }

  // The checked table lookup of an RMSNorm + modulate of x into y (op names the op in messages).
  static cuda::RowTable modulation_of(const char* op, const Tensor& x, const Tensor& w, const Tensor& table,
                                      int shift_param, int scale_param, const Tensor& idx, const Tensor& y) {
    const int64_t D = last_dim(x), R = rows_of(x);
    H3_CHECK(table.ndim() == 3 && table.dim(2) == D, op, ": table ", table.str(), " must be [R, P, ", D, "]");
    const int P = static_cast<int>(table.dim(1));
    H3_CHECK(shift_param >= 0 && shift_param < P && scale_param >= 0 && scale_param < P, op, ": parameters ",
             shift_param, ", ", scale_param, " out of range [0, ", P, ")");
    H3_CHECK(idx.numel() == R, op, ": ", idx.numel(), " row indices for ", R, " rows");
    H3_CHECK(w.numel() == D, op, ": norm weight ", w.str(), " must have ", D, " elements");
    H3_CHECK(y.numel() == x.numel(), op, ": output ", y.str(), " vs input ", x.str());
    return cuda::RowTable{in(table, op, "table"), table.dim(0), P, index(idx, op, "row index")};
  }

  void move_rows(const Tensor& src, const Tensor& idx, Tensor& dst, bool scatter) {
    const char* op = scatter ? "scatter_rows" : "gather_rows";
    const int64_t D = last_dim(src), n = idx.numel();
    H3_CHECK(last_dim(dst) == D, op, ": ", src.str(), " and ", dst.str(), " differ in width");
    H3_CHECK((scatter ? rows_of(src) : rows_of(dst)) == n, op, ": ", n, " indices for ", src.str(), " -> ",
             dst.str());
    const int64_t bound = scatter ? rows_of(dst) : rows_of(src);
    cuda::launch_move_rows(in(src, op, "source"), index(idx, op, "index"), out(dst, op, "destination"), n, D, scatter,
                           bound, err_dev_, stream_);
  }

  const ComputeDevice compute_device_;  // cuda_detect_device's: the capability (or a faked one), the paths chosen
  cudaDeviceProp props_{};
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<cuda::CachingAllocator> alloc_;
  int* err_host_ = nullptr;  // mapped: kernels write a DeviceError code, synchronize() reads it
  int* err_dev_ = nullptr;
  std::shared_ptr<void> gemm_ws_;
  std::unique_ptr<cuda::Gemm> gemm_;
  std::unique_ptr<cuda::Fp8Gemm> fp8_gemm_;
  std::unique_ptr<cuda::CudnnSdpa> sdpa_;
  std::unique_ptr<cuda::CudnnConv> cudnn_conv_;
  bool use_cudnn_attention_ = true;
  bool use_hopper_attention_ = true;
  const char* last_hopper_refusal_ = nullptr;  // the reason last logged (log once per change)
  const char* last_fp8_attention_refusal_ = nullptr;  // likewise for FP8 attention
  bool tf32_conv_ = true;  // audio VAE convolutions through cuDNN with TF32 math where it applies
  bool tiled_conv_ = true, audio_kernels_ = true, video_kernels_ = true, qk_row_kernel_ = true;
  cuda::HopperSchedule hopper_schedule_;  // H3_HOPPER_KEY_TILE, H3_HOPPER_HD64_CONSUMERS
  // H3_FP8_ATTENTION_POLY_CHUNKS, H3_FP8_ATTENTION_STAGES, H3_FP8_ATTENTION_TILE_ACCUMULATOR,
  // H3_FP8_ATTENTION_TENSOR_SUM_TILES, H3_FP8_ATTENTION_KEY_TILE
  cuda::Fp8AttentionSchedule fp8_attention_schedule_;
  bool fused_modulate_ = true;  // gated_residual_modulate in one kernel
  bool fused_residual_norm_ = true;  // residual_rms_norm in one kernel
  bool fused_fp8_quant_ = true;      // the *_fp8 producers quantize in their own kernels
  bool fp8_attention_codes_ = true;  // self_attention_fp8: codes scaled by the segments' bounds (not per token)
  std::set<std::pair<int64_t, int64_t>> fp8_block_refused_;  // weight shapes logged as kept per channel
  bool fused_conv_snake_ = true;     // conv1d_snake: bias-free convolution + one epilogue kernel
  bool tiled_pooled_attention_ = true;
  bool keyframe_conv_slice_ = true;   // H3_DISABLE_KEYFRAME_CONV_SLICE=1: no
  bool split_group_norm_ = true;      // H3_DISABLE_SPLIT_GROUP_NORM=1: no
  bool channels_last_conv3d_ = true;  // H3_DISABLE_CHANNELS_LAST_CONV3D=1 (or H3_DISABLE_CONV3D_AS_2D=1): no
  // conv3d's weight slices (keyframe_slice), by weight address and layout; `owner` tells a weight freed and another
  // allocated at its address apart.
  struct WeightSlice {
    std::weak_ptr<void> owner;
    Shape shape;
    Tensor slice;
  };
  std::map<std::pair<const void*, bool>, WeightSlice> weight_slices_;
  bool channels_last_conv_ = true;  // prefers_channels_last_conv1d (H3_DISABLE_CHANNELS_LAST_CONV=1: no)
  static constexpr size_t kMaxRecordedConvShapes = 256;
  std::map<cuda::Conv1dShape, int64_t> conv_calls_;  // 1-D forward convolutions run, per shape
  std::vector<cuda::Conv1dShape> conv_order_;        // their shapes in order of first use
  cudaStream_t copy_stream_ = nullptr;  // asynchronous downloads and uploads (the copy queue)
  std::shared_ptr<void> copy_scratch_;  // upload_async's device-side conversions read their raw bytes from here
  size_t copy_scratch_bytes_ = 0;
  std::shared_ptr<cuda::PinnedPool> pinned_;
  bool head_major_ = false;
  bool sparse_kernels_ = true;  // H3_DISABLE_SPARSE_KERNEL=1: the block-sparse ops' defaults (the CPU reference)
  const char* last_sparse_refusal_ = nullptr;
  bool sparse_hopper_ = true;  // H3_DISABLE_SPARSE_HOPPER=1 (or no sm_90a kernels): the portable routed kernel
  const char* last_sparse_hopper_refusal_ = nullptr;
  bool warned_fallback_ = false;
  std::string last_attention_path_;
  std::string last_conv_path_;
  std::unique_ptr<cuda::OpProfiler> profiler_;  // H3_CUDA_PROFILE=1
  std::shared_ptr<void> attn_ws_;
  size_t attn_ws_bytes_ = 0;
  Staging staging_[2];
};

CudaBackend& cuda_of(Backend& be) {
  auto* c = dynamic_cast<CudaBackend*>(&be);
  H3_CHECK(c != nullptr, "this needs the CUDA backend, got '", be.name(), "'");
  return *c;
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() {
  ComputeDevice d;
  H3_CHECK(cuda_detect_device(d), d.note, "; ", kCpuInstead);
  return std::make_unique<CudaBackend>(d);
}

bool cuda_backend_available() {
  ComputeDevice d;
  return cuda_detect_device(d);
}

std::unique_ptr<Backend> make_cuda_backend_on(int ordinal) {
  ComputeDevice d;
  H3_CHECK(cuda_detect_device(d, ordinal), d.note, "; ", kCpuInstead);
  return std::make_unique<CudaBackend>(d, ordinal);
}

void cuda_bind_device(int ordinal) { H3_CUDA_CHECK(cudaSetDevice(ordinal), "selecting a rank's GPU"); }

void cuda_fill_random_normal(Backend& be, Tensor& t, uint64_t seed, float stddev) {
  cuda_of(be).fill_random_normal(t, seed, 0.f, stddev);
}
cudaStream_t cuda_stream(Backend& be) { return cuda_of(be).stream(); }
void cuda_set_fp8_fused_quant(Backend& be, bool on) { cuda_of(be).set_fused_fp8_quant(on); }
bool cuda_fp8_fused_quant(Backend& be) { return cuda_of(be).fused_fp8_quant(); }
cpu::Fp8AttentionOperands cuda_quantize_attention_fp8(Backend& be, const Tensor& qkv, const AttentionSpec& s,
                                                      int64_t first, int64_t len, int batch) {
  return cuda_of(be).quantize_attention_fp8(qkv, s, first, len, batch);
}

// backend/memory_budget.h's set_device_memory_limit and device_memory_limit for this backend.
void cuda_set_device_memory_limit(Backend& be, std::optional<uint64_t> bytes) { cuda_of(be).set_memory_limit(bytes); }
std::optional<uint64_t> cuda_device_memory_limit(const Backend& be) {
  return cuda_of(const_cast<Backend&>(be)).memory_limit();
}
CudaMemoryStats cuda_memory_stats(Backend& be) { return cuda_of(be).cuda_memory_stats(); }
void cuda_reset_peak_memory(Backend& be) { cuda_of(be).reset_peak_memory(); }
std::string cuda_last_attention_path(Backend& be) { return cuda_of(be).last_attention_path(); }
cpu::Fp8AttentionArithmetic cuda_fp8_attention_arithmetic(Backend& be) { return cuda_of(be).fp8_attention_arithmetic(); }
std::string cuda_last_conv_path(Backend& be) { return cuda_of(be).last_conv_path(); }
std::string cuda_backend_summary(Backend& be) { return cuda_of(be).summary(); }
CudaConvReport cuda_conv1d_report(Backend& be, int reps, int64_t runs) { return cuda_of(be).conv1d_report(reps, runs); }

}  // namespace h3
