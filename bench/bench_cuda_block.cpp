// Times the op sequence Dit::step runs for one MiniMax-H3 DiT main block (dit.md §5.6) at full width on CUDA:
// hidden 5376, 56 heads x 128 (96 rotated channels), SwiGLU ffn 14336, random bf16 weights made on the device.
// Per row count L: median of --reps block runs after --warmup, CUDA events around every op, reported per category
// (GEMMs, attention, everything else) with achieved TFLOP/s (dit.md §8: linear 770,703,360·L, attention
// 28,672·L² per block) and x50 for the 50 blocks. Also in the same run: the bf16 GEMM ceiling (8192³) and
// device-to-device copy bandwidth, and attention alone through each implementation (our Hopper kernel with 128-
// and 176-key tiles, cuDNN unified, cuDNN composite, our flash kernel) on packed (and with --head-major also
// head-major) q|k|v. The block
// runs once per attention implementation in --impls: "hopper" (the default backend) and "cudnn"
// (H3_DISABLE_HOPPER_ATTENTION=1).
//
//   bench_cuda_block [--rows 1902,15435,37746] [--reps 20] [--warmup 2] [--impls hopper,cudnn] [--head-major]
//                    [--no-flash] [--no-ceilings] [--no-attention-forms] [--fp8-attention]
// --fp8-attention: the attention forms are our bf16 Hopper kernel against FP8 attention's (issue 18) exp2 splits
// (fp8_form below); with --impls '' --no-ceilings that alone runs. --fp8-forms F,F,...: those FP8 forms alone (no
// ceilings, no block, no bf16 form; e.g. one form under a profiler).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifndef H3_HAVE_CUDA
int main() {
  std::puts("bench_cuda_block: this build has no CUDA backend");
  return 0;
}
#else
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "util/error.h"
#include "util/scoped_env.h"

using namespace h3;

namespace {

// The DiT's widths (dit.md §2).
constexpr int64_t kHidden = 5376, kHeads = 56, kHeadDim = 128, kInner = kHeads * kHeadDim, kFfn = 14336;
constexpr int kRotary = 96, kParams = 6, kTableRows = 6;  // 2 timesteps x 3 modalities
constexpr double kLinearFlopPerRow = 770'703'360.0, kAttentionFlopPerRow2 = 28'672.0;
constexpr int kBlocks = 50;

#define CK(call) H3_CHECK((call) == cudaSuccess, #call, ": ", cudaGetErrorString(cudaGetLastError()))

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

struct Events {
  std::vector<cudaEvent_t> ev;
  explicit Events(size_t n) : ev(n) {
    for (auto& e : ev) CK(cudaEventCreate(&e));
  }
  ~Events() {
    for (auto& e : ev) cudaEventDestroy(e);
  }
  double ms(size_t a, size_t b) const {
    float t = 0;
    CK(cudaEventElapsedTime(&t, ev[a], ev[b]));
    return t;
  }
};

Tensor random_tensor(Backend& be, const Shape& s, DType dt, uint64_t seed, float stddev) {
  Tensor t = be.empty(s, dt);
  cuda_fill_random_normal(be, t, seed, stddev);
  return t;
}

// Rotary tables like dit.md §5.1 (positions on a small 3-D grid), rounded to bf16 on upload.
void rope_tables(Backend& be, int64_t L, Tensor& cos_t, Tensor& sin_t) {
  Tensor c = Tensor::empty({L, kRotary}, DType::F32), s = Tensor::empty({L, kRotary}, DType::F32);
  for (int64_t r = 0; r < L; ++r) {
    const float pos[3] = {float(r / 900), float((r / 30) % 30), float(r % 30)};
    for (int a = 0; a < 3; ++a)
      for (int k = 0; k < 16; ++k) {
        const float th = pos[a] * std::pow(10000.f, -float(k) / 16.f);
        for (int dup = 0; dup < 2; ++dup) {
          c.ptr<float>()[r * kRotary + dup * 48 + a * 16 + k] = std::cos(th);
          s.ptr<float>()[r * kRotary + dup * 48 + a * 16 + k] = std::sin(th);
        }
      }
  }
  cos_t = be.upload(c, DType::BF16);
  sin_t = be.upload(s, DType::BF16);
}

struct Block {
  Tensor norm1, norm2, wqkv, wout, w1, w2, qn, kn, table, idx, cos, sin;
  Tensor x, h, qkv, attn, o, u, a, f;
  AttentionSpec spec;

  Block(Backend& be, int64_t L) {
    uint64_t seed = 1;
    norm1 = random_tensor(be, {kHidden}, DType::BF16, seed++, 0.1f);
    norm2 = random_tensor(be, {kHidden}, DType::BF16, seed++, 0.1f);
    wqkv = random_tensor(be, {3 * kInner, kHidden}, DType::BF16, seed++, 0.02f);
    wout = random_tensor(be, {kHidden, kInner}, DType::BF16, seed++, 0.02f);
    w1 = random_tensor(be, {2 * kFfn, kHidden}, DType::BF16, seed++, 0.02f);
    w2 = random_tensor(be, {kHidden, kFfn}, DType::BF16, seed++, 0.02f);
    qn = random_tensor(be, {kHeadDim}, DType::BF16, seed++, 0.1f);
    kn = random_tensor(be, {kHeadDim}, DType::BF16, seed++, 0.1f);
    table = random_tensor(be, {kTableRows, kParams, kHidden}, DType::BF16, seed++, 0.1f);
    Tensor ih = Tensor::empty({L}, DType::I32);
    for (int64_t r = 0; r < L; ++r) ih.ptr<int32_t>()[r] = r < 36 ? 1 : (r < 36 + 2 * (L / 50) ? 5 : 0);
    idx = be.upload(ih, DType::I32);
    rope_tables(be, L, cos, sin);
    x = random_tensor(be, {L, kHidden}, DType::BF16, seed++, 1.f);
    h = be.empty({L, kHidden}, DType::BF16);
    qkv = be.empty({L, 3 * kInner}, DType::BF16);
    attn = be.empty({L, kInner}, DType::BF16);
    o = be.empty({L, kHidden}, DType::BF16);
    u = be.empty({L, 2 * kFfn}, DType::BF16);
    a = be.empty({L, kFfn}, DType::BF16);
    f = be.empty({L, kHidden}, DType::BF16);
    spec.heads_q = spec.heads_kv = kHeads;
    spec.head_dim = kHeadDim;
    spec.scale = 1.f / std::sqrt(float(kHeadDim));
    spec.qk_norm = true;
    spec.qk_norm_eps = 1e-5f;
    spec.q_norm_weight = &qn;
    spec.k_norm_weight = &kn;
    spec.rotary_dim = kRotary;
    spec.cos = &cos;
    spec.sin = &sin;
  }

  // One block of dit.md §5.6 as Dit::step runs it from the second block on: the block's norm1 modulation was fused
  // into the previous block's last gated residual, so the block is the 8 ops below, its last one modulating for
  // the next block (here: this block's table again). `prepare` runs the first block's plain norm1 modulation.
  // Calls after(i) after the i-th op (0-based) so the caller can record an event.
  void prepare(Backend& be) { be.rms_norm_modulate(x, norm1, 1e-5f, table, 0, 1, idx, h); }
  template <typename After>
  void run(Backend& be, After after) {
    be.linear(h, wqkv, nullptr, qkv);
    after(0);
    be.self_attention(qkv, spec, attn);
    after(1);
    be.linear(attn, wout, nullptr, o);
    after(2);
    be.gated_residual_modulate(x, o, table, 2, idx, norm2, 1e-5f, table, 3, 4, idx, h);
    after(3);
    be.linear(h, w1, nullptr, u);
    after(4);
    be.swiglu(u, /*value_first=*/true, a);
    after(5);
    be.linear(a, w2, nullptr, f);
    after(6);
    be.gated_residual_modulate(x, f, table, 5, idx, norm1, 1e-5f, table, 0, 1, idx, h);
    after(7);
  }
};

constexpr int kOps = 8;
const char* kOpNames[kOps] = {"qkv GEMM", "attention", "out GEMM", "res1+mod2", "fc1 GEMM", "swiglu", "fc2 GEMM",
                              "res2+mod1"};
const bool kIsGemm[kOps] = {true, false, true, false, true, false, true, false};
constexpr int kAttentionOp = 1;
const double kGemmFlopPerRow[kOps] = {2.0 * kHidden * 3 * kInner, 0, 2.0 * kInner * kHidden, 0,
                                      2.0 * kHidden * 2 * kFfn,   0, 2.0 * kFfn * kHidden,   0};

// layout: "packed" (the default: q, k, v read in place in the qkv rows) or "head-major"
// (H3_ATTENTION_LAYOUT=head-major: read from head-major copies). impl "cudnn": H3_DISABLE_HOPPER_ATTENTION=1.
std::unique_ptr<Backend> backend_with_layout(const char* layout, const char* impl = "hopper") {
  std::optional<ScopedEnv> head_major, cudnn;
  if (std::strcmp(layout, "head-major") == 0) head_major.emplace("H3_ATTENTION_LAYOUT", "head-major");
  if (std::strcmp(impl, "cudnn") == 0) cudnn.emplace("H3_DISABLE_HOPPER_ATTENTION", "1");
  return make_cuda_backend();
}

void time_block(int64_t L, int reps, int warmup, const char* impl) {
  const char* layout = "packed";
  auto be = backend_with_layout(layout, impl);
  Block blk(*be, L);
  cudaStream_t s = cuda_stream(*be);
  Events ev(kOps + 1);
  blk.prepare(*be);
  for (int i = 0; i < warmup; ++i) blk.run(*be, [](int) {});
  be->synchronize();
  std::vector<std::vector<double>> op_ms(kOps);
  std::vector<double> total, gemm, attn, other;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(ev.ev[0], s));
    blk.run(*be, [&](int i) { CK(cudaEventRecord(ev.ev[i + 1], s)); });
    be->synchronize();
    double g = 0, at = 0, ot = 0;
    for (int i = 0; i < kOps; ++i) {
      const double t = ev.ms(i, i + 1);
      op_ms[i].push_back(t);
      (kIsGemm[i] ? g : i == kAttentionOp ? at : ot) += t;
    }
    total.push_back(ev.ms(0, kOps));
    gemm.push_back(g);
    attn.push_back(at);
    other.push_back(ot);
  }
  const double lin_flop = kLinearFlopPerRow * L, att_flop = kAttentionFlopPerRow2 * double(L) * L;
  const double tt = median(total), tg = median(gemm), ta = median(attn), to = median(other);
  std::printf("\n== one DiT block, L = %lld rows (attention: %s on %s q|k|v) ==\n", (long long)L,
              cuda_last_attention_path(*be).c_str(), layout);
  for (int i = 0; i < kOps; ++i) {
    const double t = median(op_ms[i]);
    if (kIsGemm[i])
      std::printf("  %-12s %9.3f ms  %6.1f TFLOP/s\n", kOpNames[i], t, kGemmFlopPerRow[i] * L / (t * 1e9));
    else if (i == kAttentionOp)
      std::printf("  %-12s %9.3f ms  %6.1f TFLOP/s (incl. q/k norm + rope)\n", kOpNames[i], t, att_flop / (t * 1e9));
    else
      std::printf("  %-12s %9.3f ms\n", kOpNames[i], t);
  }
  std::printf("  GEMMs        %9.3f ms  %6.1f TFLOP/s\n", tg, lin_flop / (tg * 1e9));
  std::printf("  attention    %9.3f ms  %6.1f TFLOP/s\n", ta, att_flop / (ta * 1e9));
  std::printf("  other        %9.3f ms\n", to);
  std::printf("  block        %9.3f ms  %6.1f TFLOP/s   x%d blocks: %.3f s\n", tt, (lin_flop + att_flop) / (tt * 1e9),
              kBlocks, tt * kBlocks / 1e3);
  // Sustained load lowers the clocks: the first five runs against the last five.
  if (reps >= 10)
    std::printf("  block, runs 1-5: %.3f ms, last 5: %.3f ms\n",
                median(std::vector<double>(total.begin(), total.begin() + 5)),
                median(std::vector<double>(total.end() - 5, total.end())));
  const auto mem = cuda_memory_stats(*be);
  std::printf("  device memory in use %.2f GB (peak %.2f GB)\n", mem.in_use_bytes / 1e9, mem.peak_in_use_bytes / 1e9);
  std::printf(
      "JSON {\"bench\":\"block\",\"impl\":\"%s\",\"layout\":\"%s\",\"L\":%lld,\"block_ms\":%.4f,\"gemm_ms\":%.4f,\"attention_ms\":%.4f,\"other_ms\":%.4f,"
      "\"gemm_tflops\":%.1f,\"attention_tflops\":%.1f,\"x50_s\":%.4f,\"attention_path\":\"%s\"}\n",
      impl, layout, (long long)L, tt, tg, ta, to, lin_flop / (tg * 1e9), att_flop / (ta * 1e9), tt * kBlocks / 1e3,
      cuda_last_attention_path(*be).c_str());
}

// Attention alone through one implementation, selected by environment while the backend makes its plans (the
// first call): the whole op (q/k norm + rope + SDPA) and, on the same buffers, SDPA without norm and rope; their
// difference is the fused q/k kernel.
// FP8 attention's forms (self_attention_in_fp8, our kernel kernels_attention_fp8_sm90.cu, quantization included):
// "fp8" as configured (cuda_kernels.h's Fp8AttentionSchedule defaults), then any of these suffixes: "-poly4", 4 of
// 16 key chunks' exp2 by polynomial (H3_FP8_ATTENTION_POLY_CHUNKS=4); "-s3", a ring of 3 stages
// (H3_FP8_ATTENTION_STAGES=3); "-tile", the tile accumulator (H3_FP8_ATTENTION_TILE_ACCUMULATOR=1); "-sumN", N key
// tiles per tensor-core sum (H3_FP8_ATTENTION_TENSOR_SUM_TILES=N); "-k128", 128-key tiles
// (H3_FP8_ATTENTION_KEY_TILE=128: -poly4, -s3 and -tile are that kernel's).
bool fp8_form(const char* form) { return std::strncmp(form, "fp8", 3) == 0; }

void time_attention_form(int64_t L, const char* form, const char* layout, int reps) {
  const bool flash = std::strcmp(form, "flash") == 0, hopper176 = std::strcmp(form, "hopper176") == 0;
  const bool fp8 = fp8_form(form), hopper = hopper176 || fp8 || std::strcmp(form, "hopper") == 0;
  // The switches stay set until the first call below has made its plans (an exception unsets them too).
  std::optional<ScopedEnv> implementation, key_tile, fp8_key_tile, exp2_split, stages, accumulator, sum_tiles;
  if (!hopper) implementation.emplace(flash ? "H3_DISABLE_CUDNN_ATTENTION" : "H3_CUDNN_SDPA", flash ? "1" : form);
  if (hopper176) key_tile.emplace("H3_HOPPER_KEY_TILE", "176");
  if (fp8 && std::strstr(form, "-k128")) fp8_key_tile.emplace("H3_FP8_ATTENTION_KEY_TILE", "128");
  if (fp8 && std::strstr(form, "-poly4")) exp2_split.emplace("H3_FP8_ATTENTION_POLY_CHUNKS", "4");
  if (const char* n = fp8 ? std::strstr(form, "-sum") : nullptr)
    sum_tiles.emplace("H3_FP8_ATTENTION_TENSOR_SUM_TILES", std::string(n + 4, n + 5).c_str());
  if (fp8 && std::strstr(form, "-s3")) stages.emplace("H3_FP8_ATTENTION_STAGES", "3");
  if (fp8 && std::strstr(form, "-tile")) accumulator.emplace("H3_FP8_ATTENTION_TILE_ACCUMULATOR", "1");
  auto be = backend_with_layout(layout, hopper ? "hopper" : "cudnn");
  Tensor qn = random_tensor(*be, {kHeadDim}, DType::BF16, 11, 0.1f), kn = random_tensor(*be, {kHeadDim}, DType::BF16, 12, 0.1f);
  Tensor cos, sin;
  rope_tables(*be, L, cos, sin);
  Tensor qkv = random_tensor(*be, {L, 3 * kInner}, DType::BF16, 13, 1.f), out = be->empty({L, kInner}, DType::BF16);
  AttentionSpec spec;
  spec.heads_q = spec.heads_kv = kHeads;
  spec.head_dim = kHeadDim;
  spec.scale = 1.f / std::sqrt(float(kHeadDim));
  spec.qk_norm = true;
  spec.q_norm_weight = &qn;
  spec.k_norm_weight = &kn;
  spec.rotary_dim = kRotary;
  spec.cos = &cos;
  spec.sin = &sin;
  AttentionSpec bare = spec;
  bare.qk_norm = false;
  bare.rotary_dim = 0;
  bare.cos = bare.sin = nullptr;
  const auto attend = [&](const AttentionSpec& sp) {
    fp8 ? be->self_attention_in_fp8(qkv, sp, out) : be->self_attention(qkv, sp, out);
  };
  attend(spec);  // plans made (and timed) here, under the environment above
  be->synchronize();
  implementation.reset();
  key_tile.reset();
  fp8_key_tile.reset();
  exp2_split.reset();
  stages.reset();
  accumulator.reset();
  sum_tiles.reset();
  const std::string path = cuda_last_attention_path(*be);
  cudaStream_t s = cuda_stream(*be);
  Events ev(2);
  auto timed = [&](const AttentionSpec& sp) {
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      CK(cudaEventRecord(ev.ev[0], s));
      attend(sp);
      CK(cudaEventRecord(ev.ev[1], s));
      be->synchronize();
      t.push_back(ev.ms(0, 1));
    }
    return median(t);
  };
  const double full = timed(spec), sdpa = timed(bare), flop = kAttentionFlopPerRow2 * double(L) * L;
  std::printf("  attention L=%-6lld %-9s %-10s via %-16s op %9.3f ms (%6.1f TFLOP/s)   SDPA alone %9.3f ms "
              "(%6.1f TFLOP/s)   q/k prep %6.3f ms\n",
              (long long)L, form, layout, path.c_str(), full, flop / (full * 1e9), sdpa, flop / (sdpa * 1e9),
              full - sdpa);
  std::printf("JSON {\"bench\":\"attention\",\"L\":%lld,\"form\":\"%s\",\"layout\":\"%s\",\"path\":\"%s\","
              "\"op_ms\":%.4f,\"sdpa_ms\":%.4f,\"sdpa_tflops\":%.1f}\n",
              (long long)L, form, layout, path.c_str(), full, sdpa, flop / (sdpa * 1e9));
}

void ceilings(int reps) {
  auto be = make_cuda_backend();
  cudaStream_t s = cuda_stream(*be);
  Events ev(2);
  {
    const int64_t n = 8192;
    Tensor x = random_tensor(*be, {n, n}, DType::BF16, 21, 1.f), w = random_tensor(*be, {n, n}, DType::BF16, 22, 0.02f);
    Tensor y = be->empty({n, n}, DType::BF16);
    for (int i = 0; i < 3; ++i) be->linear(x, w, nullptr, y);
    be->synchronize();
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      CK(cudaEventRecord(ev.ev[0], s));
      be->linear(x, w, nullptr, y);
      CK(cudaEventRecord(ev.ev[1], s));
      be->synchronize();
      t.push_back(ev.ms(0, 1));
    }
    const double m = median(t);
    std::printf("  ceiling: bf16 GEMM 8192^3 (random data)  %8.3f ms  %6.1f TFLOP/s\n", m, 2.0 * n * n * n / (m * 1e9));
    std::printf("JSON {\"bench\":\"gemm8192\",\"ms\":%.4f,\"tflops\":%.1f}\n", m, 2.0 * n * n * n / (m * 1e9));
  }
  {
    const int64_t n = int64_t(1) << 30;  // 2 GiB of bf16
    Tensor a = random_tensor(*be, {n}, DType::BF16, 23, 1.f), b = be->empty({n}, DType::BF16);
    be->convert(a, b);
    be->synchronize();
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      CK(cudaEventRecord(ev.ev[0], s));
      be->convert(a, b);
      CK(cudaEventRecord(ev.ev[1], s));
      be->synchronize();
      t.push_back(ev.ms(0, 1));
    }
    const double m = median(t), bytes = 2.0 * n * 2;
    std::printf("  ceiling: device-to-device copy 2 GiB     %8.3f ms  %6.2f TB/s (read + write)\n", m, bytes / (m * 1e9));
    std::printf("JSON {\"bench\":\"copy\",\"ms\":%.4f,\"tbps\":%.3f}\n", m, bytes / (m * 1e9));
  }
}

std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> v;
  for (const char* p = s; *p;) {
    v.push_back(std::strtoll(p, const_cast<char**>(&p), 10));
    if (*p == ',') ++p;
  }
  return v;
}

// "a,b,c" → {"a", "b", "c"}; "" → {}.
std::vector<std::string> split_list(std::string list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    const size_t c = list.find(',');
    out.push_back(list.substr(0, c));
    list = c == std::string::npos ? "" : list.substr(c + 1);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> rows{1902, 15435, 37746};
  int reps = 20, warmup = 2;
  bool do_ceilings = true, do_forms = true, head_major = false, do_flash = true, fp8_attention = false;
  std::vector<std::string> fp8_forms;  // --fp8-forms
  std::vector<std::string> impls{"hopper", "cudnn"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rows" && i + 1 < argc) rows = parse_list(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--warmup" && i + 1 < argc) warmup = std::max(0, std::atoi(argv[++i]));
    else if (a == "--no-ceilings") do_ceilings = false;
    else if (a == "--no-attention-forms") do_forms = false;
    else if (a == "--head-major") head_major = true;
    else if (a == "--no-flash") do_flash = false;
    else if (a == "--fp8-attention") fp8_attention = true;
    else if (a == "--fp8-forms" && i + 1 < argc) {
      fp8_attention = true;
      do_ceilings = false;
      impls.clear();
      for (const std::string& f : split_list(argv[++i])) {
        if (!fp8_form(f.c_str())) {
          std::fprintf(stderr,
                       "bench_cuda_block: --fp8-forms takes FP8 forms (fp8, then -sumN, -k128, and with -k128 -poly4, "
                       "-s3, -tile), got %s\n",
                       f.c_str());
          return 2;
        }
        fp8_forms.push_back(f);
      }
    }
    else if (a == "--impls" && i + 1 < argc) {
      impls = split_list(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--rows L,L,...] [--reps N] [--warmup N] [--impls hopper,cudnn] [--head-major] "
                   "[--no-flash] [--no-ceilings] [--no-attention-forms] [--fp8-attention] [--fp8-forms F,F,...]\n",
                   argv[0]);
      return 2;
    }
  }
  try {
    if (!cuda_backend_available()) {
      std::puts("bench_cuda_block: no CUDA device");
      return 0;
    }
    {
      auto be = make_cuda_backend();
      std::printf("device: %s\n", cuda_backend_summary(*be).c_str());
    }
    if (do_ceilings) ceilings(10);
    for (int64_t L : rows)
      for (const std::string& impl : impls) time_block(L, reps, warmup, impl.c_str());
    if (do_forms) {
      std::printf("\n== attention alone, by implementation ==\n");
      std::vector<std::pair<const char*, const char*>> forms{
          {"hopper", "packed"}, {"hopper176", "packed"}, {"unified", "packed"}, {"composite", "packed"}};
      if (!fp8_forms.empty()) {
        forms.clear();
        for (const std::string& f : fp8_forms) forms.emplace_back(f.c_str(), "packed");
      } else if (fp8_attention) {
        forms = {{"hopper", "packed"}};
        for (const char* f : {"fp8", "fp8-sum2", "fp8-sum1", "fp8-k128-sum2", "fp8-k128-sum4", "fp8-k128-tile",
                              "fp8-k128-poly4", "fp8-k128-tile-poly4", "fp8-k128-s3"})
          forms.emplace_back(f, "packed");
      }
      if (head_major)
        for (const char* f : {"hopper", "unified", "composite"}) forms.emplace_back(f, "head-major");
      if (do_flash && !fp8_attention) forms.emplace_back("flash", "packed");
      for (int64_t L : rows)
        for (auto [form, layout] : forms) {
          try {
            time_attention_form(L, form, layout, 5);
          } catch (const Error& e) {
            std::printf("  attention L=%lld %s %s: %s\n", (long long)L, form, layout, e.what());
          }
        }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_cuda_block: %s\n", e.what());
    return 1;
  }
  return 0;
}
#endif
