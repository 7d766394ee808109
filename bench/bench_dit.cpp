// Times one full MiniMax-H3 DiT forward (50 blocks, released config) on the CUDA backend with random weights made
// on the device (no checkpoint file): random_dit (models/dit/dit_random.h). The AdaLN projection weights
// (39% of the parameters) are one shared host tensor streamed through the backend while begin_request precomputes
// the AdaLN tables, so they are never resident; each timed forward is one Dit::step (input projections, 50 blocks,
// output norm and heads, host transfers included), median of --reps after a warm-up, CUDA events.
//
// Shapes (W x H x frames) follow ../shared/bench/peer_dit.py's layout: 36 text rows, then audio rows (2 per
// 1/40 s, timestep index 1), then the video latent grid (timestep index 0); timesteps {0.3, 0.5}.
//
// --zero-vectors: every 1-D weight zero, the initialization peer_dit.py gives the reference (random otherwise).
// --precision fp8 (issue 18): also builds the FP8 transformer(s) from the same random weights (--fp8-scaling
// channel, block or both; given twice, both) and, per shape, times each beside bf16 twice — its activations
// quantized by their producers ("fused") and by a separate pass (H3_DISABLE_FP8_FUSED_QUANT's twin, "unfused";
// --fp8-fused on|off|both, default both) — and prints its velocity cosine and relative L2 per modality against the
// bf16 forward, whether the fused and unfused forwards agree bit for bit, and the resident bytes of each.
// --fp8-attention adds, for each scaling, the same FP8 transformer with its main blocks' attention computed in FP8
// too (Backend::self_attention_in_fp8, our Hopper kernel; "fp8-channel+attn"), timed and compared the same way (one
// more model of FP8 blocks resident: with --fp8-scaling channel the three fit an H200 at 1344x768x124). With
// H3_CUDA_PROFILE=1 every timed forward also prints its device time per op.
//
// --streaming host --slots N: after the resident runs, the same DiT with its blocks streamed from pinned host copies
// through N device slots (models/block_streamer.h): forward time as a ratio to the resident one, the bytes copied per
// pass, the measured host-to-device bandwidth and the floor it sets (bytes / bandwidth), and the copy time compute
// waited for. (The Disk source needs a checkpoint file, which a random DiT has not: it is measured in
// tests/test_dit_streaming_cuda.cpp.)
//
// --vsa S1,S2,... (issue 23, FastH3): the DiT is made with random to_gate_compress weights (FastH3's student) and,
// per shape, after the dense forward, the same forward with VSA-H3 at each sparsity (tile --vsa-tile, 64 = the
// student's trained contract; exempt; the gated pooled branch, or none with --vsa-pure), its time as a ratio to
// the dense one and its velocity cosine / relative L2 against it. TFLOP/s counts the dense attention's FLOPs.
//
// --gpus N (issue 21): after the resident runs, the same DiT on GPUs 0..N-1 with Ulysses sequence parallelism
// (parallel/dit_group.h: rows sharded, all-to-all around attention over NCCL, one thread per GPU); per shape its
// forward time (host clock around a step, which ends with the download), the speedup over one GPU and the
// velocity's cosine and relative L2 against the one-GPU forward. --gpus 1 runs the parallel code on one rank (NCCL
// of size 1: its extra copies' cost).
//
//   bench_dit [--shapes 512x512x22,864x480x124,1344x768x124] [--reps 3] [--layers 50] [--zero-vectors]
//             [--precision bf16|fp8] [--fp8-scaling channel|block|both] [--fp8-fused on|off|both] [--fp8-attention]
//             [--streaming host --slots 2] [--vsa 0.9,0.0 [--vsa-tile 64] [--vsa-pure]] [--gpus N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifndef H3_HAVE_CUDA
int main() {
  std::puts("bench_dit: this build has no CUDA backend");
  return 0;
}
#else
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "models/block_streamer.h"
#include "models/dit/dit.h"
#include "models/dit/dit_random.h"
#include "models/dit/dit_sparse_attention.h"
#include "parallel/dit_group.h"
#include "parallel/rank_group.h"
#include "parallel/sequence_parallel.h"
#include "util/error.h"

using namespace h3;

namespace {

constexpr int64_t kTextRows = 36;
constexpr double kLinearFlopPerRow = 38'535'168'000.0, kAttentionFlopPerRow2 = 1'433'600.0;  // dit.md §8, 50 blocks
#define CK(call) H3_CHECK((call) == cudaSuccess, #call, ": ", cudaGetErrorString(cudaGetLastError()))

struct Shape3 {
  int w, h, frames;
};

// Row counts as peer_dit.py computes them: frames rounded to 17n+5, 5n+2 latent frames, 2 audio rows per 1/40 s.
struct Rows {
  int64_t text, audio, vf, vh, vw;
  int64_t video() const { return vf * vh * vw; }
  int64_t total() const { return text + audio + video(); }
};
Rows rows_for(const Shape3& s) {
  const int64_t n = std::max<int64_t>(0, (s.frames - 5 + 16) / 17);
  const int64_t frames = 17 * n + 5;
  const int64_t audio = 2 * static_cast<int64_t>(std::ceil(double(frames) / 24.0 * 32000.0 / 800.0));
  return Rows{kTextRows, audio, 5 * n + 2, s.h / 32, s.w / 32};
}

// The packed layout and random inputs of shape s.
struct BenchCase {
  DitLayout layout;
  std::vector<int64_t> tidx;
  Tensor text, video, audio;
};
BenchCase bench_case(const DitConfig& c, const Shape3& s) {
  const Rows r = rows_for(s);
  const int64_t L = r.total();
  DitLayout layout;
  layout.token_tags.assign(L, kDitTagVideo);
  std::vector<int64_t> tidx(L, 0);
  layout.position_ids = Tensor::empty({L, 3}, DType::F32);
  float* pos = layout.position_ids.ptr<float>();
  std::fill(pos, pos + 3 * L, 0.f);
  for (int64_t i = 0; i < r.text; ++i) {
    layout.text_indices.push_back(i);
    layout.token_tags[i] = kDitTagText;
    pos[3 * i] = float(i);
  }
  for (int64_t i = 0; i < r.audio; ++i) {
    const int64_t row = r.text + i;
    layout.audio_indices.push_back(row);
    layout.token_tags[row] = kDitTagAudio;
    tidx[row] = 1;
    pos[3 * row] = float(i);
  }
  for (int64_t f = 0, row = r.text + r.audio; f < r.vf; ++f)
    for (int64_t y = 0; y < r.vh; ++y)
      for (int64_t x = 0; x < r.vw; ++x, ++row) {
        layout.video_indices.push_back(row);
        pos[3 * row] = float(f);
        pos[3 * row + 1] = float(y);
        pos[3 * row + 2] = float(x);
      }
  std::mt19937 g(42);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto randn = [&](Shape sh) {
    Tensor t = Tensor::empty(std::move(sh), DType::F32);
    for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = nd(g);
    return t;
  };
  Tensor text = randn({r.text, c.text_dim}), video = randn({r.video(), c.patch_dim()}),
         audio = randn({r.audio, c.audio_in_channels});
  layout.target_video_grid = {r.vf, r.vh, r.vw};
  return {std::move(layout), std::move(tidx), std::move(text), std::move(video), std::move(audio)};
}

// Times the forward at shape s; returns the warm-up's output and stores the median seconds in *median.
DitOutput time_shape(Backend& be, Dit& dit, const Shape3& s, int reps, bool zero_vectors, const char* precision,
                     double* median, const DitRequestOptions& options = {}) {
  const DitConfig& c = dit.config();
  const Rows r = rows_for(s);
  const int64_t L = r.total();
  auto [layout, tidx, text, video, audio] = bench_case(c, s);
  dit.begin_request(layout, text, {0.3f, 0.5f}, options);

  cudaStream_t st = cuda_stream(be);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  cuda_reset_peak_memory(be);
  DitOutput warm = dit.step(video, audio, tidx);  // warm-up: plans, algorithm choice, cached buffers
  int64_t bad = 0;
  for (int64_t i = 0; i < warm.sample.numel(); ++i) bad += !std::isfinite(warm.sample.ptr<float>()[i]);
  std::vector<double> t;
  be.op_profile_report();  // drops the warm-up's
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(e0, st));
    DitOutput o = dit.step(video, audio, tidx);
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms / 1e3);
  }
  dit.end_request();
  const std::string ops = be.op_profile_report();
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(t.begin(), t.end());
  const double med = t[t.size() / 2];
  const double layers = double(c.num_layers) / 50.0;
  const double flop = layers * (kLinearFlopPerRow * L + kAttentionFlopPerRow2 * double(L) * L);
  const auto mem = cuda_memory_stats(be);
  std::string all;
  for (double v : t) {
    if (!all.empty()) all += ',';
    all += std::to_string(v);
  }
  std::printf("  %4dx%-4dx%-4d L=%-6lld %-13s forward %8.4f s (min %.4f, max %.4f)  %6.1f TFLOP/s  peak %.1f GB  "
              "attention via %s%s\n",
              s.w, s.h, s.frames, (long long)L, precision, med, t.front(), t.back(), flop / med / 1e12,
              mem.peak_in_use_bytes / 1e9, cuda_last_attention_path(be).c_str(), bad ? "  NON-FINITE OUTPUT" : "");
  std::printf("JSON {\"bench\":\"dit\",\"shape\":\"%dx%dx%d\",\"L\":%lld,\"layers\":%lld,\"vectors\":\"%s\","
              "\"precision\":\"%s\",\"median_s\":%.5f,\"all_s\":[%s],\"tflops\":%.1f,\"peak_GB\":%.2f,"
              "\"non_finite\":%lld}\n",
              s.w, s.h, s.frames, (long long)L, (long long)c.num_layers, zero_vectors ? "zero" : "random", precision,
              med, all.c_str(), flop / med / 1e12, mem.peak_in_use_bytes / 1e9, (long long)bad);
  if (!ops.empty())
    std::printf("  device time per op over the %d timed %s forwards (H3_CUDA_PROFILE):\n%s", reps, precision,
                ops.c_str());
  *median = med;
  return warm;
}

void print_streaming(const Shape3& s, double streamed, double resident, int64_t slots, const BlockStreamingStats& st) {
  const double floor = st.copy_bandwidth() > 0 ? st.bytes / st.copy_bandwidth() : 0.0;
  std::printf("  %4dx%-4dx%-4d streamed (pinned host, %lld slots): forward %.4f s = %.3fx resident; %.2f GB copied "
              "per pass at %.1f GB/s H2D (floor %.4f s), compute waited %.4f s (overlap %.0f%%); ring %.2f GB, "
              "host copies %.2f GB\n",
              s.w, s.h, s.frames, (long long)slots, streamed, streamed / resident, st.bytes / 1e9,
              st.copy_bandwidth() / 1e9, floor, st.wait_seconds, 100.0 * st.overlap(), st.device_bytes / 1e9,
              st.host_bytes / 1e9);
  std::printf("JSON {\"bench\":\"dit_streaming\",\"shape\":\"%dx%dx%d\",\"source\":\"pinned_host\",\"slots\":%lld,"
              "\"median_s\":%.5f,\"resident_s\":%.5f,\"ratio\":%.4f,\"bytes_per_pass\":%llu,\"h2d_GBps\":%.2f,"
              "\"floor_s\":%.5f,\"wait_s\":%.5f,\"copy_s\":%.5f,\"ring_GB\":%.3f}\n",
              s.w, s.h, s.frames, (long long)slots, streamed, resident, streamed / resident,
              (unsigned long long)st.bytes, st.copy_bandwidth() / 1e9, floor, st.wait_seconds, st.copy_seconds,
              st.device_bytes / 1e9);
}

bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// One FP8 transformer of the bench: its name ("fp8-channel", "fp8-block") and the model.
struct Fp8Model {
  std::string name;
  std::unique_ptr<Dit> dit;
  bool failed = false;  // a forward threw (a product cuBLASLt refused): the model is not run again
};

// Times the sequence-parallel forward at shape s against the one-GPU output `ref` and time `one_s`.
void time_parallel(ParallelDit& dit, const Shape3& s, int reps, const DitOutput& ref, double one_s) {
  auto [layout, tidx, text, video, audio] = bench_case(dit.config(), s);
  dit.begin_request(layout, text, {0.3f, 0.5f});
  const DitOutput out = dit.step(video, audio, tidx);  // warm-up
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    dit.step(video, audio, tidx);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  dit.end_request();
  std::sort(t.begin(), t.end());
  const double med = t[t.size() / 2];
  const double cv = cosine(out.sample, ref.sample), ca = cosine(out.audio_sample, ref.audio_sample);
  const double dv = rel_l2(out.sample, ref.sample), da = rel_l2(out.audio_sample, ref.audio_sample);
  std::printf("  %4dx%-4dx%-4d %d GPUs: forward %.4f s = %.2fx one GPU (%.4f s); video cosine %.6f rel L2 %.5f, "
              "audio cosine %.6f rel L2 %.5f\n",
              s.w, s.h, s.frames, dit.ranks(), med, one_s / med, one_s, cv, dv, ca, da);
  std::printf("JSON {\"bench\":\"dit_gpus\",\"shape\":\"%dx%dx%d\",\"gpus\":%d,\"seconds\":%.5f,"
              "\"speedup\":%.4f,\"video_cosine\":%.6f,\"video_rel_l2\":%.6f,\"audio_cosine\":%.6f,"
              "\"audio_rel_l2\":%.6f}\n",
              s.w, s.h, s.frames, dit.ranks(), med, one_s / med, cv, dv, ca, da);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape3> shapes{{512, 512, 22}, {864, 480, 124}, {1344, 768, 124}};
  int reps = 3;
  int64_t layers = 50;
  RandomDitOptions weights;
  bool fp8 = false, fp8_attention = false;
  std::vector<Fp8Scaling> scalings;
  std::vector<bool> fused_modes{true, false};
  std::string streaming;
  int64_t slots = 2;
  int gpus = 0;  // 0: no sequence-parallel run
  std::vector<double> vsa_sparsities;
  int64_t vsa_tile = 64;
  bool vsa_pure = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--shapes" && i + 1 < argc) {
      shapes.clear();
      for (const char* p = argv[++i]; *p;) {
        Shape3 s{};
        if (std::sscanf(p, "%dx%dx%d", &s.w, &s.h, &s.frames) != 3) break;
        shapes.push_back(s);
        p = std::strchr(p, ',');
        if (!p) break;
        ++p;
      }
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--layers" && i + 1 < argc) {
      layers = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--zero-vectors") {
      weights.zero_vectors = true;
    } else if (a == "--precision" && i + 1 < argc && (std::strcmp(argv[i + 1], "bf16") == 0 ||
                                                      std::strcmp(argv[i + 1], "fp8") == 0)) {
      fp8 = std::strcmp(argv[++i], "fp8") == 0;
    } else if (a == "--fp8-scaling" && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v != "channel" && v != "block" && v != "both") {
        std::fprintf(stderr, "--fp8-scaling must be channel, block or both, got '%s'\n", v.c_str());
        return 2;
      }
      // Each scaling once, in the order asked (run.sh passes channel and --fp8-args may add block).
      const auto add = [&](Fp8Scaling sc) {
        if (std::find(scalings.begin(), scalings.end(), sc) == scalings.end()) scalings.push_back(sc);
      };
      if (v != "block") add(Fp8Scaling::Channel);
      if (v != "channel") add(Fp8Scaling::Block);
    } else if (a == "--fp8-fused" && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v != "on" && v != "off" && v != "both") {
        std::fprintf(stderr, "--fp8-fused must be on, off or both, got '%s'\n", v.c_str());
        return 2;
      }
      fused_modes.clear();
      if (v != "off") fused_modes.push_back(true);
      if (v != "on") fused_modes.push_back(false);
    } else if (a == "--fp8-attention") {
      fp8_attention = true;
    } else if (a == "--streaming" && i + 1 < argc) {
      streaming = argv[++i];
    } else if (a == "--slots" && i + 1 < argc) {
      slots = std::atoi(argv[++i]);
    } else if (a == "--gpus" && i + 1 < argc) {
      gpus = std::atoi(argv[++i]);
      if (gpus < 1) {
        std::fprintf(stderr, "--gpus takes a number of GPUs, at least 1, got '%s'\n", argv[i]);
        return 2;
      }
    } else if (a == "--vsa" && i + 1 < argc) {
      for (const char* p = argv[++i]; p; p = std::strchr(p, ',') ? std::strchr(p, ',') + 1 : nullptr)
        vsa_sparsities.push_back(std::atof(p));
    } else if (a == "--vsa-tile" && i + 1 < argc) {
      vsa_tile = std::atoi(argv[++i]);
    } else if (a == "--vsa-pure") {
      vsa_pure = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--shapes WxHxF,...] [--reps N] [--layers N] [--zero-vectors] [--precision bf16|fp8] "
                   "[--fp8-scaling channel|block|both] [--fp8-fused on|off|both] [--fp8-attention] "
                   "[--streaming host --slots N] [--vsa S,... [--vsa-tile 64|256] [--vsa-pure]] [--gpus N]\n",
                   argv[0]);
      return 2;
    }
  }
  if (!streaming.empty() && streaming != "host") {
    std::fprintf(stderr, "bench_dit: --streaming takes 'host' (pinned host copies); 'disk' needs a checkpoint file, "
                 "which the random DiT has not (the Disk source is measured in the CUDA tests)\n");
    return 2;
  }
  try {
    if (!cuda_backend_available()) {
      std::puts("bench_dit: no CUDA device");
      return 0;
    }
    auto be = make_cuda_backend();
    std::printf("device: %s\n", cuda_backend_summary(*be).c_str());
    DitConfig cfg;  // the released checkpoint's config (dit.md §2)
    cfg.num_layers = layers;
    for (const double sp : vsa_sparsities)
      H3_CHECK(sp >= 0.0 && sp < 1.0, "--vsa takes sparsities in [0, 1), got ", sp);
    if (!vsa_sparsities.empty()) vsa_tile_shape(vsa_tile);  // validates the tile size
    weights.gates = !vsa_sparsities.empty() && !vsa_pure;
    uint64_t resident = 0;
    auto dit = random_dit(*be, cfg, weights, &resident);
    if (weights.zero_vectors)
      std::printf("every 1-D weight is zero (--zero-vectors, the initialization peer_dit.py gives the reference)\n");
    be->synchronize();
    std::printf("DiT with %lld blocks: resident weights %.2f GB (AdaLN projections not resident; allocator holds "
                "%.2f GB)\n",
                (long long)layers, resident / 1e9, cuda_memory_stats(*be).in_use_bytes / 1e9);
    std::printf("JSON {\"bench\":\"dit_weights\",\"layers\":%lld,\"resident_GB\":%.3f}\n", (long long)layers,
                resident / 1e9);
    std::vector<Fp8Model> fp8_models;
    if (fp8) {
      if (const std::string why = be->fp8_unsupported_reason(); !why.empty()) throw Error(why + ".");
      if (scalings.empty()) scalings.push_back(Fp8Scaling::Channel);
      const std::string attention_why = fp8_attention ? be->fp8_attention_unsupported_reason() : std::string();
      if (!attention_why.empty()) std::printf("--fp8-attention: not measured (%s)\n", attention_why.c_str());
      std::vector<DitPrecision> precisions;
      for (Fp8Scaling sc : scalings) {
        precisions.push_back({true, sc, false});
        if (fp8_attention && attention_why.empty()) precisions.push_back({true, sc, true});
      }
      for (const DitPrecision& precision : precisions) {
        RandomDitOptions o = weights;  // the same seed: the same random weights, quantized
        o.precision = precision;
        Fp8Model m{std::string(precision.fp8_scaling == Fp8Scaling::Channel ? "fp8-channel" : "fp8-block") +
                       (precision.fp8_attention ? "+attn" : ""),
                   random_dit(*be, cfg, o)};
        be->synchronize();
        std::printf("%s DiT: resident weights %.2f GB vs bf16 %.2f GB (%.3f)\n", m.name.c_str(),
                    m.dit->resident_weight_bytes() / 1e9, dit->resident_weight_bytes() / 1e9,
                    double(m.dit->resident_weight_bytes()) / double(dit->resident_weight_bytes()));
        std::printf("JSON {\"bench\":\"dit_weights\",\"precision\":\"%s\",\"resident_GB\":%.3f,"
                    "\"bf16_resident_GB\":%.3f}\n",
                    m.name.c_str(), m.dit->resident_weight_bytes() / 1e9, dit->resident_weight_bytes() / 1e9);
        fp8_models.push_back(std::move(m));
      }
    }
    std::vector<double> resident_s;
    std::vector<DitOutput> resident_out;  // kept for --gpus
    for (const Shape3& s : shapes) {
      double bf16_s = 0;
      const DitOutput ref = time_shape(*be, *dit, s, reps, weights.zero_vectors, "bf16", &bf16_s);
      resident_s.push_back(bf16_s);
      if (gpus) resident_out.push_back(ref);
      for (const double sp : vsa_sparsities) {
        DitRequestOptions o;
        o.sparse_attention = DitRequestOptions::SparseAttention{};
        o.sparse_attention->tile_elems = vsa_tile;
        o.sparse_attention->vsa.sparsity = sp;
        const std::string label = cat("vsa-", vsa_pure ? "pure" : "gated", "-", sp);
        double vsa_s = 0;
        const DitOutput out = time_shape(*be, *dit, s, reps, weights.zero_vectors, label.c_str(), &vsa_s, o);
        const double cv = cosine(out.sample, ref.sample), dv = rel_l2(out.sample, ref.sample);
        std::printf("  %4dx%-4dx%-4d VSA-H3 tile %lld, sparsity %.2f, %s vs dense: time %.3fx (%.4f s vs %.4f s); "
                    "video cosine %.6f rel L2 %.4f\n",
                    s.w, s.h, s.frames, (long long)vsa_tile, sp, vsa_pure ? "pure" : "gated", vsa_s / bf16_s, vsa_s,
                    bf16_s, cv, dv);
        std::printf("JSON {\"bench\":\"dit_vsa\",\"shape\":\"%dx%dx%d\",\"tile\":%lld,\"sparsity\":%.3f,"
                    "\"gated\":%s,\"median_s\":%.5f,\"dense_s\":%.5f,\"time_ratio\":%.4f,\"video_cosine\":%.6f,"
                    "\"video_rel_l2\":%.5f}\n",
                    s.w, s.h, s.frames, (long long)vsa_tile, sp, vsa_pure ? "false" : "true", vsa_s, bf16_s,
                    vsa_s / bf16_s, cv, dv);
      }
      for (Fp8Model& m : fp8_models) {
        std::vector<DitOutput> outs;
        for (const bool fused : fused_modes) {
          if (m.failed) break;
          cuda_set_fp8_fused_quant(*be, fused);
          const std::string name = m.name + (fused ? "-fused" : "-unfused");
          double fp8_s = 0;
          try {
            outs.push_back(time_shape(*be, *m.dit, s, reps, weights.zero_vectors, name.c_str(), &fp8_s));
          } catch (const Error& e) {
            std::printf("  %4dx%-4dx%-4d %s: %s (not run again)\n", s.w, s.h, s.frames, name.c_str(), e.what());
            m.failed = true;
            break;
          }
          const DitOutput& out = outs.back();
          const double cv = cosine(out.sample, ref.sample), ca = cosine(out.audio_sample, ref.audio_sample);
          const double dv = rel_l2(out.sample, ref.sample), da = rel_l2(out.audio_sample, ref.audio_sample);
          std::printf("  %4dx%-4dx%-4d %s vs bf16: time %.3fx (%.4f s vs %.4f s); video cosine %.6f rel L2 %.4f, "
                      "audio cosine %.6f rel L2 %.4f\n",
                      s.w, s.h, s.frames, name.c_str(), fp8_s / bf16_s, fp8_s, bf16_s, cv, dv, ca, da);
          std::printf("JSON {\"bench\":\"dit_fp8\",\"shape\":\"%dx%dx%d\",\"precision\":\"%s\",\"fused_quant\":%s,"
                      "\"time_ratio\":%.4f,\"video_cosine\":%.6f,\"video_rel_l2\":%.5f,\"audio_cosine\":%.6f,"
                      "\"audio_rel_l2\":%.5f}\n",
                      s.w, s.h, s.frames, m.name.c_str(), fused ? "true" : "false", fp8_s / bf16_s, cv, dv, ca, da);
        }
        if (outs.size() == 2) {
          const bool same = bit_equal(outs[0].sample, outs[1].sample) && bit_equal(outs[0].audio_sample,
                                                                                   outs[1].audio_sample);
          std::printf("  %4dx%-4dx%-4d %s: fused and unfused forwards %s\n", s.w, s.h, s.frames, m.name.c_str(),
                      same ? "identical (bit for bit)" : "DIFFER (the twin is broken)");
        }
      }
      cuda_set_fp8_fused_quant(*be, true);
    }
    if (!streaming.empty()) {
      dit.reset();  // the resident blocks (and the FP8 models) go before the streamed copy is made
      fp8_models.clear();
      const BlockStreaming opt{BlockStreaming::Source::PinnedHost, slots, 1, false, nullptr};
      auto streamed = Dit::from_weights(*be, cfg, Layout::Diffusers, random_dit_weights(*be, cfg, weights), {}, opt);
      std::printf("streamed DiT: %.2f GB resident weights\n", streamed->resident_weight_bytes() / 1e9);
      for (size_t i = 0; i < shapes.size(); ++i) {
        double t = 0;
        time_shape(*be, *streamed, shapes[i], reps, weights.zero_vectors, "streamed", &t);
        print_streaming(shapes[i], t, resident_s[i], slots, *streamed->streaming_stats());
      }
    }
    if (gpus) {
      dit.reset();  // GPU 0 holds rank 0's copy of the weights instead
      fp8_models.clear();
      be.reset();
      if (const auto problem = sequence_parallel_problem(cat("--gpus ", gpus), cfg.num_attention_heads, gpus))
        throw Error(*problem + ".");
      std::vector<int> devices;
      for (int d = 0; d < gpus; ++d) devices.push_back(d);
      std::unique_ptr<RankGroup> group = RankGroup::cuda(devices);
      ParallelDit pdit(*group, [&](Backend& b, int) { return random_dit(b, cfg, weights); });
      std::printf("sequence-parallel DiT on %s\n", group->description().c_str());
      for (size_t i = 0; i < shapes.size(); ++i) time_parallel(pdit, shapes[i], reps, resident_out[i], resident_s[i]);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_dit: %s\n", e.what());
    return 1;
  }
  return 0;
}
#endif
