#include "tools/tool_args.h"
#include "tools/dit_tool.h"

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "models/dit/dit.h"
#include "pipeline/precision.h"
#include "util/error.h"

namespace h3 {

namespace {

constexpr std::string_view kUsage = R"(usage: h3 tool dit --transformer DIR --case CASE.safetensors --out OUT.safetensors [--device cpu|cuda|auto]
                   [--precision bf16|fp8]

Runs one MiniMax-H3 transformer forward on the tensors of CASE and writes the two outputs to OUT.

  --transformer DIR  a transformer folder: config.json + safetensors weights, diffusers or original naming
  --case FILE        safetensors with the reference forward's arguments, batch axis 1:
                       hidden_states (1, Nv, in_channels*prod(patch_size)), audio_hidden_states (1, Na, audio_in_channels),
                       encoder_hidden_states (1, Nt, text_dim), timestep (T), timestep_indices (L), token_tags (L),
                       position_ids (L, 3), video_indices (Nv), audio_indices (Na), text_indices (Nt);
                       float tensors F32, F64 or BF16, index tensors I64 or I32
  --out FILE         receives sample (1, Nv, in_channels*prod(patch_size)) and audio_sample (1, Na, audio_in_channels),
                     float32, written atomically (nothing is written when anything fails)
  --device NAME      cpu, cuda or auto (default auto: CUDA when available)
  --precision P      bf16 (default) or fp8: the transformer's products (and, on Hopper, its attention) in FP8
                     (a GPU of compute capability 8.9 or newer; elsewhere refused before any work)
  --help             show this help
)";


// Reads the case tensors (named as the reference forward's arguments) into DitForwardArgs, checking presence,
// dtype and rank; the model-dependent rules are validate_dit_forward_args's.
class CaseReader {
 public:
  explicit CaseReader(const std::string& path) : file_(SafetensorsFile::open(path)) {}

  Tensor get(const char* name) const {
    H3_CHECK(file_->find(name) != nullptr, "tensor '", name, "' is missing");
    return file_->tensor(name);
  }
  // (1, N, C) float → [N, C] view.
  Tensor rows(const char* name) const {
    Tensor t = floating(name);
    H3_CHECK(t.ndim() == 3 && t.dim(0) == 1, "tensor '", name, "' must be (1, rows, channels) (batch 1), got ", t.str());
    return t.reshape({t.dim(1), t.dim(2)});
  }
  Tensor floating(const char* name) const {
    Tensor t = get(name);
    H3_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::F64 || t.dtype() == DType::BF16, "tensor '", name,
             "' must be F32, F64 or BF16, got ", t.str());
    return t;
  }
  std::vector<int64_t> index(const char* name) const {
    Tensor t = get(name);
    H3_CHECK(t.dtype() == DType::I64 || t.dtype() == DType::I32, "tensor '", name, "' must be I64 or I32, got ",
             t.str());
    H3_CHECK(t.ndim() == 1, "tensor '", name, "' must be one-dimensional, got ", t.str());
    std::vector<int64_t> v(t.numel());
    for (int64_t i = 0; i < t.numel(); ++i)
      v[i] = t.dtype() == DType::I64 ? t.ptr<int64_t>()[i] : t.ptr<int32_t>()[i];
    return v;
  }
  std::vector<float> values(const char* name) const {
    Tensor t = floating(name);
    H3_CHECK(t.ndim() == 1, "tensor '", name, "' must be one-dimensional, got ", t.str());
    std::vector<float> v(t.numel());
    for (int64_t i = 0; i < t.numel(); ++i) v[i] = static_cast<float>(t.at(i));
    return v;
  }

 private:
  std::shared_ptr<SafetensorsFile> file_;
};

// [N, C] → (1, N, C).
Tensor batch_of_one(const Tensor& t) { return t.reshape({1, t.dim(0), t.dim(1)}); }

}  // namespace

DitForwardArgs read_dit_case(const std::string& path, const DitConfig& cfg) {
  try {
    const CaseReader c(path);
    DitForwardArgs a;
    a.hidden_states = c.rows("hidden_states");
    a.audio_hidden_states = c.rows("audio_hidden_states");
    a.encoder_hidden_states = c.rows("encoder_hidden_states");
    a.timestep = c.values("timestep");
    a.timestep_indices = c.index("timestep_indices");
    a.token_tags = c.index("token_tags");
    a.position_ids = c.floating("position_ids");
    a.video_indices = c.index("video_indices");
    a.audio_indices = c.index("audio_indices");
    a.text_indices = c.index("text_indices");
    validate_dit_forward_args(cfg, a);
    return a;
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
}

int tool_dit(int argc, char** argv) {
  TransformerCaseArgs args;
  if (const auto status = parse_transformer_case_tool("dit", kUsage, argc, argv, args)) return *status;
  try {
    const Component transformer = dit_component_from_dir(args.transformer);
    const DitForwardArgs case_args = read_dit_case(args.case_path, load_dit_config(transformer));
    std::unique_ptr<Backend> be = make_backend(args.device);
    DitOptions dit_options;
    dit_options.precision = resolve_dit_precision(args.precision, *be);
    std::unique_ptr<Dit> dit = Dit::load(*be, transformer, dit_options);
    const auto t0 = std::chrono::steady_clock::now();
    DitOutput out = dit->forward(case_args);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "h3 tool dit: forward %.3f s on %s (L = %lld)\n", seconds, be->name().c_str(),
                 static_cast<long long>(case_args.position_ids.dim(0)));
    write_safetensors(args.out, {{"sample", batch_of_one(out.sample)}, {"audio_sample", batch_of_one(out.audio_sample)}});
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "h3 tool dit: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace h3
