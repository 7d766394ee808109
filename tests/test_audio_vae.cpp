// The audio VAE decoder: parity with the reference (diffusers fixtures from tools/reference), a float64 replica on
// random tiny models (independent of the fixtures), weight-norm folding, the Kaiser-sinc filter, input checks,
// the manifest against a real checkpoint, and `h3 tool audio-decode`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "audio_vae_f64.h"
#include "unit_audio_vae_config.h"
#include "backend/backend.h"
#include "io/manifest.h"
#include "io/safetensors.h"
#include "models/audio_vae/audio_vae_blocks.h"
#include "models/audio_vae/audio_vae_decoder.h"
#include "models/audio_vae/audio_vae_random.h"
#include "tools/audio_decode_tool.h"
#include "util/mapped_file.h"

using namespace h3;
namespace fs = std::filesystem;

namespace {

// Release-shaped: an odd rate 5 with kernel 9, three AMP kernels 3/7/11 with dilations 1/3/5; hop 40.
AudioVaeConfig hop40_config() {
  AudioVaeConfig c = unit_audio_vae_config();
  c.encoder_rates = {2, 4, 5};
  c.decoder_dim = 32;
  c.decoder_rates = {5, 2, 2, 2};
  c.decoder_kernel_sizes = {9, 4, 4, 4};
  c.resblock_kernel_sizes = {3, 7, 11};
  c.resblock_dilation_sizes = {{1, 3, 5}, {1, 3, 5}, {1, 3, 5}};
  return c;
}

// A scratch folder removed at the end of the test.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& name)
      : path((fs::temp_directory_path() / ("h3_test_audio_vae_" + std::to_string(getpid()) + "_" + name)).string()) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::map<std::string, Tensor> by_name(const std::vector<NamedTensor>& ts) {
  std::map<std::string, Tensor> m;
  for (const NamedTensor& t : ts) m[t.name] = t.tensor;
  return m;
}

void write_model(const std::string& dir, const AudioVaeConfig& c, const std::vector<NamedTensor>& weights) {
  write_file_atomic(join_path(dir, "config.json"), audio_vae_config_json(c));
  write_safetensors(join_path(dir, "model.safetensors"), weights);
}

Tensor random_latents(int64_t B, int64_t C, int64_t A, uint64_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  Tensor t = Tensor::empty({B, C, A}, DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = n(g);
  return t;
}

// The decoder of spec §5/§6.1 in float64 from the checkpoint tensors (weight norm folded in float64).
std::vector<double> reference_decode(const AudioVaeConfig& c, const std::map<std::string, Tensor>& w,
                                     const Tensor& latents) {
  auto W = [&](const std::string& n) { return f64::values(w.at(n)); };
  auto wn = [&](const std::string& p) { return f64::weight_norm(W(p + ".weight_g"), W(p + ".weight_v")); };
  auto act = [&](const f64::Signal& x, const std::string& p) {
    return f64::snake_beta_aa(x, W(p + ".act.alpha"), W(p + ".act.beta"), W(p + ".upsample.filter"),
                              W(p + ".downsample.lowpass.filter"));
  };
  f64::Signal x = f64::signal(latents);
  for (int64_t b = 0; b < x.B; ++b)
    for (int64_t ch = 0; ch < x.C; ++ch)
      for (int64_t t = 0; t < x.T; ++t)
        x.at(b, ch, t) = x.at(b, ch, t) * float(c.latents_std[ch]) + float(c.latents_mean[ch]);
  x = f64::conv1d(x, W("dec_in_proj.weight"), c.latent_dim, 1, W("dec_in_proj.bias").data(), 1, 0, 1);
  x = f64::conv1d(x, wn("decoder.conv_pre"), c.decoder_dim, 7, W("decoder.conv_pre.bias").data(), 1, 3, 1);
  const size_t nk = c.resblock_kernel_sizes.size();
  int64_t ch = c.decoder_dim;
  for (size_t i = 0; i < c.decoder_rates.size(); ++i) {
    const int64_t co = ch / 2, u = c.decoder_rates[i], k = c.decoder_kernel_sizes[i];
    const std::string up = "decoder.ups." + std::to_string(i) + ".0";
    x = f64::conv_transpose1d(x, wn(up), co, k, W(up + ".bias").data(), u, (k - u) / 2);
    f64::Signal sum(x.B, x.C, x.T);
    for (size_t j = 0; j < nk; ++j) {
      const std::string r = "decoder.resblocks." + std::to_string(i * nk + j);
      const int64_t kr = c.resblock_kernel_sizes[j];
      f64::Signal h = x;
      for (size_t m = 0; m < c.resblock_dilation_sizes[j].size(); ++m) {
        const int64_t d = c.resblock_dilation_sizes[j][m];
        const std::string c1 = r + ".convs1." + std::to_string(m), c2 = r + ".convs2." + std::to_string(m);
        f64::Signal a = act(h, r + ".activations." + std::to_string(2 * m));
        a = f64::conv1d(a, wn(c1), co, kr, W(c1 + ".bias").data(), 1, d * (kr - 1) / 2, d);
        a = act(a, r + ".activations." + std::to_string(2 * m + 1));
        a = f64::conv1d(a, wn(c2), co, kr, W(c2 + ".bias").data(), 1, (kr - 1) / 2, 1);
        for (size_t e = 0; e < h.v.size(); ++e) h.v[e] += a.v[e];
      }
      for (size_t e = 0; e < h.v.size(); ++e) sum.v[e] += h.v[e];
    }
    for (double& v : sum.v) v /= double(nk);
    x = sum;
    ch = co;
  }
  x = act(x, "decoder.activation_post");
  x = f64::conv1d(x, wn("decoder.conv_post"), 1, 7, nullptr, 1, 3, 1);
  for (double& v : x.v) v = std::clamp(v, -1.0, 1.0);
  return x.v;
}

double rel_l2_f64(const Tensor& a, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = a.at(i) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

std::string fixture_root() { return std::string(H3_SOURCE_DIR) + "/tests/fixtures/audio_vae"; }

// Every fixture case folder (fails the calling test when there are none).
std::vector<std::string> fixture_cases() {
  std::vector<std::string> cases;
  if (fs::is_directory(fixture_root()))
    for (const auto& e : fs::directory_iterator(fixture_root()))
      if (e.is_directory() && fs::exists(e.path() / "expected.safetensors")) cases.push_back(e.path().string());
  std::sort(cases.begin(), cases.end());
  return cases;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Parity with the reference (diffusers MiniMaxH3AudioDecodeStep on tiny random models).

TEST(AudioVaeFixtures, DecodeMatchesReference) {
  const auto cases = fixture_cases();
  ASSERT_FALSE(cases.empty()) << "no audio VAE fixtures under " << fixture_root()
                              << " (tools/reference/make_fixtures.py makes them; branch ref-fixtures)";
  auto be = make_cpu_backend();
  for (const std::string& dir : cases) {
    auto dec = AudioVaeDecoder::load(*be, audio_vae_component_at(join_path(dir, "audio_vae")));
    const Tensor latents = SafetensorsFile::open(join_path(dir, "case.safetensors"))->tensor("audio_latents");
    const Tensor expected = SafetensorsFile::open(join_path(dir, "expected.safetensors"))->tensor("audio");
    const Tensor audio = dec->decode(latents);
    ASSERT_EQ(audio.shape(), expected.shape()) << dir;
    EXPECT_EQ(audio.dim(1), dec->config().hop_length() * latents.dim(2)) << dir;
    // Acceptance: relative L2 ≤ 1e-5 (two float32 implementations; only summation order differs).
    EXPECT_LE(rel_l2(audio, expected), 1e-5) << dir;
    EXPECT_GT(cosine(audio, expected), 0.99999) << dir;
  }
}

TEST(AudioVaeFixtures, ManifestMatchesReferenceStateDict) {
  const auto cases = fixture_cases();
  ASSERT_FALSE(cases.empty()) << "no audio VAE fixtures under " << fixture_root();
  for (const std::string& dir : cases) {
    const Component comp = audio_vae_component_at(join_path(dir, "audio_vae"));
    const Checkpoint ck = Checkpoint::open(comp.weights);
    std::map<std::string, Shape> manifest;
    for (const TensorSpec& s : audio_vae_manifest(load_audio_vae_config(comp), /*with_encoder=*/true))
      manifest[s.name] = s.shape;
    std::map<std::string, Shape> stored;
    for (const std::string& n : ck.names()) stored[n] = ck.info(n).shape;
    for (const auto& [name, shape] : stored) {
      ASSERT_TRUE(manifest.count(name)) << dir << ": the reference stores '" << name << "', the manifest lacks it";
      EXPECT_EQ(shape_str(manifest[name]), shape_str(shape)) << dir << ": " << name;
    }
    for (const auto& [name, shape] : manifest)
      EXPECT_TRUE(stored.count(name)) << dir << ": the manifest lists '" << name << "', the reference does not";
  }
}

TEST(AudioVaeFixtures, CheckpointFiltersAreTheKaiserSincFilter) {
  const auto cases = fixture_cases();
  ASSERT_FALSE(cases.empty()) << "no audio VAE fixtures under " << fixture_root();
  const std::vector<float> h = aa_activation_filter();
  const Checkpoint ck = Checkpoint::open(audio_vae_component_at(join_path(cases.front(), "audio_vae")).weights);
  int filters = 0;
  for (const std::string& n : ck.names()) {
    if (n.size() < 7 || n.compare(n.size() - 7, 7, ".filter") != 0) continue;
    const Tensor f = ck.get(n);
    ASSERT_EQ(f.numel(), kAaFilterTaps) << n;
    // The reference computes the filter in float32 (torch.kaiser_window, torch.sinc); ours is float64 rounded once.
    for (int64_t i = 0; i < f.numel(); ++i) EXPECT_NEAR(f.at(i), h[i], 1.5e-6 * std::fabs(h[i])) << n << "[" << i << "]";
    ++filters;
  }
  EXPECT_GT(filters, 0);
}

TEST(AudioVaeFixtures, ToolWritesTheDecodedAudio) {
  const auto cases = fixture_cases();
  ASSERT_FALSE(cases.empty()) << "no audio VAE fixtures under " << fixture_root();
  TempDir tmp("tool");
  const std::string out = join_path(tmp.path, "audio.safetensors");
  std::string vae = join_path(cases.front(), "audio_vae"), in = join_path(cases.front(), "case.safetensors");
  std::vector<std::string> args = {"audio-decode", "--audio-vae", vae, "--latents", in, "--out", out, "--device", "cpu"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  ASSERT_EQ(tool_audio_decode(static_cast<int>(argv.size()), argv.data()), 0);
  auto f = SafetensorsFile::open(out);
  const Tensor audio = f->tensor("audio");
  const Tensor expected = SafetensorsFile::open(join_path(cases.front(), "expected.safetensors"))->tensor("audio");
  EXPECT_EQ(audio.dtype(), DType::F32);
  ASSERT_EQ(audio.shape(), expected.shape());
  EXPECT_LE(rel_l2(audio, expected), 1e-5);
  EXPECT_EQ(f->metadata().at("sampling_rate"), "32000");
}

// ---------------------------------------------------------------------------------------------------------------
// The decoder against its float64 replica on random tiny models (no fixture needed).

TEST(AudioVaeDecoder, MatchesFloat64ReplicaOnRandomModels) {
  auto be = make_cpu_backend();
  int seed = 100;
  for (const AudioVaeConfig& c : {unit_audio_vae_config(), hop40_config()}) {
    TempDir tmp("replica" + std::to_string(seed));
    const auto weights = random_audio_vae_weights(c, seed, /*with_encoder=*/false);
    write_model(tmp.path, c, weights);
    auto dec = AudioVaeDecoder::load(*be, audio_vae_component_at(tmp.path));
    for (auto [B, A] : {std::pair<int64_t, int64_t>{2, 7}, {1, 1}, {2, 3}}) {
      const Tensor latents = random_latents(B, c.latent_channels, A, seed + A);
      const Tensor audio = dec->decode(latents);
      ASSERT_EQ(audio.shape(), (Shape{B, c.hop_length() * A}));
      // float32 against float64 on the same weights: rounding only, ~1e-6 through the stack.
      EXPECT_LE(rel_l2_f64(audio, reference_decode(c, by_name(weights), latents)), 1e-5)
          << "hop " << c.hop_length() << " B " << B << " A " << A;
    }
    ++seed;
  }
}

TEST(AudioVaeDecoder, ClampsToUnitRange) {
  auto be = make_cpu_backend();
  const AudioVaeConfig c = unit_audio_vae_config();
  auto weights = random_audio_vae_weights(c, 7, false);
  for (NamedTensor& t : weights)  // a loud output layer, so that many samples hit the clamp
    if (t.name == "decoder.conv_post.weight_g") t.tensor.ptr<float>()[0] = 50.f;
  TempDir tmp("clamp");
  write_model(tmp.path, c, weights);
  auto dec = AudioVaeDecoder::load(*be, audio_vae_component_at(tmp.path));
  const Tensor latents = random_latents(2, c.latent_channels, 9, 8);
  const Tensor audio = dec->decode(latents);
  int64_t at_bound = 0;
  for (int64_t i = 0; i < audio.numel(); ++i) {
    const float v = audio.ptr<float>()[i];
    ASSERT_LE(std::fabs(v), 1.f);
    at_bound += std::fabs(v) == 1.f;
  }
  EXPECT_GT(at_bound, audio.numel() / 10);
  EXPECT_LT(at_bound, audio.numel());
  EXPECT_LE(rel_l2_f64(audio, reference_decode(c, by_name(weights), latents)), 1e-5);
}

TEST(AudioVaeDecoder, OriginalLayoutDecodesLikeDiffusers) {
  auto be = make_cpu_backend();
  const AudioVaeConfig c = unit_audio_vae_config();
  const auto weights = random_audio_vae_weights(c, 21, false);
  TempDir diff("layout_diffusers"), orig("layout_original");
  write_model(diff.path, c, weights);
  // Original release: config.json (latent_channels, sample_rate, statistics) + metadata.json (constructor kwargs).
  nlohmann::json kwargs = nlohmann::json::parse(audio_vae_config_json(c));
  kwargs.erase("latent_channels");
  kwargs["vae_latent_channels"] = c.latent_channels;
  write_file_atomic(join_path(orig.path, "metadata.json"),
                    nlohmann::json{{"metadata", {{"kwargs", kwargs}}}}.dump());
  write_file_atomic(join_path(orig.path, "config.json"),
                    nlohmann::json{{"latent_channels", c.latent_channels},
                                   {"sample_rate", c.sampling_rate},
                                   {"latents_mean", c.latents_mean},
                                   {"latents_std", c.latents_std}}
                        .dump());
  write_safetensors(join_path(orig.path, "model.safetensors"), weights);
  const Component co = audio_vae_component_at(orig.path);
  EXPECT_EQ(co.layout, Layout::Original);
  EXPECT_EQ(audio_vae_component_at(diff.path).layout, Layout::Diffusers);
  const Tensor latents = random_latents(2, c.latent_channels, 5, 22);
  const Tensor a = AudioVaeDecoder::load(*be, audio_vae_component_at(diff.path))->decode(latents);
  const Tensor b = AudioVaeDecoder::load(*be, co)->decode(latents);
  EXPECT_EQ(max_abs_diff(a, b), 0.0);
}

TEST(AudioVaeDecoder, RejectsBadLatents) {
  auto be = make_cpu_backend();
  const AudioVaeConfig c = unit_audio_vae_config();
  TempDir tmp("bad_latents");
  write_random_audio_vae(tmp.path, c, 3, false);
  auto dec = AudioVaeDecoder::load(*be, audio_vae_component_at(tmp.path));
  EXPECT_NO_THROW(dec->decode(Tensor::zeros({2, 8, 2}, DType::F32)));
  EXPECT_NO_THROW(dec->decode(Tensor::zeros({1, 8, 2}, DType::BF16)));
  EXPECT_THROW(dec->decode(Tensor::zeros({2, 7, 2}, DType::F32)), Error);   // channels
  EXPECT_THROW(dec->decode(Tensor::zeros({3, 8, 2}, DType::F32)), Error);   // batch
  EXPECT_THROW(dec->decode(Tensor::zeros({2, 8, 0}, DType::F32)), Error);   // no latents
  EXPECT_THROW(dec->decode(Tensor::zeros({8, 2}, DType::F32)), Error);      // rank
  EXPECT_THROW(dec->decode(Tensor::zeros({2, 8, 2}, DType::I32)), Error);   // dtype
  try {
    dec->decode(Tensor::zeros({2, 7, 2}, DType::F32));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("8 latent channels"), std::string::npos) << e.what();
  }
}

TEST(AudioVaeDecoder, LoadNamesMissingAndMisshapenTensors) {
  auto be = make_cpu_backend();
  const AudioVaeConfig c = unit_audio_vae_config();
  auto weights = random_audio_vae_weights(c, 4, false);
  {
    TempDir tmp("missing");
    auto fewer = weights;
    fewer.erase(std::find_if(fewer.begin(), fewer.end(),
                             [](const NamedTensor& t) { return t.name == "decoder.resblocks.3.convs2.1.weight_v"; }));
    write_model(tmp.path, c, fewer);
    try {
      AudioVaeDecoder::load(*be, audio_vae_component_at(tmp.path));
      FAIL() << "a missing tensor was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("decoder.resblocks.3.convs2.1.weight_v"), std::string::npos) << e.what();
    }
  }
  {
    TempDir tmp("misshapen");
    auto bad = weights;
    for (NamedTensor& t : bad)
      if (t.name == "decoder.ups.1.0.weight_g") t.tensor = Tensor::zeros({4, 1, 1}, DType::F32);  // C_out, not C_in
    write_model(tmp.path, c, bad);
    EXPECT_THROW(AudioVaeDecoder::load(*be, audio_vae_component_at(tmp.path)), Error);
  }
  {
    TempDir tmp("geometry");
    AudioVaeConfig odd = c;
    odd.decoder_kernel_sizes = {5, 4};  // k − rate odd: the upsampler would not produce 2× its input
    write_model(tmp.path, odd, weights);
    EXPECT_THROW(AudioVaeDecoder::load(*be, audio_vae_component_at(tmp.path)), Error);
  }
  EXPECT_THROW(audio_vae_component_at("/nonexistent/audio_vae"), Error);
}

// ---------------------------------------------------------------------------------------------------------------
// Building blocks.

TEST(AudioVaeBlocks, WeightNormFoldMatchesDirectComputation) {
  std::mt19937 g(31);
  std::normal_distribution<float> n(0.f, 1.f);
  // Conv1d v [Cout, Cin, k] (norm per output channel) and ConvTranspose1d v [Cin, Cout, k] (per input channel).
  for (Shape shape : {Shape{5, 3, 4}, Shape{6, 2, 9}, Shape{1, 8, 7}, Shape{3, 1, 1}}) {
    Tensor v = Tensor::empty(shape, DType::F32), gt = Tensor::empty({shape[0], 1, 1}, DType::F32);
    for (int64_t i = 0; i < v.numel(); ++i) v.ptr<float>()[i] = n(g);
    for (int64_t i = 0; i < gt.numel(); ++i) gt.ptr<float>()[i] = n(g);
    const Tensor w = fold_weight_norm(gt, v);
    const std::vector<double> ref = f64::weight_norm(f64::values(gt), f64::values(v));
    ASSERT_EQ(w.shape(), v.shape());
    for (int64_t i = 0; i < w.numel(); ++i) EXPECT_NEAR(w.ptr<float>()[i], ref[i], 1e-6 * (1 + std::fabs(ref[i])));
    // Each slice along axis 0 has norm |g|.
    const int64_t per = v.numel() / shape[0];
    for (int64_t i = 0; i < shape[0]; ++i) {
      double ss = 0;
      for (int64_t j = 0; j < per; ++j) ss += std::pow(double(w.ptr<float>()[i * per + j]), 2);
      EXPECT_NEAR(std::sqrt(ss), std::fabs(gt.ptr<float>()[i]), 1e-5);
    }
  }
  EXPECT_THROW(fold_weight_norm(Tensor::zeros({4, 1, 1}, DType::F32), Tensor::zeros({5, 2, 3}, DType::F32)), Error);
}

TEST(AudioVaeBlocks, KaiserSincFilterMatchesSpecValues) {
  // spec/audio_vae.md §3: float32 values of the 12-tap filter (symmetric), printed to 10 decimals.
  const double half[] = {0.0020289647, 0.0093894657, -0.0255434588, -0.0576573834, 0.1285725832, 0.4432097971};
  const std::vector<float> h = aa_activation_filter();
  ASSERT_EQ(h.size(), 12u);
  double sum = 0;
  // The reference evaluates the window (Bessel I0) and the sinc in float32; we evaluate in float64 and round once.
  // The two differ by up to ~1e-6 relative (the model loads the stored values, so this never reaches a decode).
  for (int i = 0; i < 6; ++i) {
    EXPECT_NEAR(h[i], half[i], 1.5e-6 * std::fabs(half[i])) << i;
    EXPECT_EQ(h[i], h[11 - i]) << i;
  }
  for (float v : h) sum += v;
  EXPECT_NEAR(sum, 1.0, 1e-6);
}

TEST(AudioVaeBlocks, ConfigJsonRoundTrips) {
  const AudioVaeConfig c = hop40_config();
  const AudioVaeConfig r = parse_audio_vae_config(nlohmann::json::parse(audio_vae_config_json(c)), "test");
  EXPECT_EQ(r.decoder_rates, c.decoder_rates);
  EXPECT_EQ(r.decoder_kernel_sizes, c.decoder_kernel_sizes);
  EXPECT_EQ(r.resblock_dilation_sizes, c.resblock_dilation_sizes);
  EXPECT_EQ(r.latents_std, c.latents_std);
  EXPECT_EQ(r.hop_length(), 40);
}

// ---------------------------------------------------------------------------------------------------------------
// `h3 tool audio-decode` argument and input errors: usage errors return 2, runtime errors 1, and nothing is written.

namespace {
int run_tool(std::vector<std::string> args) {
  args.insert(args.begin(), "audio-decode");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return tool_audio_decode(static_cast<int>(argv.size()), argv.data());
}
}  // namespace

TEST(AudioVaeTool, RejectsBadArgumentsAndInputsWithoutWriting) {
  const AudioVaeConfig c = unit_audio_vae_config();
  TempDir tmp("tool_errors");
  const std::string vae = join_path(tmp.path, "audio_vae"), out = join_path(tmp.path, "out.safetensors");
  write_random_audio_vae(vae, c, 5, false);
  const std::string good = join_path(tmp.path, "good.safetensors"), bad = join_path(tmp.path, "bad.safetensors");
  const std::string other = join_path(tmp.path, "other.safetensors");
  write_safetensors(good, {{"audio_latents", random_latents(2, c.latent_channels, 3, 1)}});
  write_safetensors(bad, {{"audio_latents", random_latents(2, c.latent_channels + 1, 3, 1)}});
  write_safetensors(other, {{"latents", random_latents(2, c.latent_channels, 3, 1)}});

  EXPECT_EQ(run_tool({"--audio-vae", vae, "--latents", good}), 2);                          // no --out
  EXPECT_EQ(run_tool({"--audio-vae", vae, "--latents", good, "--out", out, "--bogus"}), 2);  // unknown argument
  EXPECT_EQ(run_tool({"--audio-vae", vae, "--latents", good, "--out", out, "--device", "tpu"}), 2);
  EXPECT_EQ(run_tool({"--audio-vae", vae, "--latents", bad, "--out", out, "--device", "cpu"}), 1);    // channels
  EXPECT_EQ(run_tool({"--audio-vae", vae, "--latents", other, "--out", out, "--device", "cpu"}), 1);  // no tensor
  EXPECT_EQ(run_tool({"--audio-vae", tmp.path, "--latents", good, "--out", out, "--device", "cpu"}), 1);  // not a VAE
  EXPECT_EQ(run_tool({"--audio-vae", vae, "--latents", good, "--out", join_path(tmp.path, "no/such/dir/x.st"),
                      "--device", "cpu"}),
            1);
  EXPECT_FALSE(fs::exists(out));

  ASSERT_EQ(run_tool({"--audio-vae", vae, "--latents", good, "--out", out, "--device", "cpu"}), 0);
  const Tensor audio = SafetensorsFile::open(out)->tensor("audio");
  EXPECT_EQ(audio.shape(), (Shape{2, c.hop_length() * 3}));
}
