// The Qwen3-VL conditioner (spec/conditioner.md §7, §9): rotary tables bit for bit against torch's, the text model
// against an independent float64 evaluation of its definition and against itself under transformations that must
// not change the result, and against the transformers reference fixtures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "backend/backend.h"
#include "io/manifest.h"
#include "io/safetensors.h"
#include "models/qwen3vl/rope.h"
#include "models/qwen3vl/text_model.h"
#include "text/prompt.h"
#include "text/tiny_tokenizer.h"
#include "text/tokenizer.h"
#include "tools/encode_text_tool.h"
#include "util/mapped_file.h"

using namespace h3;
namespace fs = std::filesystem;

namespace {

uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// A folder under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static int counter = 0;
    path_ = (fs::temp_directory_path() / cat("h3_test_qwen_", tag, "_", ::getpid(), "_", counter++)).string();
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A small text configuration with every dimension distinct (head_dim·heads != hidden), GQA 2 and the interleaved
// M-RoPE sections of the recommended fixture (conditioner.md §10.2).
TextEncoderConfig tiny_config() {
  TextEncoderConfig c;
  QwenTextConfig& t = c.text;
  t.vocab_size = 101;
  t.hidden_size = 24;
  t.intermediate_size = 40;
  t.num_hidden_layers = 52;
  t.num_attention_heads = 4;
  t.num_key_value_heads = 2;
  t.head_dim = 16;
  t.mrope_section = {4, 2, 2};
  t.rope_theta = 5e6;
  return c;
}

nlohmann::json config_json(const TextEncoderConfig& c) {
  const QwenTextConfig& t = c.text;
  nlohmann::json rope = {{"rope_type", "default"}, {"rope_theta", t.rope_theta},
                         {"mrope_section", t.mrope_section}, {"mrope_interleaved", true}};
  nlohmann::json text = {{"hidden_size", t.hidden_size}, {"num_hidden_layers", t.num_hidden_layers},
                         {"num_attention_heads", t.num_attention_heads},
                         {"num_key_value_heads", t.num_key_value_heads}, {"head_dim", t.head_dim},
                         {"intermediate_size", t.intermediate_size}, {"rms_norm_eps", t.rms_norm_eps},
                         {"vocab_size", t.vocab_size}, {"attention_bias", false}, {"rope_parameters", rope}};
  return {{"architectures", {"Qwen3VLForConditionalGeneration"}}, {"model_type", "qwen3_vl"}, {"text_config", text}};
}

using Weights = std::map<std::string, Tensor>;  // host F32

// Random F32 weights for every tensor the conditioner needs (and nothing else): norm weights near 1, matrices with
// 1/sqrt(fan_in) scale so activations stay O(1) through 50 layers.
Weights random_weights(const TextEncoderConfig& c, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  Weights w;
  for (const TensorSpec& s : text_encoder_manifest(c, false)) {
    Tensor t = Tensor::empty(s.shape, DType::F32);
    float* p = t.ptr<float>();
    const bool norm = s.shape.size() == 1, embed = s.name.find("embed_tokens") != std::string::npos;
    const float scale = norm ? 0.1f : embed ? 1.f : 1.f / std::sqrt(static_cast<float>(s.shape[1]));
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = (norm ? 1.f : 0.f) + scale * normal(g);
    w[s.name] = t;
  }
  return w;
}

// Writes config.json + model.safetensors of `w` into `dir` and returns the component.
Component write_text_encoder(const std::string& dir, const TextEncoderConfig& c, const Weights& w) {
  std::vector<NamedTensor> named;
  for (const auto& [name, t] : w) named.push_back({name, t});
  write_safetensors(join_path(dir, "model.safetensors"), named);
  write_file_atomic(join_path(dir, "config.json"), config_json(c).dump(2));
  Component comp;
  comp.name = "text_encoder";
  comp.present = true;
  comp.dir = dir;
  comp.weights = dir;
  comp.config_files = {join_path(dir, "config.json")};
  return comp;
}

// ---- float64 evaluation of conditioner.md §7 (text positions), straight from the definition ----
using Mat = std::vector<double>;  // row-major

Mat matmul_t(const Mat& x, int64_t rows, int64_t k, const Tensor& w) {  // x [rows, k] · wᵀ, w [n, k]
  const int64_t n = w.dim(0);
  const float* W = w.ptr<float>();
  Mat y(rows * n, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t i = 0; i < k; ++i) s += x[r * k + i] * W[j * k + i];
      y[r * n + j] = s;
    }
  return y;
}

void rms_inplace(double* x, int64_t d, const Tensor& w, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < d; ++i) ss += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(ss / d + eps);
  for (int64_t i = 0; i < d; ++i) x[i] = x[i] * inv * w.ptr<float>()[i];
}

Mat reference_forward(const Weights& w, const QwenTextConfig& c, const std::vector<int32_t>& ids) {
  const int64_t n = ids.size(), D = c.hidden_size, Hq = c.num_attention_heads, Hkv = c.num_key_value_heads,
                Dh = c.head_dim, F = c.intermediate_size, half = Dh / 2;
  const double eps = c.rms_norm_eps;
  Mat x(n * D);
  const float* E = w.at("model.language_model.embed_tokens.weight").ptr<float>();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < D; ++i) x[r * D + i] = E[ids[r] * D + i];
  for (int64_t l = 0; l < kConditionerLayers; ++l) {
    const std::string p = cat("model.language_model.layers.", l, ".");
    auto W = [&](const std::string& s) -> const Tensor& { return w.at(p + s); };
    Mat h = x;
    for (int64_t r = 0; r < n; ++r) rms_inplace(&h[r * D], D, W("input_layernorm.weight"), eps);
    Mat q = matmul_t(h, n, D, W("self_attn.q_proj.weight"));
    Mat k = matmul_t(h, n, D, W("self_attn.k_proj.weight"));
    Mat v = matmul_t(h, n, D, W("self_attn.v_proj.weight"));
    auto rope = [&](double* head, int64_t pos) {  // q·cos + rotate_half(q)·sin, rotate_half(x) = [-x2, x1]
      std::vector<double> y(Dh);
      for (int64_t j = 0; j < Dh; ++j) {
        const double angle = pos / std::pow(c.rope_theta, 2.0 * (j % half) / Dh);
        const double rot = j < half ? -head[j + half] : head[j - half];
        y[j] = head[j] * std::cos(angle) + rot * std::sin(angle);
      }
      std::copy(y.begin(), y.end(), head);
    };
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t hh = 0; hh < Hq; ++hh) {
        rms_inplace(&q[(r * Hq + hh) * Dh], Dh, W("self_attn.q_norm.weight"), eps);
        rope(&q[(r * Hq + hh) * Dh], r);
      }
      for (int64_t hh = 0; hh < Hkv; ++hh) {
        rms_inplace(&k[(r * Hkv + hh) * Dh], Dh, W("self_attn.k_norm.weight"), eps);
        rope(&k[(r * Hkv + hh) * Dh], r);
      }
    }
    Mat attn(n * Hq * Dh, 0.0);
    for (int64_t hh = 0; hh < Hq; ++hh) {
      const int64_t kv = hh / (Hq / Hkv);
      for (int64_t i = 0; i < n; ++i) {
        std::vector<double> s(i + 1);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double d = 0;
          for (int64_t e = 0; e < Dh; ++e) d += q[(i * Hq + hh) * Dh + e] * k[(j * Hkv + kv) * Dh + e];
          s[j] = d / std::sqrt(static_cast<double>(Dh));
          mx = std::max(mx, s[j]);
        }
        for (int64_t j = 0; j <= i; ++j) sum += (s[j] = std::exp(s[j] - mx));
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t e = 0; e < Dh; ++e) attn[(i * Hq + hh) * Dh + e] += s[j] / sum * v[(j * Hkv + kv) * Dh + e];
      }
    }
    Mat o = matmul_t(attn, n, Hq * Dh, W("self_attn.o_proj.weight"));
    for (int64_t i = 0; i < n * D; ++i) x[i] += o[i];
    h = x;
    for (int64_t r = 0; r < n; ++r) rms_inplace(&h[r * D], D, W("post_attention_layernorm.weight"), eps);
    Mat gate = matmul_t(h, n, D, W("mlp.gate_proj.weight")), up = matmul_t(h, n, D, W("mlp.up_proj.weight"));
    for (int64_t i = 0; i < n * F; ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
    Mat down = matmul_t(gate, n, F, W("mlp.down_proj.weight"));
    for (int64_t i = 0; i < n * D; ++i) x[i] += down[i];
  }
  return x;
}

double rel_l2_to(const Tensor& got, const Mat& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = got.ptr<float>()[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int32_t> u(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = u(g);
  return ids;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// conditioner.md §9.1: torch 2.11's float32 CPU values of 1 / 5e6^(2i/128). 19 entries differ by 1 ulp from the
// correctly rounded value, and a correctly rounded pow followed by a float32 division still misses i = 19.
TEST(QwenRope, TextInvFreqMatchesTorchTableBitForBit) {
  const uint32_t table[64] = {
      0x3f800000, 0x3f492c28, 0x3f1e165d, 0x3ef875a7, 0x3ec33f3a, 0x3e996e52, 0x3e712429, 0x3e3d7efc,
      0x3e14e963, 0x3dea09db, 0x3db7ea1a, 0x3d908687, 0x3d63251b, 0x3d327f50, 0x3d0c44bf, 0x3cdc7456,
      0x3cad3d5e, 0x3c88230f, 0x3c55f605, 0x3c282311, 0x3c042088, 0x3bcfa8a9, 0x3ba32f3e, 0x3b803c3d,
      0x3b498ad3, 0x3b1e60c3, 0x3af8ea93, 0x3ac39b1c, 0x3a99b686, 0x3a7195a5, 0x3a3dd829, 0x3a152f76,
      0x39ea77ff, 0x39b840a8, 0x3990ca8b, 0x39639000, 0x3932d34f, 0x390c86c1, 0x38dcdc14, 0x38ad8ee4,
      0x38886320, 0x38565ab5, 0x38287230, 0x38045eb6, 0x37d00a62, 0x37a37c09, 0x37807896, 0x3749e9ab,
      0x371eab4b, 0x36f95fb6, 0x36c3f72a, 0x3699fedc, 0x36720755, 0x363e3180, 0x361575ab, 0x35eae655,
      0x35b8975d, 0x35910eae, 0x3563fb18, 0x35332777, 0x350cc8e3, 0x34dd4405, 0x34ade091, 0x3488a34f};
  const std::vector<float> inv = torch_rope_inv_freq(5e6, 128);
  ASSERT_EQ(inv.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(f32_bits(inv[i]), table[i]) << "slot " << i;
}

// conditioner.md §9.2 (the vision tower's 1 / 10000^(2k/36), an exponent that is not exact in float32): the same
// formula reproduces it too.
TEST(QwenRope, VisionInvFreqMatchesTorchTableBitForBit) {
  const uint32_t table[18] = {0x3f800000, 0x3f1977cc, 0x3eb800d6, 0x3e5c9d35, 0x3e044133, 0x3d9e91b6,
                              0x3d3e1e95, 0x3ce3f280, 0x3c88a69b, 0x3c23d70a, 0x3bc47060, 0x3b6b8631,
                              0x3b0d3169, 0x3aa94938, 0x3a4af7f3, 0x39f35a5c, 0x3991e2e1, 0x392ee9bf};
  const std::vector<float> inv = torch_rope_inv_freq(10000.0, 36);
  ASSERT_EQ(inv.size(), 18u);
  for (int k = 0; k < 18; ++k) EXPECT_EQ(f32_bits(inv[k]), table[k]) << "slot " << k;
}

// The slot→axis rule of §7.5 evaluated the way transformers builds it (start from the t frequencies, overwrite every
// third slot from 1 up to 3·section_h with h and from 2 up to 3·section_w with w), and the tables against a direct
// float64 evaluation of cos/sin at distinct t/h/w positions.
TEST(QwenRope, InterleavedMropeMatchesDirectEvaluation) {
  for (auto [dim, section] : {std::pair<int64_t, std::vector<int64_t>>{128, {24, 20, 20}}, {16, {4, 2, 2}}}) {
    const int64_t half = dim / 2;
    std::vector<int> expected(half, 0);
    for (int64_t i = 1; i < 3 * section[1]; i += 3) expected[i] = 1;
    for (int64_t i = 2; i < 3 * section[2]; i += 3) expected[i] = 2;
    int count[3] = {0, 0, 0};
    for (int64_t i = 0; i < half; ++i) {
      EXPECT_EQ(mrope_axis(i, section), expected[i]) << "slot " << i;
      ++count[mrope_axis(i, section)];
    }
    EXPECT_EQ(count[0], section[0]);
    EXPECT_EQ(count[1], section[1]);
    EXPECT_EQ(count[2], section[2]);

    MropePositions pos;
    pos.t = {0, 7, 7, 7, 50, 1000};
    pos.h = {0, 7, 8, 30, 50, 1000};
    pos.w = {0, 9, 7, 48, 51, 1000};
    const std::vector<float> inv = torch_rope_inv_freq(5e6, dim);
    RopeTables r = mrope_tables(pos, inv, section);
    ASSERT_EQ(r.cos.shape(), (Shape{6, dim}));
    const std::vector<int64_t>* axes[3] = {&pos.t, &pos.h, &pos.w};
    for (int64_t p = 0; p < pos.size(); ++p)
      for (int64_t j = 0; j < dim; ++j) {
        const int64_t i = j % half;
        // The angle is rounded to float32 once (as in the reference); cos/sin then within one float32 rounding.
        const double angle = static_cast<float>(static_cast<float>((*axes[expected[i]])[p]) * inv[i]);
        EXPECT_NEAR(r.cos.ptr<float>()[p * dim + j], std::cos(angle), 6e-8) << p << " " << j;
        EXPECT_NEAR(r.sin.ptr<float>()[p * dim + j], std::sin(angle), 6e-8) << p << " " << j;
      }
  }
}

// Text positions put the token index on all three axes, so M-RoPE is plain RoPE there whatever the sections.
TEST(QwenRope, TextPositionsReduceToPlainRope) {
  MropePositions pos;
  pos.append_text(0, 5);
  pos.append_text(5, 3);
  ASSERT_EQ(pos.size(), 8);
  const std::vector<float> inv = torch_rope_inv_freq(5e6, 128);
  RopeTables a = mrope_tables(pos, inv, {24, 20, 20}), b = mrope_tables(pos, inv, {64, 0, 0});
  for (int64_t p = 0; p < 8; ++p) {
    EXPECT_EQ(pos.t[p], p);
    EXPECT_EQ(pos.h[p], p);
    EXPECT_EQ(pos.w[p], p);
  }
  EXPECT_EQ(max_abs_diff(a.cos, b.cos), 0.0);
  EXPECT_EQ(max_abs_diff(a.sin, b.sin), 0.0);
}

// ---------------------------------------------------------------------------------------------------------------
// The whole 50-layer forward against the float64 evaluation of §7. The model runs in float32 (CPU backend); over
// 50 layers its rounding stays near 1e-6 relative, so 1e-5 (the fixture acceptance bound) catches any layout or
// formula mistake (those show up at 1e-1 or more).
TEST(QwenTextModel, MatchesFloat64ReferenceForward) {
  const TextEncoderConfig c = tiny_config();
  const Weights w = random_weights(c, 11);
  TempDir dir("ref");
  auto be = make_cpu_backend();
  auto model = QwenTextModel::load(*be, write_text_encoder(dir.path(), c, w));
  for (int64_t n : {1, 2, 9}) {
    const std::vector<int32_t> ids = random_ids(n, c.text.vocab_size, 100 + n);
    Tensor got = model->encode(ids);
    ASSERT_EQ(got.shape(), (Shape{n, c.text.hidden_size}));
    EXPECT_LT(rel_l2_to(got, reference_forward(w, c.text, ids)), 1e-5) << "length " << n;
  }
}

// Changing token 3 leaves rows 0..2 untouched: the CPU backend computes every row independently of the others,
// so causality holds exactly; rows from 3 on must change.
TEST(QwenTextModel, IsCausal) {
  const TextEncoderConfig c = tiny_config();
  TempDir dir("causal");
  auto be = make_cpu_backend();
  auto model = QwenTextModel::load(*be, write_text_encoder(dir.path(), c, random_weights(c, 12)));
  std::vector<int32_t> a = random_ids(7, c.text.vocab_size, 5), b = a;
  b[3] = (a[3] + 1) % c.text.vocab_size;
  Tensor ya = model->encode(a), yb = model->encode(b);
  EXPECT_EQ(max_abs_diff(ya.slice(0, 3), yb.slice(0, 3)), 0.0);
  for (int64_t r = 3; r < 7; ++r) EXPECT_GT(max_abs_diff(ya.slice(r, r + 1), yb.slice(r, r + 1)), 1e-3) << r;
}

// GQA (4 query heads on 2 kv heads: head h reads kv head h/2) equals a model with 4 kv heads whose k/v projections
// (and so keys and values) are the 2 originals repeated — transformers' repeat_kv.
TEST(QwenTextModel, GqaEqualsExplicitlyRepeatedKv) {
  const TextEncoderConfig c = tiny_config();
  TextEncoderConfig full = c;
  full.text.num_key_value_heads = c.text.num_attention_heads;
  const Weights w = random_weights(c, 13);
  Weights wf = w;
  const int64_t Dh = c.text.head_dim, D = c.text.hidden_size, group = c.text.num_attention_heads / c.text.num_key_value_heads;
  for (int64_t l = 0; l < kConditionerLayers; ++l)
    for (const char* proj : {"k_proj", "v_proj"}) {
      const std::string name = cat("model.language_model.layers.", l, ".self_attn.", proj, ".weight");
      Tensor rep = Tensor::empty({full.text.num_key_value_heads * Dh, D}, DType::F32);
      for (int64_t h = 0; h < full.text.num_key_value_heads; ++h)
        std::memcpy(rep.ptr<float>() + h * Dh * D, w.at(name).ptr<float>() + (h / group) * Dh * D, Dh * D * 4);
      wf[name] = rep;
    }
  TempDir d1("gqa"), d2("mha");
  auto be = make_cpu_backend();
  auto gqa = QwenTextModel::load(*be, write_text_encoder(d1.path(), c, w));
  auto mha = QwenTextModel::load(*be, write_text_encoder(d2.path(), full, wf));
  const std::vector<int32_t> ids = random_ids(6, c.text.vocab_size, 6);
  Tensor a = gqa->encode(ids), b = mha->encode(ids);
  // Same arithmetic on the same values; only the qkv GEMM's width differs, which does not change any dot product.
  EXPECT_LT(rel_l2(a, b), 1e-7);
}

TEST(QwenTextModel, MlpRowChunkingDoesNotChangeResult) {
  const TextEncoderConfig c = tiny_config();
  TempDir dir("chunk");
  auto be = make_cpu_backend();
  auto model = QwenTextModel::load(*be, write_text_encoder(dir.path(), c, random_weights(c, 14)));
  const std::vector<int32_t> ids = random_ids(11, c.text.vocab_size, 7);
  Tensor whole = model->encode(ids);
  model->set_mlp_row_chunk(4);  // chunks of 4, 4 and 3 rows
  EXPECT_EQ(max_abs_diff(whole, model->encode(ids)), 0.0);
  EXPECT_THROW(model->set_mlp_row_chunk(0), Error);
}

TEST(QwenTextModel, RejectsEmptyAndOutOfVocabularyIds) {
  const TextEncoderConfig c = tiny_config();
  TempDir dir("ids");
  auto be = make_cpu_backend();
  auto model = QwenTextModel::load(*be, write_text_encoder(dir.path(), c, random_weights(c, 15)));
  EXPECT_THROW(model->encode({}), Error);
  try {
    model->encode({1, 2, 101});
    FAIL() << "id 101 is outside a 101-entry vocabulary";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 101 at position 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(model->encode({-1}), Error);
}

// The checkpoint holds exactly the manifest (no layers >= 50, no final norm, no lm_head) and loads; a missing or
// misshapen tensor is reported by name.
TEST(QwenTextModel, LoadNeedsOnlyTheManifestAndNamesBadTensors) {
  const TextEncoderConfig c = tiny_config();
  auto be = make_cpu_backend();
  Weights w = random_weights(c, 16);
  EXPECT_EQ(w.count("model.language_model.norm.weight"), 0u);
  EXPECT_EQ(w.count("model.language_model.layers.50.input_layernorm.weight"), 0u);

  const std::string victim = "model.language_model.layers.49.mlp.up_proj.weight";
  Weights missing = w;
  missing.erase(victim);
  TempDir d1("missing");
  try {
    QwenTextModel::load(*be, write_text_encoder(d1.path(), c, missing));
    FAIL() << "loaded without " << victim;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(victim), std::string::npos) << e.what();
  }
  Weights bad = w;
  bad[victim] = Tensor::zeros({c.text.intermediate_size + 1, c.text.hidden_size}, DType::F32);
  TempDir d2("misshapen");
  try {
    QwenTextModel::load(*be, write_text_encoder(d2.path(), c, bad));
    FAIL() << "loaded a misshapen " << victim;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has shape [41, 24]"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Presentations (§3) with the real Qwen3 vocabulary.
namespace {
const Tokenizer& qwen3_tokenizer() {
  static const Tokenizer t = Tokenizer::from_file(std::string(H3_TEST_DATA_DIR) + "/qwen3_tokenizer");
  return t;
}
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST(QwenPrompt, T2vaIsThePromptAloneTaggedText) {
  const Presentation p = present_t2va(qwen3_tokenizer(), "a robot dancing");  // §3.2
  EXPECT_EQ(p.ids, (std::vector<int32_t>{64, 12305, 27966}));
  EXPECT_EQ(p.tags, (std::vector<int64_t>{1, 1, 1}));
}

// Segments are tokenized on their own, never joined as strings (§3.1's example).
TEST(QwenPrompt, SegmentsAreTokenizedSeparately) {
  Presentation p;
  p.append_text(qwen3_tokenizer(), "<Picture 1>: ");
  p.append_text(qwen3_tokenizer(), "a cat");
  EXPECT_EQ(p.ids, (std::vector<int32_t>{21604, 3826, 220, 16, 26818, 220, 64, 8251}));
  EXPECT_EQ(p.tags, std::vector<int64_t>(8, kTextTokenTag));
  EXPECT_EQ(present_t2va(qwen3_tokenizer(), "<Picture 1>: a cat").ids,
            (std::vector<int32_t>{21604, 3826, 220, 16, 26818, 264, 8251}));
}

// Every added token written out in a prompt is refused (the reference would read it as its control id), in every
// presentation; the tokenizer itself still encodes them (tokenizer.md §2).
TEST(QwenPrompt, RejectsEmptyInvalidUtf8AndEveryAddedToken) {
  const Tokenizer& t = qwen3_tokenizer();
  EXPECT_NE(error_of([&] { present_t2va(t, ""); }).find("the prompt is empty"), std::string::npos);
  EXPECT_NE(error_of([&] { present_t2va(t, "a\xC0 cat"); }).find("prompt is not valid UTF-8 (byte 0xC0 at offset 1)"),
            std::string::npos);
  ASSERT_EQ(t.added_tokens().size(), 26u);
  for (const Tokenizer::AddedToken& token : t.added_tokens()) {
    const std::string e = error_of([&] { present_t2va(t, "a cat " + token.content + " on a mat"); });
    EXPECT_EQ(e, "the prompt contains '" + token.content + "', one of the tokenizer's control tokens, which it would "
                 "read as that token and not as text; remove it from the prompt") << token.content;
    EXPECT_EQ(t.encode(token.content), std::vector<int32_t>{token.id});
    EXPECT_NE(error_of([&] { present_fl2va(t, token.content, {ImageGrid{1, 2, 2}}, 2); }).find(token.content),
              std::string::npos);
  }
  // The one that comes first in the prompt is named; a near miss is text.
  EXPECT_NE(error_of([&] { present_t2va(t, "<think> then <|im_start|>"); }).find("'<think>'"), std::string::npos);
  EXPECT_EQ(present_t2va(t, "<|im_start| >").ids.size(), t.encode("<|im_start| >").size());
}

// ---------------------------------------------------------------------------------------------------------------
// h3 tool encode-text
namespace {
struct ToolRun {
  int status;
  std::string out, err;
};
ToolRun run_encode_text(std::vector<std::string> args) {
  args.insert(args.begin(), "encode-text");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::ostringstream out, err;
  const int status = tool_encode_text(static_cast<int>(argv.size()), argv.data(), out, err);
  return {status, out.str(), err.str()};
}

// A tiny text encoder whose vocabulary is the tiny tokenizer's, plus that tokenizer, in one folder.
struct TinyPipeline {
  TempDir dir{"tool"};
  std::string text_encoder = join_path(dir.path(), "text_encoder"), tokenizer = join_path(dir.path(), "tokenizer.json");
  TextEncoderConfig config = tiny_config();
  TinyPipeline() {
    fs::create_directories(text_encoder);
    write_file_atomic(tokenizer, make_tiny_tokenizer_json());
    config.text.vocab_size = static_cast<int64_t>(Tokenizer::from_file(tokenizer).vocab_size());
    write_text_encoder(text_encoder, config, random_weights(config, 21));
  }
  std::string out(const std::string& name) const { return join_path(dir.path(), name); }
};
}  // namespace

TEST(QwenEncodeTextTool, WritesIdsAndLayer50HiddenStates) {
  TinyPipeline p;
  const std::string out = p.out("embeds.safetensors");
  const ToolRun r = run_encode_text({"--text-encoder", p.text_encoder, "--tokenizer", p.tokenizer, "--prompt",
                                     "a robot dancing", "--out", out, "--device", "cpu"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + out), std::string::npos) << r.out;

  const Presentation want = present_t2va(Tokenizer::from_file(p.tokenizer), "a robot dancing");
  const int64_t n = static_cast<int64_t>(want.ids.size());
  auto f = SafetensorsFile::open(out);
  ASSERT_EQ(f->tensors().size(), 2u);
  Tensor ids = f->tensor("input_ids"), embeds = f->tensor("prompt_embeds");
  ASSERT_EQ(ids.dtype(), DType::I64);
  ASSERT_EQ(ids.shape(), (Shape{n}));
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(ids.ptr<int64_t>()[i], want.ids[i]);
  ASSERT_EQ(embeds.dtype(), DType::F32);
  ASSERT_EQ(embeds.shape(), (Shape{1, n, p.config.text.hidden_size}));
  auto be = make_cpu_backend();
  Tensor direct = QwenTextModel::load(*be, p.config, p.text_encoder)->encode(want.ids);
  EXPECT_EQ(max_abs_diff(embeds.reshape({n, p.config.text.hidden_size}), direct), 0.0);
}

TEST(QwenEncodeTextTool, BadUsageIsStatus2WithOneLine) {
  TinyPipeline p;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--tokenizer", p.tokenizer, "--prompt", "x", "--out", p.out("o.safetensors")}, "--text-encoder DIR is required"},
      {{"--text-encoder", p.text_encoder, "--prompt", "x", "--out", p.out("o.safetensors")}, "--tokenizer PATH is required"},
      {{"--text-encoder", p.text_encoder, "--tokenizer", p.tokenizer, "--out", p.out("o.safetensors")}, "--prompt TEXT is required"},
      {{"--text-encoder", p.text_encoder, "--tokenizer", p.tokenizer, "--prompt", "x"}, "--out FILE is required"},
      {{"--text-encoder", p.text_encoder, "--tokenizer", p.tokenizer, "--prompt", "x", "--out", p.out("o.safetensors"),
        "--device", "tpu"}, "--device must be cpu, cuda or auto, got 'tpu'"},
      {{"--text-encoder", p.text_encoder, "--frobnicate"}, "unknown option --frobnicate"},
      {{"--text-encoder"}, "--text-encoder needs a value"},
  };
  for (const auto& [args, message] : cases) {
    const ToolRun r = run_encode_text(args);
    EXPECT_EQ(r.status, 2) << message;
    EXPECT_EQ(r.err, "h3 tool encode-text: " + message + " (see h3 tool encode-text --help)\n");
  }
  EXPECT_FALSE(file_exists(p.out("o.safetensors")));
  const ToolRun help = run_encode_text({"--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("usage: h3 tool encode-text"), std::string::npos);
}

// Each failure: status 1, one line naming the rule, nothing written.
TEST(QwenEncodeTextTool, ErrorsAreStatus1AndWriteNothing) {
  TinyPipeline p;
  const std::string out = p.out("o.safetensors");
  const std::string empty_dir = p.out("empty");
  fs::create_directories(empty_dir);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--text-encoder", p.text_encoder, "--tokenizer", p.tokenizer, "--prompt", ""}, "the prompt is empty"},
      {{"--text-encoder", p.text_encoder, "--tokenizer", p.tokenizer, "--prompt", "a <|image_pad|>"},
       "the prompt contains '<|image_pad|>'"},
      {{"--text-encoder", p.text_encoder, "--tokenizer", p.tokenizer, "--prompt", "<|video_pad|>"},
       "the prompt contains '<|video_pad|>'"},
      {{"--text-encoder", p.out("nowhere"), "--tokenizer", p.tokenizer, "--prompt", "x"}, "is not a folder"},
      {{"--text-encoder", empty_dir, "--tokenizer", p.tokenizer, "--prompt", "x"}, "has no config.json"},
      {{"--text-encoder", p.text_encoder, "--tokenizer", p.out("none.json"), "--prompt", "x"}, "none.json"},
      {{"--text-encoder", p.text_encoder, "--tokenizer", p.tokenizer, "--prompt", "a\xC0"}, "UTF-8"},
  };
  for (auto [args, message] : cases) {
    args.insert(args.end(), {"--out", out, "--device", "cpu"});
    const ToolRun r = run_encode_text(args);
    EXPECT_EQ(r.status, 1) << message;
    EXPECT_TRUE(r.err.starts_with("h3 tool encode-text: error: ")) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(file_exists(out)) << message;
  }
  // An output folder that does not exist; a text encoder whose vocabulary the tokenizer's ids exceed.
  ToolRun r = run_encode_text({"--text-encoder", p.text_encoder, "--tokenizer", p.tokenizer, "--prompt", "x", "--out",
                               p.out("no/such/dir/o.safetensors"), "--device", "cpu"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  TextEncoderConfig small = p.config;
  small.text.vocab_size = 50;
  const std::string small_dir = p.out("small");
  fs::create_directories(small_dir);
  write_text_encoder(small_dir, small, random_weights(small, 22));
  r = run_encode_text({"--text-encoder", small_dir, "--tokenizer", p.tokenizer, "--prompt", "zzz", "--out", out,
                       "--device", "cpu"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("do not belong together"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(out));
}

// ---------------------------------------------------------------------------------------------------------------
// Reference fixtures (tools/reference/fx_text_encoder.py): a tiny Qwen3-VL saved by transformers (float32, 52 layers,
// GQA 2, interleaved M-RoPE), its tokenizer, and transformers' hidden_states[50] for a few prompts.
namespace {
const std::string kFixture = std::string(H3_SOURCE_DIR) + "/tests/fixtures/text_encoder";
std::string fixture_missing() {
  return "missing fixture " + kFixture + "/cases.safetensors (made by tools/reference/fx_text_encoder.py, branch "
         "ref-fixtures)";
}
}  // namespace

// Acceptance: relative L2 within 1e-5 of transformers for every case. The f32 reference and this engine round
// differently (summation order), which over 50 layers stays near 1e-6; against the f64 run (when present) the
// bound is the same.
TEST(QwenFixture, HiddenStatesMatchTransformers) {
  ASSERT_TRUE(file_exists(kFixture + "/cases.safetensors")) << fixture_missing();
  auto be = make_cpu_backend();
  Component c;
  c.name = "text_encoder";
  c.present = true;
  c.dir = c.weights = kFixture + "/text_encoder";
  c.config_files = {c.dir + "/config.json"};
  auto model = QwenTextModel::load(*be, c);
  auto cases = SafetensorsFile::open(kFixture + "/cases.safetensors");
  int k = 0;
  for (; cases->find(cat("input_ids_", k)); ++k) {
    Tensor ids64 = cases->tensor(cat("input_ids_", k)).to(DType::I64);
    std::vector<int32_t> ids(ids64.ptr<int64_t>(), ids64.ptr<int64_t>() + ids64.numel());
    Tensor got = model->encode(ids);
    Tensor want = cases->tensor(cat("hidden_f32_", k));
    ASSERT_EQ(want.numel(), got.numel()) << "case " << k;
    const double err32 = rel_l2(got, want.reshape(got.shape()));
    EXPECT_LT(err32, 1e-5) << "case " << k << " (" << ids.size() << " tokens)";
    if (cases->find(cat("hidden_f64_", k))) {
      const double err64 = rel_l2(got, cases->tensor(cat("hidden_f64_", k)).reshape(got.shape()));
      EXPECT_LT(err64, 1e-5) << "case " << k;
      std::printf("case %d: %zu tokens, rel_l2 %.2e vs f32, %.2e vs f64\n", k, ids.size(), err32, err64);
    } else {
      std::printf("case %d: %zu tokens, rel_l2 %.2e vs f32\n", k, ids.size(), err32);
    }
  }
  EXPECT_GE(k, 1) << "no input_ids_0 in the fixture";
}

TEST(QwenFixture, TokenizerReproducesInputIds) {
  ASSERT_TRUE(file_exists(kFixture + "/cases.json")) << fixture_missing();
  const Tokenizer t = Tokenizer::from_file(kFixture + "/tokenizer");
  auto cases = SafetensorsFile::open(kFixture + "/cases.safetensors");
  const nlohmann::json j = parse_json_file(kFixture + "/cases.json");
  ASSERT_FALSE(j.at("prompts").empty());
  int refused = 0;
  for (const auto& c : j.at("prompts")) {
    const int k = c.at("k").get<int>();
    const std::string text = c.at("text").get<std::string>();
    Tensor want = cases->tensor(cat("input_ids_", k)).to(DType::I64);
    const std::vector<int32_t> ids = t.encode(text);
    ASSERT_EQ(static_cast<int64_t>(ids.size()), want.numel()) << "case " << k;
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], want.ptr<int64_t>()[i]) << "case " << k << " token " << i;
    // The t2va presentation is these ids, but h3 refuses a prompt that writes out control tokens (case 3's
    // <|vision_end|> and <think>), which the reference reads as those tokens.
    const bool writes_control_tokens =
        std::any_of(t.added_tokens().begin(), t.added_tokens().end(),
                    [&](const Tokenizer::AddedToken& a) { return text.find(a.content) != std::string::npos; });
    if (writes_control_tokens) {
      EXPECT_THROW(present_t2va(t, text), Error) << "case " << k;
      ++refused;
    } else {
      EXPECT_EQ(present_t2va(t, text).ids, ids) << "case " << k;
    }
  }
  EXPECT_EQ(refused, 1);
}

// The whole t2va path of the CLI tool (tokenizer, presentation, model, file) on the fixture's first prompt.
TEST(QwenFixture, EncodeTextToolMatchesTransformers) {
  ASSERT_TRUE(file_exists(kFixture + "/cases.json")) << fixture_missing();
  const nlohmann::json j = parse_json_file(kFixture + "/cases.json");
  const nlohmann::json& c = j.at("prompts").at(0);
  TempDir dir("fixture_tool");
  const std::string out = join_path(dir.path(), "embeds.safetensors");
  const ToolRun r = run_encode_text({"--text-encoder", kFixture + "/text_encoder", "--tokenizer", kFixture + "/tokenizer",
                                     "--prompt", c.at("text").get<std::string>(), "--out", out, "--device", "cpu"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto cases = SafetensorsFile::open(kFixture + "/cases.safetensors");
  auto got = SafetensorsFile::open(out);
  const int k = c.at("k").get<int>();
  Tensor want_ids = cases->tensor(cat("input_ids_", k)).to(DType::I64), ids = got->tensor("input_ids");
  ASSERT_EQ(ids.numel(), want_ids.numel());
  for (int64_t i = 0; i < ids.numel(); ++i) EXPECT_EQ(ids.ptr<int64_t>()[i], want_ids.ptr<int64_t>()[i]);
  Tensor embeds = got->tensor("prompt_embeds"), want = cases->tensor(cat("hidden_f32_", k));
  ASSERT_EQ(embeds.shape(), (Shape{1, ids.numel(), 16}));
  EXPECT_LT(rel_l2(embeds, want.reshape(embeds.shape())), 1e-5);
}
