// What the CUDA backend offers beyond the Backend interface, for benchmarks, tools and model construction from
// device-generated weights. Only compiled with CUDA (H3_HAVE_CUDA); every function requires a backend made by
// make_cuda_backend() and throws h3::Error otherwise.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_fp8_attention.h"

namespace h3 {

// Fills a float tensor on the CUDA backend with Normal(0, stddev) values drawn on the device from a counter-based
// hash of (seed, element index): no host memory, no transfer, the same values for the same seed.
void cuda_fill_random_normal(Backend& be, Tensor& t, uint64_t seed, float stddev);

// The backend's one stream (for timing with CUDA events around backend calls).
cudaStream_t cuda_stream(Backend& be);

// The CUDA backend on device `ordinal` (make_cuda_backend is ordinal 0), for the ranks of a GPU group
// (parallel/rank_group.h): its ops must be called from a thread on which cuda_bind_device(ordinal) ran.
std::unique_ptr<Backend> make_cuda_backend_on(int ordinal);
void cuda_bind_device(int ordinal);

// Whether the FP8 activations' producers (Backend::rms_norm_modulate_fp8 and the others) quantize in their own
// kernels (the default) or run the bf16 op and a separate quantization pass (H3_DISABLE_FP8_FUSED_QUANT=1; the
// same bits): switched at run time by the FP8 tests and benchmarks, which measure both.
void cuda_set_fp8_fused_quant(Backend& be, bool on);
bool cuda_fp8_fused_quant(Backend& be);

// The quantization self_attention_in_fp8 runs before its kernel, alone: the rows [first, first + batch·len) of the
// packed qkv (BF16 or F16, taken as they stand: no q/k norm or rotation) as `batch` segments of `len` rows, → the
// operands as host tensors in backend/cpu/cpu_fp8_attention.h's layout (for the FP8 attention tests; needs the
// Hopper kernel: throws where hopper_attention_fp8_refusal refuses).
cpu::Fp8AttentionOperands cuda_quantize_attention_fp8(Backend& be, const Tensor& qkv, const AttentionSpec& s,
                                                      int64_t first, int64_t len, int batch);

struct CudaMemoryStats {
  size_t in_use_bytes = 0, peak_in_use_bytes = 0, reserved_bytes = 0;
  uint64_t device_allocations = 0;
};
CudaMemoryStats cuda_memory_stats(Backend& be);
void cuda_reset_peak_memory(Backend& be);

// Which attention implementation served the most recent self_attention call: "h3-hopper" (our sm_90a kernel),
// "cudnn-unified", "cudnn-composite" or "flash" (our portable kernel).
std::string cuda_last_attention_path(Backend& be);

// The FP8 attention kernel's arithmetic choices (cuda_kernels.h's Fp8AttentionSchedule, from
// H3_FP8_ATTENTION_POLY_CHUNKS / H3_FP8_ATTENTION_TILE_ACCUMULATOR): what
// cpu::attention_in_fp8 takes to emulate it.
cpu::Fp8AttentionArithmetic cuda_fp8_attention_arithmetic(Backend& be);

// Which implementation served the most recent conv1d / conv_transpose1d / conv3d: "cudnn-tf32" (cuDNN, tensor-core
// algorithm), "cudnn-fma" (cuDNN, an FMA algorithm) or "h3-f32" (our f32 kernels).
std::string cuda_last_conv_path(Backend& be);

// The 1-D forward convolutions the backend has run (each distinct shape once, in order of first use; at most 256),
// each timed every way it can run, on scratch operands of its sizes: cuDNN's legacy API's choice, the graph
// heuristic's first configuration, the fastest of its first 8, the same channels-last (information), and h3's f32
// kernel (cudnn_conv.h's CudnnConv::compare). `table`: per shape its calls per run (the calls recorded divided by
// `runs`, e.g. the encodes made), GFLOP, what served it, each way's time, TFLOPS and configuration; then each way's
// time for all the calls of a run. For bench_ref2va --conv-report; synchronizes, allocates the largest shape's
// operands.
struct CudaConvReport {
  std::string table;
  std::vector<std::pair<std::string, double>> per_run_ms;  // way → Σ calls per run × ms; -1: some shape had none
};
CudaConvReport cuda_conv1d_report(Backend& be, int reps, int64_t runs);

// One line: device, cuDNN and cuBLASLt versions, and the switches in effect (H3_DISABLE_*).
std::string cuda_backend_summary(Backend& be);

}  // namespace h3
