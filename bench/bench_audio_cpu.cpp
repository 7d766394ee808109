// CPU decode time of the FULL-size audio VAE decoder (release config: decoder_dim 1024, rates 5,5,2,2,2,2,2,
// resblocks 3/7/11 × dilations 1,3,5) on random weights written to a scratch folder (not committed), plus the two
// hot ops alone at the stage-1 shape.
//
//   bench_audio_cpu [--latents A (207 = 124 frames)] [--device cpu|cuda|auto] [--repeat N] [--dir SCRATCH]
//
// Threads: H3_THREADS. The slow exact convolution twin: H3_DISABLE_FAST_CONV=1.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

#include "backend/backend.h"
#include "models/audio_vae/audio_vae_blocks.h"
#include "models/audio_vae/audio_vae_decoder.h"
#include "models/audio_vae/audio_vae_random.h"
#include "util/thread_pool.h"

using namespace h3;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
// CPU seconds of the whole process (all threads): on a shared machine the load-independent measure.
double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

Tensor randn(Shape s, uint64_t seed, float scale = 1.f) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> n(0.f, scale);
  Tensor t = Tensor::empty(std::move(s), DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = n(g);
  return t;
}

// Multiply-add FLOPs (2 per MAC) of the decoder's convolutions and FIR filters for B channels of A latents.
double decoder_flops(const AudioVaeConfig& c, int64_t B, int64_t A) {
  double f = 2.0 * c.latent_dim * c.latent_channels * A + 2.0 * c.decoder_dim * c.latent_dim * 7 * A;
  int64_t ch = c.decoder_dim, T = A;
  const double fir_per_sample = 2.0 * (kAaFilterTaps + kAaFilterTaps);  // up (2 outputs × K/2) + down (K taps)
  for (size_t i = 0; i < c.decoder_rates.size(); ++i) {
    const int64_t co = ch / 2;
    f += 2.0 * ch * co * c.decoder_kernel_sizes[i] * T;  // transposed conv: every input sample × every tap
    T *= c.decoder_rates[i];
    for (size_t j = 0; j < c.resblock_kernel_sizes.size(); ++j)
      for (size_t m = 0; m < c.resblock_dilation_sizes[j].size(); ++m)
        f += 2 * (2.0 * co * co * c.resblock_kernel_sizes[j] * T + fir_per_sample * co * T);
    ch = co;
  }
  f += fir_per_sample * ch * T + 2.0 * ch * 7 * T;
  return f * B;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t A = 207;
  int repeat = 1;
  std::string device = "cpu", dir = (std::filesystem::temp_directory_path() / "h3_bench_audio_vae").string();
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--latents") A = std::stoll(argv[i + 1]);
    else if (a == "--device") device = argv[i + 1];
    else if (a == "--repeat") repeat = std::stoi(argv[i + 1]);
    else if (a == "--dir") dir = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  try {
    AudioVaeConfig c;  // release defaults
    c.latents_mean.assign(c.latent_channels, 0.0);
    c.latents_std.assign(c.latent_channels, 1.0);
    double t0 = now();
    if (!std::filesystem::exists(std::filesystem::path(dir) / "model.safetensors"))
      write_random_audio_vae(dir, c, 2024, /*with_encoder=*/false);
    auto be = make_backend(device);
    double t1 = now();
    auto dec = AudioVaeDecoder::load(*be, audio_vae_component_at(dir));
    double t2 = now();
    std::printf("audio VAE decoder, release size, random weights (%s); backend %s, %d threads\n", dir.c_str(),
                be->name().c_str(), thread_count());
    std::printf("  checkpoint ready %.2f s, load + fold + upload %.2f s\n", t1 - t0, t2 - t1);

    const Tensor latents = randn({2, c.latent_channels, A}, 7);
    const double flops = decoder_flops(c, 2, A);
    for (int r = 0; r < repeat; ++r) {
      const double s = now(), cs = cpu_now();
      const Tensor audio = dec->decode(latents);
      const double e = now() - s, ce = cpu_now() - cs;
      std::printf("  decode 2 x %lld latents -> 2 x %lld samples: %.2f s wall, %.2f s CPU (%.1f GFLOP; %.1f GFLOP/s wall, "
                  "%.1f GFLOP per CPU-second; %.2fx real time)\n",
                  static_cast<long long>(A), static_cast<long long>(audio.dim(1)), e, ce, flops * 1e-9,
                  flops * 1e-9 / e, flops * 1e-9 / ce, (double(audio.dim(1)) / c.sampling_rate) / e);
    }

    // The hot ops alone at the stage-1 shape (256 channels, 25·A samples per channel, batch 2).
    const int64_t C = 256, T = 25 * A, k = 11, d = 5;
    Tensor x = be->upload(randn({2, C, T}, 1), DType::F32), w = be->upload(randn({C, C, k}, 2, 0.02f), DType::F32);
    Tensor b = be->upload(randn({C}, 3), DType::F32), y = be->empty({2, C, T}, DType::F32);
    double s = now(), cs = cpu_now();
    be->conv1d(x, w, &b, 1, d * (k - 1) / 2, d, y);
    be->synchronize();
    double e = now() - s, ce = cpu_now() - cs;
    std::printf("  conv1d [2, %lld, %lld] k%lld d%lld: %.3f s wall, %.3f s CPU, %.1f GFLOP per CPU-second\n",
                static_cast<long long>(C), static_cast<long long>(T), static_cast<long long>(k),
                static_cast<long long>(d), e, ce, 2.0 * 2 * C * C * k * T / ce * 1e-9);
    const std::vector<float> hv = aa_activation_filter();
    Tensor h = be->upload(Tensor::from_f32({kAaFilterTaps}, hv), DType::F32);
    Tensor la = be->upload(randn({C}, 4, 0.3f), DType::F32), lb = be->upload(randn({C}, 5, 0.3f), DType::F32);
    s = now(), cs = cpu_now();
    be->snake_beta_aa(x, la, lb, h, h, y);
    be->synchronize();
    e = now() - s, ce = cpu_now() - cs;
    std::printf("  snake_beta_aa [2, %lld, %lld]: %.3f s wall, %.3f s CPU, %.1f Msamples per CPU-second\n",
                static_cast<long long>(C), static_cast<long long>(T), e, ce, 2.0 * C * T / ce * 1e-6);
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_audio_cpu: %s\n", e.what());
    return 1;
  }
  return 0;
}
