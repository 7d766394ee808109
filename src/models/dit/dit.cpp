// The MiniMax-H3 transformer forward (spec/dit.md §5), in the reference's order, through the Backend op set only.
#include "models/dit/dit.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "io/safetensors.h"
#include "models/block_streamer.h"
#include "models/dit/dit_embed.h"
#include "models/dit/dit_fasth3.h"
#include "models/dit/dit_layers.h"
#include "models/dit/dit_token_reduction.h"
#include "models/dit/dit_weights.h"
#include "parallel/communicator.h"
#include "parallel/sequence_parallel.h"
#include "util/cancel.h"
#include "util/env.h"
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

// The VSA-H3 tiling of a request's packed rows (spec/fasth3.md §2): the generated video grid must be the packed
// tail; the prefix segments are FastVideo's (text rows, conditioning video rows, audio rows), zero-length dropped.
VsaTiling request_tiling(const DitLayout& layout, int64_t tile_elems) {
  const std::array<int64_t, 3>& g = layout.target_video_grid;
  const int64_t L = layout.position_ids.dim(0), Nv = static_cast<int64_t>(layout.video_indices.size());
  const int64_t G = g[0] * g[1] * g[2];
  H3_CHECK(g[0] > 0 && g[1] > 0 && g[2] > 0 && G <= Nv, "the sparse attention needs the generated video's grid ",
           "(frames, patch rows, patch columns) of at most the ", Nv, " video rows, got (", g[0], ", ", g[1], ", ",
           g[2], ")");
  for (int64_t i = 0; i < G; ++i)
    H3_CHECK(layout.video_indices[Nv - G + i] == L - G + i, "the sparse attention needs the generated video rows as ",
             "the packed sequence's last ", G, " rows, but generated video row ", i, " is packed row ",
             layout.video_indices[Nv - G + i]);
  return vsa_tiling({static_cast<int64_t>(layout.text_indices.size()), Nv - G,
                     static_cast<int64_t>(layout.audio_indices.size())},
                    g, tile_elems);
}

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
  // The AdaLN tables of one timestep list, per checkpoint block: computed for the blocks a request runs, and for
  // every block when a request ranks them (--layers), then kept for the blocks that run only.
  struct Tables {
    std::vector<uint32_t> key;   // bit patterns of the timesteps
    Tensor cond;                 // silu(time MLP) rows [T, time_embed_dim], activation dtype: every table's input
    std::vector<Tensor> blocks;  // per checkpoint block [kDitModalities·T, kAdaLnParams, hidden] (row 3·ti + tag), or
                                 // undefined
    Tensor out;                  // [T, kOutParams, hidden]
    std::vector<double> gate_scores;  // per checkpoint block (dit_gate_score), once a request has ranked them
  };

  // The rows one run of blocks computes over: the full sequence, or the reduced one inside token reduction's window.
  struct Rows {
    Tensor* x = nullptr;              // the residual stream [rows, hidden]
    Tensor* h = nullptr;              // the modulated rows [rows, hidden]
    // The modulated rows in FP8 instead, when the product that reads them is FP8 (--precision fp8: the modulation
    // quantizes as it writes them, and h is not written); undefined otherwise.
    Fp8Activation* hq = nullptr;
    const Tensor* adaln_rows = nullptr;  // I32 [rows]: each row's AdaLN table row at this step
    const Tensor* cos = nullptr;
    const Tensor* sin = nullptr;
  };

  // This rank's part of a sequence-parallel request: its packed rows [begin, end), every rank's row count (rank
  // order), and the row gathers that turn the all-to-all buffers into the layouts the ops read.
  struct Shard {
    int64_t begin = 0, end = 0;
    std::vector<int64_t> rows;
    Tensor local;     // I32 [end − begin]: begin, ..., end − 1 (the rows of the whole packed buffer this rank keeps)
    // q|k|v [rows, 3·H·Dh] viewed as [rows·3·N, Hn·Dh] (row (i·3 + s)·N + j: part s of head group j of row i) →
    // per destination rank j, its rows' q, k, v of head group j: row (j·rows + i)·3 + s.
    Tensor to_heads;
    // The attention output received back, [N·rows, Hn·Dh] (row j·rows + i: head group j of row i) → [rows, H·Dh]
    // viewed as [rows·N, Hn·Dh] (row i·N + j).
    Tensor to_rows;
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
    DitRequestOptions options;
    std::vector<int64_t> blocks;  // the checkpoint blocks this request runs, ascending
    int64_t steps = 0;            // steps run so far
    // Token reduction (when on): its window, the pairs (I32 [R, 2] backend; their first members on the host), the
    // reduced rows' rotary tables and, per step, their AdaLN table rows.
    std::optional<TokenReductionWindow> reduction;
    Tensor pairs;
    std::vector<int32_t> pair_first;
    Tensor reduced_cos, reduced_sin, reduced_adaln_rows;
    // Core reuse (core_reuse > 1): the residual the last refresh held ([L, hidden], undefined before the first) and
    // −1 per channel (residual_add's scale makes the subtraction).
    Tensor core_residual, minus_one;
    // The sparse attention's tiles of the packed rows (DitRequestOptions::sparse_attention), else absent, and the
    // video key tiles each video query tile keeps (vsa_kept_video_tiles: all of them is dense routing).
    std::optional<SparseTiles> tiles;
    int64_t kept_video_tiles = 0;
    // Sequence parallelism (Dit::set_communicator), else absent.
    std::optional<Shard> shard;
  };

  Backend& be;
  DitConfig cfg;
  Layout layout;
  DitWeights w;
  DType act;
  DitBlockLoader reload_block;  // where missing blocks load from (absent for from_weights without a loader)
  // DitOptions::streaming: the blocks' four matrices (dit_streamed_tensors) stream through this ring and are never
  // resident; their norms are.
  std::unique_ptr<BlockStreamer> streamer;
  std::shared_ptr<Tables> cached_tables;
  int64_t table_builds = 0;
  std::optional<Request> req;
  bool gates = false;  // Dit::has_gates
  Communicator* comm = nullptr;  // Dit::set_communicator

  DitPrecision precision;

  Impl(Backend& backend, DitConfig c, Layout l, DitWeights weights, DitPrecision p)
      : be(backend), cfg(std::move(c)), layout(l), w(std::move(weights)), act(backend.activation_dtype()),
        precision(p) {
    for (DitBlockWeights& b : w.blocks) quantize_block(b);
  }

  // --precision fp8: block b's four products to FP8 where their shapes allow it (DitPrecision).
  void quantize_block(DitAttnFfnWeights& b) {
    if (!precision.fp8) return;
    const auto to_fp8 = [&](Tensor& weight, Fp8Weight& q) {
      if (!weight.defined() || weight.dim(0) % 16 != 0 || weight.dim(1) % 16 != 0) return;
      q = be.quantize_weight_fp8(weight, precision.fp8_scaling);
      weight = Tensor();
    };
    to_fp8(b.qkv, b.fp8.qkv);
    to_fp8(b.out, b.fp8.out);
    to_fp8(b.fc1, b.fp8.fc1);
    to_fp8(b.fc2, b.fp8.fc2);
  }

  int64_t num_blocks() const { return static_cast<int64_t>(w.blocks.size()); }

  // y [rows(x), out_features] = x · Wᵀ (+ b), stored in `dt`.
  Tensor linear(const Tensor& x, const Tensor& weight, const Tensor* bias, DType dt) {
    Tensor y = be.empty({x.dim(0), weight.dim(0)}, dt);
    be.linear(x, weight, bias, y);
    return y;
  }

  // A block product of the rows x, or of their FP8 form xq when the producer of the rows made one (then fp8 is
  // defined: producers quantize for FP8 readers only).
  Tensor linear(const Tensor& x, const Fp8Activation* xq, const Tensor& weight, const Fp8Weight& fp8, DType dt) {
    if (xq && xq->defined()) {
      Tensor y = be.empty({xq->rows, fp8.data.dim(0)}, dt);
      be.linear_fp8_quantized(*xq, fp8, nullptr, y);
      return y;
    }
    if (!fp8.defined()) return linear(x, weight, nullptr, dt);
    Tensor y = be.empty({x.dim(0), fp8.data.dim(0)}, dt);
    be.linear_fp8(x, fp8, nullptr, y);
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

  // Out-projected self-attention of the (normalized) rows h (or their FP8 form hq): fused q|k|v GEMM, per-head q/k
  // RMSNorm, RoPE when tables are given, full non-causal attention over all rows, computed in FP8 when
  // `attention_in_fp8`; an FP8 out product reads the attention's output quantized by self_attention_fp8.
  Tensor attention_branch(const Tensor& h, const Fp8Activation* hq, const DitAttnFfnWeights& b, const Tensor* cos,
                          const Tensor* sin, bool attention_in_fp8) {
    Tensor qkv = linear(h, hq, b.qkv, b.fp8.qkv, act);
    const AttentionSpec spec = attention_spec(b, cos, sin);
    if (b.fp8.out.defined()) {
      Fp8Activation aq;
      be.self_attention_fp8(qkv, spec, attention_in_fp8, b.fp8.out.scaling, aq);
      return linear(Tensor(), &aq, b.out, b.fp8.out, act);
    }
    Tensor a = be.empty({qkv.dim(0), cfg.inner_dim()}, act);
    if (attention_in_fp8)
      be.self_attention_in_fp8(qkv, spec, a);
    else
      be.self_attention(qkv, spec, a);
    return linear(a, nullptr, b.out, b.fp8.out, act);
  }

  // A main block's attention: dense, or VSA-H3 with the request's tiles (spec/fasth3.md §1; FastVideo's
  // MiniMaxH3Attention.forward and MiniMaxH3VSAImpl.forward) through the backend's block-sparse ops: q/k/v as the
  // dense path makes them (fused GEMM, q/k RMSNorm, RoPE); the tile means and scores when they route (sparsity
  // keeping fewer than all video tiles) or feed the pooled branch; the attention over the routed key tiles (all of
  // them otherwise: dense); with a non-zero gate, the pooled branch gated by to_gate_compress(h); then to_out.
  // `gate_compress`: the block's to_gate_compress weight (undefined: none, or all zero).
  Tensor main_attention(const Request& r, const DitAttnFfnWeights& b, const Tensor& gate_compress, const Rows& rows) {
    if (r.shard) return ulysses_attention(*r.shard, b, rows);
    if (!r.tiles) return attention_branch(*rows.h, rows.hq, b, rows.cos, rows.sin, precision.fp8_attention);
    const Tensor& h = *rows.h;
    const SparseTiles& tiles = *r.tiles;
    const int64_t L = h.dim(0), H = cfg.num_attention_heads, Dh = cfg.attention_head_dim, inner = cfg.inner_dim();
    const int64_t n = tiles.tiles;
    // (h is bf16 here: qkv_reader gives the sparse path no FP8 rows; an FP8 product quantizes them itself.)
    Tensor qkv = linear(h, nullptr, b.qkv, b.fp8.qkv, act);
    be.qk_norm_rope(qkv, attention_spec(b, rows.cos, rows.sin));
    const bool route = r.kept_video_tiles < n - tiles.prefix_tiles, gated = gate_compress.defined();
    Tensor scores;
    if (route || gated) {
      Tensor q_means = be.empty({H, n, Dh}, DType::F32), k_means = be.empty({H, n, Dh}, DType::F32);
      be.tile_means(qkv, 0, H, Dh, tiles, q_means);
      be.tile_means(qkv, inner, H, Dh, tiles, k_means);
      scores = be.empty({H, n, n}, DType::F32);
      be.tile_scores(q_means, k_means, scores);
    }
    SparseKeyTiles lists;
    if (route)
      be.route_key_tiles(scores, tiles, r.kept_video_tiles,
                         r.options.sparse_attention->vsa.mode == VsaMode::kCompete, lists);
    Tensor a = be.empty({L, inner}, act);
    be.block_sparse_attention(qkv, H, Dh, tiles, route ? &lists : nullptr, a);
    if (gated) {
      Tensor v_means = be.empty({H, n, Dh}, DType::F32);
      be.tile_means(qkv, 2 * inner, H, Dh, tiles, v_means);
      be.add_pooled_attention(scores, v_means, linear(h, gate_compress, nullptr, act), tiles, a);
    }
    return linear(a, nullptr, b.out, b.fp8.out, act);
  }

  // attention_branch over a sequence-parallel shard (Ulysses; Dit::set_communicator): the q|k|v GEMM of this rank's
  // rows, an all-to-all that gives every rank all rows of its num_attention_heads / N heads (head group rank()), the
  // attention over them with the rotary tables of all rows (q/k RMSNorm and RoPE are per row and head: the same
  // arithmetic as unsharded), an all-to-all back to the rows' ranks, and to_out on this rank's rows.
  Tensor ulysses_attention(const Shard& s, const DitAttnFfnWeights& b, const Rows& rows) {
    const int N = comm->size();
    const int64_t Lr = s.end - s.begin, L = s.rows.empty() ? 0 : chunk_offsets(s.rows).back();
    const int64_t W = cfg.num_attention_heads / N * cfg.attention_head_dim;  // one head group's channels
    // (rows.h is bf16 here: qkv_reader gives the shard path no FP8 rows; an FP8 product quantizes them itself.)
    Tensor qkv = linear(*rows.h, nullptr, b.qkv, b.fp8.qkv, act);
    Tensor send = be.empty({Lr * 3 * N, W}, act);
    be.gather_rows(qkv.reshape({Lr * 3 * N, W}), s.to_heads, send);
    Tensor heads = be.empty({L, 3 * W}, act);
    std::vector<int64_t> send_counts(N, Lr * 3 * W), recv_counts(N);
    for (int j = 0; j < N; ++j) recv_counts[j] = s.rows[j] * 3 * W;
    comm->all_to_all(send, send_counts, heads, recv_counts);
    AttentionSpec spec = attention_spec(b, rows.cos, rows.sin);
    spec.heads_q = spec.heads_kv = static_cast<int>(cfg.num_attention_heads / N);
    Tensor a = be.empty({L, W}, act);
    be.self_attention(heads, spec, a);
    Tensor back = be.empty({N * Lr, W}, act);
    for (int j = 0; j < N; ++j) send_counts[j] = s.rows[j] * W;
    comm->all_to_all(a, send_counts, back, std::vector<int64_t>(N, Lr * W));
    Tensor o = be.empty({Lr * N, W}, act);
    be.gather_rows(back, s.to_rows, o);
    return linear(o.reshape({Lr, cfg.inner_dim()}), nullptr, b.out, b.fp8.out, act);
  }

  // The shard of `rank` of a request of L rows (Dit::set_communicator) and its gathers.
  Shard make_shard(int64_t L) {
    const int N = comm->size(), rank = comm->rank();
    Shard s;
    s.rows = shard_rows(L, N);
    s.begin = chunk_offsets(s.rows)[rank];
    s.end = s.begin + s.rows[rank];
    const int64_t Lr = s.end - s.begin;
    std::vector<int32_t> local(Lr), to_heads(Lr * 3 * N), to_rows(Lr * N);
    for (int64_t i = 0; i < Lr; ++i) local[i] = static_cast<int32_t>(s.begin + i);
    for (int64_t j = 0; j < N; ++j)
      for (int64_t i = 0; i < Lr; ++i) {
        for (int64_t part = 0; part < 3; ++part)
          to_heads[(j * Lr + i) * 3 + part] = static_cast<int32_t>((i * 3 + part) * N + j);
        to_rows[i * N + j] = static_cast<int32_t>(j * Lr + i);
      }
    s.local = index(local);
    s.to_heads = index(to_heads);
    s.to_rows = index(to_rows);
    return s;
  }

  // A sequence-parallel request's refusals (Dit::set_communicator), before any work: the controls whose rows or
  // weights do not split by rows yet.
  void check_parallel_request(const DitRequestOptions& options, int64_t L) const {
    const int N = comm->size();
    const char* unsupported = options.token_reduction ? "--token-reduction (its row pairs cross the shards)"
                              : options.sparse_attention ? "the sparse attention (VSA-H3 tiles the whole sequence)"
                              : streamer ? "streamed transformer blocks (a smaller --memory-budget's plan)"
                                         : nullptr;
    H3_CHECK(!unsupported, "the transformer on ", N, " GPUs does not support ", unsupported,
             " yet: run it on one GPU, or without it");
    H3_CHECK(L >= N, "the transformer on ", N, " GPUs needs at least one packed row per GPU, got ", L, " rows");
  }

  // One RMSNorm + AdaLN modulate of the residual: the norm's weight and eps, and the table rows it reads.
  struct Modulation {
    const Tensor& weight;
    float eps;
    const Tensor& table;
    int shift_param, scale_param;
    const Tensor& rows;  // I32 [rows]: the table row of every row modulated
  };

  // Checkpoint block b's modulations before its attention (norm1) and before its FFN (norm2), over the rows `rows`
  // indexes, and norm_out's after the last block (spec §5.6, §5.8).
  Modulation norm1(const Request& r, int64_t b, const Rows& rows) const {
    return {w.blocks[b].norm1, static_cast<float>(cfg.norm_eps), r.tables->blocks[b], kShiftMsa, kScaleMsa,
            *rows.adaln_rows};
  }
  Modulation norm2(const Request& r, int64_t b, const Rows& rows) const {
    return {w.blocks[b].norm2, static_cast<float>(cfg.norm_eps), r.tables->blocks[b], kShiftMlp, kScaleMlp,
            *rows.adaln_rows};
  }
  Modulation norm_out(const Request& r) const {
    return {w.norm_out_w, static_cast<float>(cfg.final_norm_eps), r.tables->out, kOutShift, kOutScale, r.out_rows};
  }

  // h = modulation m of x.
  void modulate(const Tensor& x, const Modulation& m, Tensor& h) {
    be.rms_norm_modulate(x, m.weight, m.eps, m.table, m.shift_param, m.scale_param, m.rows, h);
  }

  // The FP8 weight of the product that reads the modulated rows next, or null where that product is bf16: block
  // b's q|k|v (after norm1; the sparse attention's and a sequence-parallel shard's run in bf16) and fc1 (after
  // norm2).
  const Fp8Weight* qkv_reader(const Request& r, int64_t b) const {
    const Fp8Weight& q = w.blocks[b].fp8.qkv;
    return q.defined() && !r.tiles && !r.shard ? &q : nullptr;
  }
  const Fp8Weight* fc1_reader(int64_t b) const {
    const Fp8Weight& q = w.blocks[b].fp8.fc1;
    return q.defined() ? &q : nullptr;
  }

  // rows.h (or rows.hq, quantized for `reader`) = modulation m of rows.x.
  void modulate(Rows& rows, const Modulation& m, const Fp8Weight* reader) {
    *rows.hq = Fp8Activation();
    if (!reader) return modulate(*rows.x, m, *rows.h);
    be.rms_norm_modulate_fp8(*rows.x, m.weight, m.eps, m.table, m.shift_param, m.scale_param, m.rows,
                             reader->scaling, *rows.hq);
  }

  // x += block b's gate gate_param · branch, then h = modulation m of the updated x (one backend op: every gated
  // residual of the DiT is followed by the modulation of the same residual, except before a token-reduction
  // boundary); quantized into rows.hq instead of h when the next reader is FP8.
  void gated_residual_then_modulate(const Request& r, int64_t b, Rows& rows, const Tensor& branch, int gate_param,
                                    const Modulation& m, const Fp8Weight* reader = nullptr) {
    *rows.hq = Fp8Activation();
    if (reader) {
      be.gated_residual_modulate_fp8(*rows.x, branch, r.tables->blocks[b], gate_param, *rows.adaln_rows, m.weight,
                                     m.eps, m.table, m.shift_param, m.scale_param, m.rows, reader->scaling,
                                     *rows.hq);
      return;
    }
    be.gated_residual_modulate(*rows.x, branch, r.tables->blocks[b], gate_param, *rows.adaln_rows, m.weight, m.eps,
                               m.table, m.shift_param, m.scale_param, m.rows, *rows.h);
  }

  // SwiGLU: fc2(value · silu(gate)), of the rows h (or their FP8 form hq); an FP8 fc2 reads the SwiGLU quantized
  // by swiglu_fp8.
  Tensor ffn_branch(const Tensor& h, const Fp8Activation* hq, const DitAttnFfnWeights& b) {
    Tensor u = linear(h, hq, b.fc1, b.fp8.fc1, act);
    if (b.fp8.fc2.defined()) {
      Fp8Activation aq;
      be.swiglu_fp8(u, w.fc1_value_first, b.fp8.fc2.scaling, aq);
      return linear(Tensor(), &aq, b.fc2, b.fp8.fc2, act);
    }
    Tensor a = be.empty({u.dim(0), cfg.ffn_dim}, act);
    be.swiglu(u, w.fc1_value_first, a);
    return linear(a, nullptr, b.fc2, b.fp8.fc2, act);
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
      be.residual_add(x, attention_branch(h, nullptr, b, nullptr, nullptr, false), nullptr);
      be.rms_norm(x, &b.norm2, eps, h);
      be.residual_add(x, ffn_branch(h, nullptr, b), nullptr);
    }
    Tensor y = be.empty(x.shape(), act);
    be.rms_norm(x, &w.refiner_final_norm, static_cast<float>(cfg.final_norm_eps), y);
    return y;
  }

  // The cached tables of a timestep list, made when the list is new: sinusoid → time MLP (f32) → silu (f32) →
  // rounded to the activation dtype → norm_out's projection (spec §5.4, §5.5, §5.8); no block's table yet.
  Tables& tables_entry(const std::vector<float>& timesteps) {
    std::vector<uint32_t> key = bit_patterns(timesteps);
    if (cached_tables && cached_tables->key == key) return *cached_tables;
    const int64_t T = static_cast<int64_t>(timesteps.size()), D = cfg.hidden_size;
    Tensor emb = be.upload(dit_timestep_sinusoid(cfg, timesteps), DType::F32);
    Tensor hidden = linear(emb, w.time_1_w, &w.time_1_b, DType::F32);
    Tensor hidden_act = be.empty(hidden.shape(), DType::F32);
    be.silu(hidden, hidden_act);
    Tensor temb = linear(hidden_act, w.time_2_w, &w.time_2_b, DType::F32);
    Tensor temb_act = be.empty(temb.shape(), DType::F32);
    be.silu(temb, temb_act);
    auto tables = std::make_shared<Tables>();
    tables->key = std::move(key);
    tables->cond = be.empty(temb.shape(), act);
    be.convert(temb_act, tables->cond);
    tables->blocks.resize(w.blocks.size());
    tables->out = linear(tables->cond, w.norm_out_linear_w, &w.norm_out_linear_b, act).reshape({T, kOutParams, D});
    ++table_builds;
    cached_tables = tables;
    return *tables;
  }

  // Block b's AdaLN table in `t` (spec §5.5), computed when missing. Streamed: the device copy of the projection
  // lives only for this GEMM unless the weights are kept resident.
  const Tensor& block_table(Tables& t, int64_t b) {
    if (t.blocks[b].defined()) return t.blocks[b];
    throw_if_cancelled();  // between the blocks' tables
    const DitBlockWeights& bw = w.blocks[b];
    const Tensor weight = bw.adaln_weight.defined() ? bw.adaln_weight : be.upload(bw.adaln_weight_host, act);
    const int64_t T = t.cond.dim(0);
    t.blocks[b] = linear(t.cond, weight, &bw.adaln_bias, act).reshape({kDitModalities * T, kAdaLnParams, cfg.hidden_size});
    return t.blocks[b];
  }

  // h3.c's ranking scores of every checkpoint block over `t`'s timesteps (computing every block's table once).
  const std::vector<double>& gate_scores(Tables& t) {
    if (t.gate_scores.empty())
      for (int64_t b = 0; b < num_blocks(); ++b) t.gate_scores.push_back(dit_gate_score(be.download(block_table(t, b))));
    return t.gate_scores;
  }

  std::vector<int64_t> select_blocks(const std::vector<float>& timesteps, std::optional<int64_t> layers) {
    std::vector<int64_t> kept;
    Tables& t = tables_entry(timesteps);
    if (layers && *layers < num_blocks()) {
      kept = thin_by_gate_scores(gate_scores(t), *layers);
    } else {
      for (int64_t b = 0; b < num_blocks(); ++b) kept.push_back(b);
    }
    std::vector<bool> run(w.blocks.size(), false);
    for (int64_t b : kept) run[b] = true;
    // Freed first, so that a change of blocks never holds both sets.
    for (int64_t b = 0; b < num_blocks(); ++b)
      if (!run[b]) {
        if (!streamer) w.blocks[b].release();
        t.blocks[b] = Tensor();
      }
    if (streamer) return kept;  // the passes stream exactly these
    for (int64_t b : kept) {
      if (w.blocks[b].resident()) continue;
      H3_CHECK(static_cast<bool>(reload_block), "this transformer was made from weights in memory: block ", b,
               ", which an earlier request's --layers dropped, cannot be loaded again");
      reload_block(b, w.blocks[b]);
      quantize_block(w.blocks[b]);
    }
    return kept;
  }

  // Dit::check_request.
  void check_request(const DitLayout& layout_in, const Tensor& encoder_hidden_states,
                     const std::vector<float>& timesteps, const DitRequestOptions& options) const {
    validate_dit_request(cfg, layout_in, encoder_hidden_states, timesteps);
    validate_dit_request_options(cfg, options);
    if (comm) check_parallel_request(options, layout_in.position_ids.dim(0));
    if (options.sparse_attention) {
      H3_CHECK(!streamer, "the sparse attention (VSA-H3) needs the blocks resident (their to_gate_compress weights "
                          "do not stream yet): give a larger --memory-budget, or --attention dense");
    }
  }

  // Dit::check_step.
  int64_t check_step(const Tensor& video_rows, const Tensor& audio_rows, const std::vector<int64_t>& timestep_indices,
                     std::optional<int64_t> pass_in) const {
    H3_CHECK(req.has_value(), "Dit::step: no request in progress (call begin_request first)");
    const Request& r = *req;
    validate_dit_step(cfg, r.num_video, r.num_audio, r.L, r.T, video_rows, audio_rows, timestep_indices);
    const int64_t pass = pass_in.value_or(r.steps);
    H3_CHECK(pass >= 0 && (r.options.passes == 0 || pass < r.options.passes), "Dit::step: pass ", pass,
             " is outside the request's ", r.options.passes, " passes");
    return pass;
  }

  void begin_request(const DitLayout& layout_in, const Tensor& encoder_hidden_states,
                     const std::vector<float>& timesteps, const DitRequestOptions& options) {
    check_request(layout_in, encoder_hidden_states, timesteps, options);
    std::optional<VsaTiling> tiling;
    int64_t kept_video_tiles = 0;
    if (options.sparse_attention) {
      tiling = request_tiling(layout_in, options.sparse_attention->tile_elems);
      kept_video_tiles = vsa_kept_video_tiles(options.sparse_attention->vsa.sparsity, tiling->num_video_tiles);
    }
    const bool reduce = options.token_reduction && !env_flag("H3_DISABLE_TOKEN_REDUCTION");
    const std::optional<TokenReductionWindow> window =
        reduce ? std::optional(token_reduction_window(cfg.num_layers)) : std::nullopt;
    const std::optional<TokenPairs> pairs = reduce ? std::optional(token_pairs(layout_in)) : std::nullopt;
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
    r.options = options;
    if (tiling) r.tiles = make_sparse_tiles(be, std::move(*tiling));
    r.kept_video_tiles = kept_video_tiles;
    r.blocks = select_blocks(timesteps, options.layers);
    Tables& t = tables_entry(timesteps);
    for (int64_t b : r.blocks) block_table(t, b);
    r.tables = cached_tables;
    if (window) {
      r.reduction = window;
      r.pairs = be.upload(pairs->pairs, DType::I32);
      for (int64_t i = 0; i < pairs->pairs.dim(0); ++i) r.pair_first.push_back(pairs->pairs.ptr<int32_t>()[2 * i]);
      dit_rope_tables(cfg, pairs->positions, cos, sin);
      r.reduced_cos = be.upload(cos, act);
      r.reduced_sin = be.upload(sin, act);
    }
    if (options.core_reuse > 1) {
      r.minus_one = be.empty({cfg.hidden_size}, act);
      be.fill(r.minus_one, -1.f);
    }
    if (comm) r.shard = make_shard(r.L);
    req = std::move(r);
  }

  // A shard's rows of the packed buffer x, and every rank's rows gathered from this rank's part.
  Tensor local_rows(const Shard& s, const Tensor& x) {
    Tensor part = be.empty({s.end - s.begin, x.dim(1)}, x.dtype());
    be.gather_rows(x, s.local, part);
    return part;
  }
  Tensor all_rows(const Shard& s, const Tensor& part) {
    const int64_t D = part.dim(1);
    std::vector<int64_t> counts;
    for (int64_t n : s.rows) counts.push_back(n * D);
    Tensor all = be.empty({chunk_offsets(s.rows).back(), D}, part.dtype());
    comm->all_gather(part, counts, all);
    return all;
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

  // Row → AdaLN table row (3·ti + tag) and → norm_out table row (ti) of this step, uploaded; and the reduced rows'
  // (a pair's first member's: both members are one frame's, of one timestep and tag).
  // Sharded: this rank's rows only.
  void update_step_rows(Request& r, const std::vector<int64_t>& timestep_indices) {
    const int64_t begin = r.shard ? r.shard->begin : 0, end = r.shard ? r.shard->end : r.L;
    std::vector<int32_t> adaln_rows(end - begin), out_rows(end - begin);
    for (int64_t i = begin; i < end; ++i) {
      adaln_rows[i - begin] = static_cast<int32_t>(timestep_indices[i] * kDitModalities + r.token_tags[i]);
      out_rows[i - begin] = static_cast<int32_t>(timestep_indices[i]);
    }
    r.adaln_rows = index(adaln_rows);
    r.out_rows = index(out_rows);
    if (!r.reduction) return;
    std::vector<int32_t> reduced(r.pair_first.size());
    for (size_t i = 0; i < reduced.size(); ++i) reduced[i] = adaln_rows[r.pair_first[i]];
    r.reduced_adaln_rows = index(reduced);
  }

  // Block b's weights with the matrices of its slot (`matrices`, in dit_streamed_tensors order) in `out`.
  const DitAttnFfnWeights& streamed_block(int64_t b, const std::vector<Tensor>& matrices, DitAttnFfnWeights& out) {
    out = w.blocks[b];
    const std::vector<Tensor*> slots = dit_streamed_tensors(out);
    for (size_t i = 0; i < slots.size(); ++i) *slots[i] = matrices[i];
    return out;
  }

  // The blocks (spec §5.6) and norm_out (§5.8) over the packed rows x, leaving norm_out's modulation in h: per block
  // norm1 → attention → gated residual → norm2 → FFN → gated residual, in the reference's order, each gated residual
  // fused with the modulation that follows it. Inside token reduction's window the blocks run over the reduced rows,
  // pooled from x on entering and restored into x on leaving.
  void run_core(Request& r, Tensor& x, Tensor& h, int64_t pass) {
    const std::vector<int64_t>& blocks = r.blocks;
    const auto reduced_at = [&](size_t k) { return r.reduction && r.reduction->reduces(blocks[k], pass); };
    const int64_t D = cfg.hidden_size;
    Tensor xr, hr;  // the reduced rows, inside the window
    Fp8Activation hq, hrq;
    Rows full{&x, &h, &hq, &r.adaln_rows, &r.cos, &r.sin};
    Rows reduced{&xr, &hr, &hrq, &r.reduced_adaln_rows, &r.reduced_cos, &r.reduced_sin};
    bool inside = false;
    if (streamer) streamer->begin_pass(blocks);
    DitAttnFfnWeights streamed;  // a streamed block: its resident norms and its slot's matrices
    for (size_t k = 0; k < blocks.size(); ++k) {
      throw_if_cancelled();  // between blocks: a cancel waits for one block, not the whole pass
      const int64_t b = blocks[k];
      if (k == 0 || reduced_at(k) != inside) {
        if (reduced_at(k) && !inside) {
          xr = be.empty({r.pairs.dim(0), D}, act);
          hr = be.empty({r.pairs.dim(0), D}, act);
          be.pool_row_pairs(x, r.pairs, xr);
        } else if (inside) {
          be.unpool_row_pairs(xr, r.pairs, x);
        }
        inside = reduced_at(k);
        Rows& rows = inside ? reduced : full;
        modulate(rows, norm1(r, b, rows), qkv_reader(r, b));
      }
      Rows& rows = inside ? reduced : full;
      const DitAttnFfnWeights& bw = streamer ? streamed_block(b, streamer->acquire(k), streamed) : w.blocks[b];
      gated_residual_then_modulate(r, b, rows, main_attention(r, bw, w.blocks[b].gate_compress, rows), kGateMsa,
                                   norm2(r, b, rows), fc1_reader(b));
      const Tensor f = ffn_branch(*rows.h, rows.hq, bw);
      if (k + 1 < blocks.size() && reduced_at(k + 1) == inside)
        gated_residual_then_modulate(r, b, rows, f, kGateMlp, norm1(r, blocks[k + 1], rows),
                                     qkv_reader(r, blocks[k + 1]));
      else if (k + 1 == blocks.size() && !inside)
        gated_residual_then_modulate(r, b, rows, f, kGateMlp, norm_out(r));
      else
        be.gated_residual(*rows.x, f, r.tables->blocks[b], kGateMlp, *rows.adaln_rows);
      if (streamer) streamer->release(k);
    }
    if (inside) {
      be.unpool_row_pairs(xr, r.pairs, x);
      modulate(x, norm_out(r), h);
    }
  }

  DitOutput step(const Tensor& video_rows, const Tensor& audio_rows, const std::vector<int64_t>& timestep_indices,
                 std::optional<int64_t> pass_in) {
    const int64_t pass = check_step(video_rows, audio_rows, timestep_indices, pass_in);
    Request& r = *req;
    const int64_t L = r.L, D = cfg.hidden_size;
    update_step_rows(r, timestep_indices);

    // The packed buffer: every row written exactly once (the index sets are a partition). Sharded: this rank keeps
    // its rows, the blocks run over them, and every rank's normalized rows are gathered before the heads.
    Tensor x = be.empty({L, D}, act);
    project_in(video_rows, w.proj_in_w, w.proj_in_b, r.video_idx, x);
    project_in(audio_rows, w.audio_proj_in_w, w.audio_proj_in_b, r.audio_idx, x);
    if (r.num_text) be.scatter_rows(r.text, r.text_idx, x);
    if (r.shard) x = local_rows(*r.shard, x);
    const int64_t rows = x.dim(0);

    Tensor h = be.empty({rows, D}, act);
    const int64_t every = r.options.core_reuse;
    const bool refresh = every == 1 || !r.core_residual.defined() || r.steps % every == 0 ||
                         pass + 1 == r.options.passes;
    if (refresh) {
      Tensor core_input;
      if (every > 1) {
        core_input = be.empty({rows, D}, act);
        be.convert(x, core_input);
      }
      run_core(r, x, h, pass);
      if (every > 1) {
        r.core_residual = be.empty({rows, D}, act);
        be.convert(x, r.core_residual);
        be.residual_add(r.core_residual, core_input, &r.minus_one);
      }
    } else {
      be.residual_add(x, r.core_residual, nullptr);
      modulate(x, norm_out(r), h);
    }
    ++r.steps;
    if (r.shard) h = all_rows(*r.shard, h);

    DitOutput out;
    out.sample = head(h, r.video_idx, r.num_video, w.proj_out_w, w.proj_out_b);
    out.audio_sample = head(h, r.audio_idx, r.num_audio, w.audio_proj_out_w, w.audio_proj_out_b);
    return out;
  }
};

// ---------------------------------------------------------------------------------------------------------------

Dit::Dit(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Dit::~Dit() = default;

namespace {

// The streaming options of a transformer (models/block_streamer.h), and the rule that FP8 blocks stay resident.
void validate_dit_streaming(const std::optional<BlockStreaming>& streaming, const DitPrecision& precision,
                            const char* what) {
  if (!streaming) return;
  validate_block_streaming(*streaming, what);
  H3_CHECK(!precision.fp8, what,
           ": --precision fp8 quantizes resident blocks; with streamed blocks it is not supported yet (use bf16)");
}

}  // namespace

std::unique_ptr<Dit> Dit::load(Backend& be, const Component& transformer, DitOptions opt) {
  H3_CHECK(transformer.present, transformer.name, ": component is missing");
  DitConfig cfg = load_dit_config(transformer);
  Checkpoint ck = Checkpoint::open(transformer.weights);
  const Layout keys = detect_dit_layout(ck);
  H3_CHECK(keys == transformer.layout, ck.location(), ": the tensor names follow the ", layout_name(keys),
           " layout but ", transformer.config_files.at(0), " was read as a ", layout_name(transformer.layout),
           "-layout config");
  if (opt.blocks)
    for (int64_t b : *opt.blocks)
      H3_CHECK(b >= 0 && b < cfg.num_layers, "Dit::load: block ", b, " is outside the transformer's ", cfg.num_layers,
               " blocks");
  validate_dit_streaming(opt.streaming, opt.precision, ck.location().c_str());
  // Streamed: no block's matrices are loaded here (the streamer makes its host copies from load_dit_block's).
  DitWeights w = load_dit_weights(be, ck, cfg, keys, opt.keep_adaln_weights,
                                  opt.streaming ? std::optional(std::vector<int64_t>{}) : opt.blocks);
  if (opt.streaming)
    for (int64_t b = 0; b < cfg.num_layers; ++b)
      load_dit_block_norms(be, ck, cfg, keys, opt.keep_adaln_weights, b, w.blocks[b]);
  const bool gates = dit_has_gates(ck, cfg, keys);
  auto impl = std::make_unique<Impl>(be, std::move(cfg), keys, std::move(w), opt.precision);
  impl->gates = gates;
  auto checkpoint = std::make_shared<const Checkpoint>(std::move(ck));
  impl->reload_block = [&be, checkpoint, cfg = impl->cfg, keys, keep = opt.keep_adaln_weights](int64_t b,
                                                                                              DitBlockWeights& out) {
    load_dit_block(be, *checkpoint, cfg, keys, keep, b, out);
  };
  if (opt.streaming) {
    std::vector<int64_t> preload = opt.blocks.value_or(std::vector<int64_t>{});
    if (!opt.blocks)
      for (int64_t b = 0; b < impl->cfg.num_layers; ++b) preload.push_back(b);
    auto describe = [checkpoint, cfg = impl->cfg, keys](int64_t b) {
      return dit_streamed_block(*checkpoint, cfg, keys, b);
    };
    auto resident = [reload = impl->reload_block](int64_t b) {
      DitBlockWeights made;
      reload(b, made);
      std::vector<Tensor> matrices;
      for (Tensor* t : dit_streamed_tensors(made)) matrices.push_back(*t);
      return matrices;
    };
    impl->streamer = std::make_unique<BlockStreamer>(be, *opt.streaming, impl->cfg.num_layers, describe, resident,
                                                     checkpoint, preload);
  }
  return std::unique_ptr<Dit>(new Dit(std::move(impl)));
}

std::unique_ptr<Dit> Dit::from_weights(Backend& be, DitConfig cfg, Layout layout, DitWeights w,
                                       DitBlockLoader reload, std::optional<BlockStreaming> streaming,
                                       DitPrecision precision) {
  cfg.validate("Dit::from_weights");
  H3_CHECK(static_cast<int64_t>(w.blocks.size()) == cfg.num_layers &&
               static_cast<int64_t>(w.refiner.size()) == cfg.num_refiner_layers,
           "Dit::from_weights: ", w.blocks.size(), " blocks and ", w.refiner.size(), " refiner blocks for a config of ",
           cfg.num_layers, " and ", cfg.num_refiner_layers);
  validate_dit_streaming(streaming, precision, "Dit::from_weights");
  auto impl = std::make_unique<Impl>(be, std::move(cfg), layout, std::move(w), precision);
  impl->gates = std::any_of(impl->w.blocks.begin(), impl->w.blocks.end(),
                            [](const DitBlockWeights& b) { return b.gate_compress.defined(); });
  impl->reload_block = std::move(reload);
  if (streaming) {
    // The host copies are downloads of the blocks' resident matrices (reloaded for a block not resident), which
    // are freed afterwards: only the ring stays on the device.
    Impl& m = *impl;
    // Every block's copy is made now, the ones not resident through the loader (one block on the device at a time).
    std::vector<int64_t> preload;
    for (int64_t b = 0; b < m.num_blocks(); ++b)
      if (m.w.blocks[b].resident() || m.reload_block) preload.push_back(b);
    auto describe = [&m](int64_t) {  // the shapes load_attn_ffn makes (dit_weights.cpp)
      std::vector<StreamedTensor> shapes;
      const int64_t D = m.cfg.hidden_size, inner = m.cfg.inner_dim(), F = m.cfg.ffn_dim;
      for (Shape s : {Shape{3 * inner, D}, Shape{D, inner}, Shape{2 * F, D}, Shape{D, F}}) shapes.push_back({s, {}});
      return shapes;
    };
    auto resident = [&m](int64_t b) {
      DitBlockWeights made;
      DitBlockWeights& src = m.w.blocks[b];
      if (!src.resident()) {
        H3_CHECK(static_cast<bool>(m.reload_block), "this transformer was made from weights in memory: block ", b,
                 " is not resident and cannot be loaded to stream it");
        m.reload_block(b, made);
      }
      std::vector<Tensor> matrices;
      for (Tensor* t : dit_streamed_tensors(src.resident() ? src : made)) matrices.push_back(*t);
      return matrices;
    };
    m.streamer = std::make_unique<BlockStreamer>(be, *streaming, m.num_blocks(), describe, resident, nullptr, preload);
    for (DitBlockWeights& b : m.w.blocks)
      for (Tensor* t : dit_streamed_tensors(b)) *t = Tensor();
  }
  return std::unique_ptr<Dit>(new Dit(std::move(impl)));
}

const DitConfig& Dit::config() const { return impl_->cfg; }
Layout Dit::checkpoint_layout() const { return impl_->layout; }
bool Dit::has_gates() const { return impl_->gates; }
int64_t Dit::adaln_table_builds() const { return impl_->table_builds; }

void Dit::begin_request(const DitLayout& layout, const Tensor& encoder_hidden_states,
                        const std::vector<float>& timesteps, const DitRequestOptions& options) {
  impl_->begin_request(layout, encoder_hidden_states, timesteps, options);
}

DitOutput Dit::step(const Tensor& video_rows, const Tensor& audio_rows,
                    const std::vector<int64_t>& timestep_index_per_row, std::optional<int64_t> pass) {
  return impl_->step(video_rows, audio_rows, timestep_index_per_row, pass);
}

std::vector<int64_t> Dit::select_blocks(const std::vector<float>& timesteps, std::optional<int64_t> layers) {
  DitRequestOptions o;
  o.layers = layers;
  validate_dit_request_options(impl_->cfg, o);
  return impl_->select_blocks(timesteps, layers);
}

std::vector<int64_t> Dit::resident_blocks() const {
  std::vector<int64_t> out;
  for (int64_t b = 0; b < impl_->num_blocks(); ++b)
    if (impl_->w.blocks[b].resident()) out.push_back(b);
  return out;
}

uint64_t Dit::resident_weight_bytes() const {
  return dit_weight_bytes(impl_->w) + (impl_->streamer ? impl_->streamer->device_bytes() : 0);
}

std::optional<BlockStreamingStats> Dit::streaming_stats() const {
  if (!impl_->streamer) return std::nullopt;
  return impl_->streamer->stats();
}

uint64_t Dit::streaming_host_bytes() const { return impl_->streamer ? impl_->streamer->host_bytes() : 0; }

void Dit::end_request() { impl_->req.reset(); }

void Dit::check_request(const DitLayout& layout, const Tensor& encoder_hidden_states,
                        const std::vector<float>& timesteps, const DitRequestOptions& options) const {
  impl_->check_request(layout, encoder_hidden_states, timesteps, options);
}

void Dit::check_step(const Tensor& video_rows, const Tensor& audio_rows,
                     const std::vector<int64_t>& timestep_index_per_row, std::optional<int64_t> pass) const {
  impl_->check_step(video_rows, audio_rows, timestep_index_per_row, pass);
}

void Dit::set_communicator(Communicator* comm) {
  if (comm) {
    if (const auto problem = sequence_parallel_problem(cat(comm->size(), " GPUs"), impl_->cfg.num_attention_heads,
                                                       comm->size()))
      fail(*problem);
  }
  impl_->req.reset();
  impl_->comm = comm;
}

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
