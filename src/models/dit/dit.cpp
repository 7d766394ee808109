// The MiniMax-H3 transformer forward (spec/dit.md §5), in the reference's order, through the Backend op set only.
#include "models/dit/dit.h"

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "io/safetensors.h"
#include "models/dit/dit_embed.h"
#include "models/dit/dit_weights.h"
#include "util/cancel.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace h3 {

// ---------------------------------------------------------------------------------------------------------------

namespace {

// Class names and field names that only the original release's transformer config uses (layout.md §3.2).
constexpr const char* kOriginalClass = "MiniMaxH3DiTModel";
constexpr const char* kDiffusersClass = "MiniMaxH3Transformer3DModel";
constexpr const char* kOriginalOnlyFields[] = {"token_refiner_num_layers", "ffn_hidden_size", "latents_dim",
                                               "audio_latents_dim", "timestep_input_dim", "rope_inv_freq_len"};

bool config_is_original(const nlohmann::json& j) {
  if (!j.is_object()) return false;
  const std::string cls = j.contains("_class_name") && j["_class_name"].is_string() ? j["_class_name"].get<std::string>()
                                                                                    : std::string();
  if (cls == kOriginalClass) return true;
  if (cls == kDiffusersClass) return false;
  for (const char* f : kOriginalOnlyFields)
    if (j.contains(f)) return true;
  return false;
}

std::vector<uint32_t> bit_patterns(const std::vector<float>& v) {
  std::vector<uint32_t> bits(v.size());
  if (!v.empty()) std::memcpy(bits.data(), v.data(), v.size() * sizeof(float));
  return bits;
}

Tensor host_i32(const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::I32);
  if (!v.empty()) std::memcpy(t.data(), v.data(), v.size() * sizeof(int32_t));
  return t;
}

std::vector<int32_t> narrow(const std::vector<int64_t>& v) { return std::vector<int32_t>(v.begin(), v.end()); }

}  // namespace

Component dit_component_from_dir(const std::string& dir) {
  const std::string cfg = join_path(dir, "config.json");
  H3_CHECK(file_exists(cfg), dir, ": no config.json here (expected a MiniMax-H3 transformer folder: config.json + ",
           "safetensors weights)");
  Component c;
  c.name = "transformer";
  c.present = true;
  c.dir = dir;
  c.weights = dir;
  c.config_files = {cfg};
  c.layout = config_is_original(parse_json_file(cfg)) ? Layout::Original : Layout::Diffusers;
  return c;
}

// ---------------------------------------------------------------------------------------------------------------

struct Dit::Impl {
  // The AdaLN tables of one timestep list.
  struct Tables {
    std::vector<uint32_t> key;   // bit patterns of the timesteps
    std::vector<Tensor> blocks;  // per block [kDitModalities·T, kAdaLnParams, hidden]; row 3·ti + tag
    Tensor out;                  // [T, kOutParams, hidden]
  };

  // What begin_request computes once for the steps of one request.
  struct Request {
    int64_t L = 0, T = 0, num_video = 0, num_audio = 0, num_text = 0;
    std::vector<int64_t> token_tags;
    Tensor video_idx, audio_idx, text_idx;  // I32 backend
    Tensor cos, sin;                        // [L, rotary_dim] backend (activation dtype)
    Tensor text;                            // refined text rows [Nt, hidden] backend
    std::shared_ptr<const Tables> tables;
    // Row → AdaLN table row and → norm_out table row of the current step (the sampler's per-row timestep indices
    // change every pass: each pass has its own timesteps).
    Tensor adaln_rows, out_rows;  // I32 backend [L]
  };

  Backend& be;
  DitConfig cfg;
  Layout layout;
  DitWeights w;
  DType act;
  std::shared_ptr<const Tables> cached_tables;
  int64_t table_builds = 0;
  std::optional<Request> req;

  Impl(Backend& backend, DitConfig c, Layout l, DitWeights weights)
      : be(backend), cfg(std::move(c)), layout(l), w(std::move(weights)), act(backend.activation_dtype()) {}

  // y [rows(x), out_features] = x · Wᵀ (+ b), stored in `dt`.
  Tensor linear(const Tensor& x, const Tensor& weight, const Tensor* bias, DType dt) {
    Tensor y = be.empty({x.dim(0), weight.dim(0)}, dt);
    be.linear(x, weight, bias, y);
    return y;
  }

  Tensor index(const std::vector<int32_t>& v) { return be.upload(host_i32(v), DType::I32); }

  AttentionSpec attention_spec(const DitAttnFfnWeights& b, const Tensor* cos, const Tensor* sin) const {
    AttentionSpec s;
    s.heads_q = s.heads_kv = static_cast<int>(cfg.num_attention_heads);
    s.head_dim = static_cast<int>(cfg.attention_head_dim);
    s.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(cfg.attention_head_dim)));
    s.causal = false;
    s.qk_norm = true;
    s.qk_norm_eps = static_cast<float>(cfg.qk_norm_eps);
    s.q_norm_weight = &b.norm_q;
    s.k_norm_weight = &b.norm_k;
    s.rotary_dim = cos ? static_cast<int>(cfg.rotary_dim()) : 0;
    s.cos = cos;
    s.sin = sin;
    return s;
  }

  // Out-projected self-attention of the (normalized) rows h: fused q|k|v GEMM, per-head q/k RMSNorm, RoPE when
  // tables are given, full non-causal attention over all rows.
  Tensor attention_branch(const Tensor& h, const DitAttnFfnWeights& b, const Tensor* cos, const Tensor* sin) {
    Tensor qkv = linear(h, b.qkv, nullptr, act);
    Tensor a = be.empty({h.dim(0), cfg.inner_dim()}, act);
    be.self_attention(qkv, attention_spec(b, cos, sin), a);
    return linear(a, b.out, nullptr, act);
  }

  // One RMSNorm + AdaLN modulate of the residual: the norm's weight and eps, and the table rows it reads.
  struct Modulation {
    const Tensor& weight;
    float eps;
    const Tensor& table;
    int shift_param, scale_param;
    const Tensor& rows;  // I32 [L]: the table row of every sequence row
  };

  // Block i's modulations before its attention (norm1) and before its FFN (norm2), and norm_out's after the last
  // block (spec §5.6, §5.8).
  Modulation norm1(const Request& r, size_t i) const {
    return {w.blocks[i].norm1, static_cast<float>(cfg.norm_eps), r.tables->blocks[i], kShiftMsa, kScaleMsa,
            r.adaln_rows};
  }
  Modulation norm2(const Request& r, size_t i) const {
    return {w.blocks[i].norm2, static_cast<float>(cfg.norm_eps), r.tables->blocks[i], kShiftMlp, kScaleMlp,
            r.adaln_rows};
  }
  Modulation norm_out(const Request& r) const {
    return {w.norm_out_w, static_cast<float>(cfg.final_norm_eps), r.tables->out, kOutShift, kOutScale, r.out_rows};
  }
  // The modulation that follows block i's FFN residual: block i + 1's norm1, or norm_out after the last block.
  Modulation after_block(const Request& r, size_t i) const {
    return i + 1 < w.blocks.size() ? norm1(r, i + 1) : norm_out(r);
  }

  // h = modulation m of x.
  void modulate(const Tensor& x, const Modulation& m, Tensor& h) {
    be.rms_norm_modulate(x, m.weight, m.eps, m.table, m.shift_param, m.scale_param, m.rows, h);
  }

  // x += block i's gate gate_param · branch, then h = modulation m of the updated x (one backend op: every gated
  // residual of the DiT is followed by the modulation of the same residual).
  void gated_residual_then_modulate(const Request& r, size_t i, Tensor& x, const Tensor& branch, int gate_param,
                                    const Modulation& m, Tensor& h) {
    be.gated_residual_modulate(x, branch, r.tables->blocks[i], gate_param, r.adaln_rows, m.weight, m.eps, m.table,
                               m.shift_param, m.scale_param, m.rows, h);
  }

  // SwiGLU: fc2(value · silu(gate)).
  Tensor ffn_branch(const Tensor& h, const DitAttnFfnWeights& b) {
    Tensor u = linear(h, b.fc1, nullptr, act);
    Tensor a = be.empty({h.dim(0), cfg.ffn_dim}, act);
    be.swiglu(u, w.fc1_value_first, a);
    return linear(a, b.fc2, nullptr, act);
  }

  // context_embedder → token refiner (no RoPE, no AdaLN, plain residuals) → final_norm (spec §5.3).
  Tensor refine_text(const Tensor& encoder_hidden_states) {
    const int64_t Nt = encoder_hidden_states.dim(0);
    if (Nt == 0) return be.empty({0, cfg.hidden_size}, act);
    const float eps = static_cast<float>(cfg.norm_eps);
    Tensor e = be.upload(encoder_hidden_states, act);
    Tensor x = linear(e, w.context_w, &w.context_b, act);
    Tensor h = be.empty(x.shape(), act);
    for (const DitAttnFfnWeights& b : w.refiner) {
      throw_if_cancelled();
      be.rms_norm(x, &b.norm1, eps, h);
      be.residual_add(x, attention_branch(h, b, nullptr, nullptr), nullptr);
      be.rms_norm(x, &b.norm2, eps, h);
      be.residual_add(x, ffn_branch(h, b), nullptr);
    }
    Tensor y = be.empty(x.shape(), act);
    be.rms_norm(x, &w.refiner_final_norm, static_cast<float>(cfg.final_norm_eps), y);
    return y;
  }

  // Sinusoid → time MLP (f32) → silu (f32) → rounded to the activation dtype → every block's AdaLN projection and
  // norm_out's projection (spec §5.4, §5.5, §5.8). Cached per timestep list.
  std::shared_ptr<const Tables> tables_for(const std::vector<float>& timesteps) {
    std::vector<uint32_t> key = bit_patterns(timesteps);
    if (cached_tables && cached_tables->key == key) return cached_tables;
    const int64_t T = static_cast<int64_t>(timesteps.size()), D = cfg.hidden_size;
    Tensor emb = be.upload(dit_timestep_sinusoid(cfg, timesteps), DType::F32);
    Tensor hidden = linear(emb, w.time_1_w, &w.time_1_b, DType::F32);
    Tensor hidden_act = be.empty(hidden.shape(), DType::F32);
    be.silu(hidden, hidden_act);
    Tensor temb = linear(hidden_act, w.time_2_w, &w.time_2_b, DType::F32);
    Tensor temb_act = be.empty(temb.shape(), DType::F32);
    be.silu(temb, temb_act);
    Tensor cond = be.empty(temb.shape(), act);
    be.convert(temb_act, cond);

    auto tables = std::make_shared<Tables>();
    tables->key = std::move(key);
    tables->blocks.reserve(w.blocks.size());
    for (const DitBlockWeights& b : w.blocks) {
      throw_if_cancelled();
      // Streamed: the device copy lives only for this GEMM unless the weights are kept resident.
      const Tensor weight = b.adaln_weight.defined() ? b.adaln_weight : be.upload(b.adaln_weight_host, act);
      Tensor m = linear(cond, weight, &b.adaln_bias, act);
      tables->blocks.push_back(m.reshape({kDitModalities * T, kAdaLnParams, D}));
    }
    tables->out = linear(cond, w.norm_out_linear_w, &w.norm_out_linear_b, act).reshape({T, kOutParams, D});
    ++table_builds;
    cached_tables = tables;
    return tables;
  }

  void begin_request(const DitLayout& layout_in, const Tensor& encoder_hidden_states,
                     const std::vector<float>& timesteps) {
    validate_dit_request(cfg, layout_in, encoder_hidden_states, timesteps);
    req.reset();
    Request r;
    r.L = layout_in.position_ids.dim(0);
    r.T = static_cast<int64_t>(timesteps.size());
    r.num_video = static_cast<int64_t>(layout_in.video_indices.size());
    r.num_audio = static_cast<int64_t>(layout_in.audio_indices.size());
    r.num_text = static_cast<int64_t>(layout_in.text_indices.size());
    r.token_tags = layout_in.token_tags;
    r.video_idx = index(narrow(layout_in.video_indices));
    r.audio_idx = index(narrow(layout_in.audio_indices));
    r.text_idx = index(narrow(layout_in.text_indices));
    Tensor cos, sin;
    dit_rope_tables(cfg, layout_in.position_ids, cos, sin);
    r.cos = be.upload(cos, act);  // the reference applies the tables in the activation dtype
    r.sin = be.upload(sin, act);
    r.text = refine_text(encoder_hidden_states);
    r.tables = tables_for(timesteps);
    req = std::move(r);
  }

  // An F32 head (proj_out / audio_proj_out) on the rows `idx` of the normalized sequence y.
  Tensor head(const Tensor& y, const Tensor& idx, int64_t rows, const Tensor& weight, const Tensor& bias) {
    if (rows == 0) return Tensor::empty({0, weight.dim(0)}, DType::F32);
    Tensor g = be.empty({rows, cfg.hidden_size}, DType::F32);
    be.gather_rows(y, idx, g);
    return be.download(linear(g, weight, &bias, DType::F32));
  }

  // An F32 input projection (proj_in / audio_proj_in) scattered into the packed buffer x.
  void project_in(const Tensor& rows, const Tensor& weight, const Tensor& bias, const Tensor& idx, Tensor& x) {
    if (rows.dim(0) == 0) return;
    Tensor in = be.upload(rows, DType::F32);
    be.scatter_rows(linear(in, weight, &bias, DType::F32), idx, x);
  }

  // Row → AdaLN table row (3·ti + tag) and → norm_out table row (ti) of this step, uploaded.
  void update_step_rows(Request& r, const std::vector<int64_t>& timestep_indices) {
    std::vector<int32_t> adaln_rows(r.L), out_rows(r.L);
    for (int64_t i = 0; i < r.L; ++i) {
      adaln_rows[i] = static_cast<int32_t>(timestep_indices[i] * kDitModalities + r.token_tags[i]);
      out_rows[i] = static_cast<int32_t>(timestep_indices[i]);
    }
    r.adaln_rows = index(adaln_rows);
    r.out_rows = index(out_rows);
  }

  DitOutput step(const Tensor& video_rows, const Tensor& audio_rows, const std::vector<int64_t>& timestep_indices) {
    H3_CHECK(req.has_value(), "Dit::step: no request in progress (call begin_request first)");
    Request& r = *req;
    validate_dit_step(cfg, r.num_video, r.num_audio, r.L, r.T, video_rows, audio_rows, timestep_indices);
    const int64_t L = r.L, D = cfg.hidden_size;
    update_step_rows(r, timestep_indices);

    // The packed buffer: every row written exactly once (the index sets are a partition).
    Tensor x = be.empty({L, D}, act);
    project_in(video_rows, w.proj_in_w, w.proj_in_b, r.video_idx, x);
    project_in(audio_rows, w.audio_proj_in_w, w.audio_proj_in_b, r.audio_idx, x);
    if (r.num_text) be.scatter_rows(r.text, r.text_idx, x);

    // The blocks (spec §5.6) and norm_out (§5.8): per block norm1 → attention → gated residual → norm2 → FFN →
    // gated residual, in the reference's order, each gated residual fused with the modulation that follows it
    // (there is at least one block: the config is validated).
    Tensor h = be.empty({L, D}, act);
    modulate(x, norm1(r, 0), h);
    for (size_t i = 0; i < w.blocks.size(); ++i) {
      throw_if_cancelled();  // between blocks: a cancel waits for one block, not the whole pass
      const DitBlockWeights& b = w.blocks[i];
      gated_residual_then_modulate(r, i, x, attention_branch(h, b, &r.cos, &r.sin), kGateMsa, norm2(r, i), h);
      gated_residual_then_modulate(r, i, x, ffn_branch(h, b), kGateMlp, after_block(r, i), h);
    }

    DitOutput out;
    out.sample = head(h, r.video_idx, r.num_video, w.proj_out_w, w.proj_out_b);
    out.audio_sample = head(h, r.audio_idx, r.num_audio, w.audio_proj_out_w, w.audio_proj_out_b);
    return out;
  }
};

// ---------------------------------------------------------------------------------------------------------------

Dit::Dit(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Dit::~Dit() = default;

std::unique_ptr<Dit> Dit::load(Backend& be, const Component& transformer, DitOptions opt) {
  H3_CHECK(transformer.present, transformer.name, ": component is missing");
  DitConfig cfg = load_dit_config(transformer);
  Checkpoint ck = Checkpoint::open(transformer.weights);
  const Layout keys = detect_dit_layout(ck);
  H3_CHECK(keys == transformer.layout, ck.location(), ": the tensor names follow the ", layout_name(keys),
           " layout but ", transformer.config_files.at(0), " was read as a ", layout_name(transformer.layout),
           "-layout config");
  DitWeights w = load_dit_weights(be, ck, cfg, keys, opt.keep_adaln_weights);
  return std::unique_ptr<Dit>(new Dit(std::make_unique<Impl>(be, std::move(cfg), keys, std::move(w))));
}

std::unique_ptr<Dit> Dit::from_weights(Backend& be, DitConfig cfg, Layout layout, DitWeights w) {
  cfg.validate("Dit::from_weights");
  H3_CHECK(static_cast<int64_t>(w.blocks.size()) == cfg.num_layers &&
               static_cast<int64_t>(w.refiner.size()) == cfg.num_refiner_layers,
           "Dit::from_weights: ", w.blocks.size(), " blocks and ", w.refiner.size(), " refiner blocks for a config of ",
           cfg.num_layers, " and ", cfg.num_refiner_layers);
  return std::unique_ptr<Dit>(new Dit(std::make_unique<Impl>(be, std::move(cfg), layout, std::move(w))));
}

const DitConfig& Dit::config() const { return impl_->cfg; }
Layout Dit::checkpoint_layout() const { return impl_->layout; }
int64_t Dit::adaln_table_builds() const { return impl_->table_builds; }

void Dit::begin_request(const DitLayout& layout, const Tensor& encoder_hidden_states,
                        const std::vector<float>& timesteps) {
  impl_->begin_request(layout, encoder_hidden_states, timesteps);
}

DitOutput Dit::step(const Tensor& video_rows, const Tensor& audio_rows,
                    const std::vector<int64_t>& timestep_index_per_row) {
  return impl_->step(video_rows, audio_rows, timestep_index_per_row);
}

void Dit::end_request() { impl_->req.reset(); }

DitOutput Dit::forward(const DitForwardArgs& args) {
  validate_dit_forward_args(impl_->cfg, args);
  const DitLayout layout{args.token_tags, args.position_ids, args.video_indices, args.audio_indices,
                         args.text_indices};
  struct EndRequest {
    Dit* dit;
    ~EndRequest() { dit->end_request(); }
  } end{this};
  begin_request(layout, args.encoder_hidden_states, args.timestep);
  return step(args.hidden_states, args.audio_hidden_states, args.timestep_indices);
}

}  // namespace h3
