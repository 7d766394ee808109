// The op set every model computes through. One interface, two implementations: backend/cpu (float32, plain and
// obviously right: the oracle) and backend/cuda (bf16 storage, f32 accumulation, fused kernels).
//
// Conventions
// - Tensors passed to an op live on the backend's device (allocate them with empty()/upload()).
// - "Rows": every tensor is viewed as [rows, last_dim] with all leading dimensions flattened.
// - Index tensors (row tables) are I32 on the device.
// - Float tensors may be F32, BF16 or F16 unless an op says otherwise; an op computes internally in f32 and
//   rounds once to the output's dtype. The CPU backend stores activations in F32; CUDA in BF16.
// - Model code never branches on the backend; it asks activation_dtype() where storage matters.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/fp8_layout.h"
#include "tensor/tensor.h"

namespace h3 {

// Self-attention over the rows of one packed q|k|v buffer, with the per-head q/k RMSNorm and rotary embedding that
// precede it in every model here.
struct AttentionSpec {
  int heads_q = 0;
  int heads_kv = 0;   // GQA: query head h uses kv head h / (heads_q / heads_kv)
  int head_dim = 0;
  float scale = 0.f;  // softmax scale (usually 1/sqrt(head_dim))
  bool causal = false;
  // Per-head RMSNorm of q and k over head_dim, before the rotary embedding. qk_norm=false skips it; the weights
  // may be null (plain RMSNorm without an affine weight).
  bool qk_norm = false;
  float qk_norm_eps = 1e-5f;
  const Tensor* q_norm_weight = nullptr;  // [head_dim]
  const Tensor* k_norm_weight = nullptr;  // [head_dim]
  // Rotary embedding on the first rotary_dim channels of every q and k head, "rotate-half" pairing (j, j+rotary_dim/2):
  //   y[j] = x[j]·cos[j] − x[j+h]·sin[j],  y[j+h] = x[j+h]·cos[j+h] + x[j]·sin[j+h]   (h = rotary_dim/2)
  // cos/sin are per row: [rows, rotary_dim]. rotary_dim = 0 disables it.
  int rotary_dim = 0;
  const Tensor* cos = nullptr;
  const Tensor* sin = nullptr;
  // Optional independent segments (block-diagonal attention): boundaries {0, s1, ..., rows}. Empty = one segment.
  std::vector<int64_t> segments;
};

// The tiles of a block-sparse attention (VSA-H3, spec/fasth3.md §2) as the backend's ops read them: tile n is the
// packed rows order[begin[n] .. begin[n + 1]), the first prefix_tiles tiles the prefix (dense queries). Made by
// make_sparse_tiles (models/dit/dit_sparse_attention.h), which keeps the host tiling for the ops' defaults.
struct VsaTiling;
struct SparseTiles {
  std::shared_ptr<const VsaTiling> host;
  int64_t rows = 0, tiles = 0, prefix_tiles = 0, tile_elems = 0;
  Tensor order;  // I32 [rows], on the backend's device
  Tensor begin;  // I32 [tiles + 1]
};
// The key tiles of every (head, query tile), ascending: count[h, m] entries of index[h, m, :] (the rest
// unspecified).
struct SparseKeyTiles {
  Tensor index;  // I32 [heads, tiles, tiles]
  Tensor count;  // I32 [heads, tiles]
};

// Device memory as the backend's allocator sees it (what --profile and the memory plan read; bytes, all zero where
// a backend does not track memory).
struct MemoryStats {
  uint64_t in_use = 0;        // handed out to live tensors and workspaces now
  uint64_t peak = 0;          // high-water mark of in_use since the last reset_peak_memory()
  uint64_t cached = 0;        // held from the device by the allocator for reuse, not in use
  uint64_t device_free = 0;   // free on the device now (the driver's count; 0 = unknown)
  uint64_t device_total = 0;  // the device's capacity (0 = unknown)
  uint64_t host_pinned_cached = 0;  // pinned host memory the backend keeps for reuse, not in use (the OS counts it used)
};

// A point on the backend's timeline (a CUDA event on its stream; a host clock reading on the CPU).
class DeviceTimePoint {
 public:
  virtual ~DeviceTimePoint() = default;
};

// The result of Backend::download_async: wait() blocks until the copy has landed and returns the host tensor
// (again on later calls). Destroying it without wait() still waits for the copy.
class PendingDownload {
 public:
  virtual ~PendingDownload() = default;
  virtual Tensor wait() = 0;
};

// Geometry of one temporal window of video VAE tiles for stitch_video_tiles (spec/video_vae.md §9.2–9.3): a grid of
// y_starts.size() × x_starts.size() tiles, each covering `latent_frames` latent frames and tile_latent_h × tile_latent_w
// latent pixels, i.e. r·latent_frames frames of (s·tile_latent_h) × (s·tile_latent_w) pixels, tile (i, j) at pixel
// (y_starts[i], x_starts[j]) of the canvas, consecutive tiles overlapping by y_overlaps[i] / x_overlaps[j] pixels.
struct VideoTileGrid {
  int64_t channels = 3;         // C (RGB)
  int64_t temporal_patch = 1;   // r: frames per latent frame
  int64_t spatial_patch = 1;    // s: pixels per latent pixel, both axes
  int64_t latent_frames = 0;    // t
  int64_t tile_latent_h = 0, tile_latent_w = 0;
  std::vector<int64_t> y_starts, x_starts;      // pixels
  std::vector<int64_t> y_overlaps, x_overlaps;  // pixels; sizes y_starts.size() − 1 and x_starts.size() − 1

  int64_t tiles() const { return static_cast<int64_t>(y_starts.size() * x_starts.size()); }
  int64_t tile_tokens() const { return latent_frames * tile_latent_h * tile_latent_w; }
  int64_t features() const { return channels * temporal_patch * spatial_patch * spatial_patch; }
  int64_t frames() const { return temporal_patch * latent_frames; }
  int64_t tile_height() const { return spatial_patch * tile_latent_h; }
  int64_t tile_width() const { return spatial_patch * tile_latent_w; }
  int64_t height() const { return y_starts.empty() ? 0 : y_starts.back() + tile_height(); }
  int64_t width() const { return x_starts.empty() ? 0 : x_starts.back() + tile_width(); }
};

// The video VAE's blend of two overlapping samples at position p of an overlap of extent E (the reference's
// `_blend`, operation by operation in float32): w_b = p / E, w_a = 1 − w_b, a·w_a + b·w_b.
inline float video_blend(float a, float b, int64_t p, int64_t extent) {
  const float w_b = static_cast<float>(p) / static_cast<float>(extent);
  const float w_a = 1.f - w_b;
  return a * w_a + b * w_b;
}

// Spatial padding of conv3d (the video VAE encoder's `spatial_padding_mode`; PyTorch's F.pad modes): Zeros adds 0,
// Reflect mirrors without repeating the edge sample (x[−i] = x[i], x[n−1+i] = x[n−1−i]; needs pad < extent),
// Replicate repeats the edge sample.
enum class PadMode : uint8_t { Zeros, Reflect, Replicate };

// Padding and strides of conv3d. Spatial pads may differ per side (the encoder's downsampler pads only bottom and
// right); the temporal pad is causal: zero frames before the first frame, none after.
struct Conv3dGeometry {
  int64_t stride_t = 1, stride_h = 1, stride_w = 1;
  int64_t pad_front = 0;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  PadMode spatial_mode = PadMode::Zeros;
};

// FP8 linears (issue 18; --precision fp8): a weight [N, K] stored as E4M3 codes with float32 scales, one per output
// channel or one per 128×128 block (backend/cpu/cpu_fp8.h defines the rounding and the scales). The activation of an
// FP8 product is quantized the matching way: one scale per row (Channel), or per row and 128 columns (Block).
enum class Fp8Scaling : uint8_t { Channel, Block };
struct Fp8Weight {
  Tensor data;   // U8 [N, K]: E4M3 codes
  Tensor scale;  // F32: Channel [N]; Block [ceil(N/128), ld], ld = ceil(K/128) rounded up to a multiple of 4
  Fp8Scaling scaling = Fp8Scaling::Channel;
  bool defined() const { return data.defined(); }
  uint64_t nbytes() const { return defined() ? data.nbytes() + scale.nbytes() : 0; }
};

// An activation x [M, K] quantized for an FP8 product with a weight of the same scaling: E4M3 codes and float32
// scales (backend/cpu/cpu_fp8.h defines the rounding). Channel: codes [M, K], scale [M], one per row. Block: one
// scale per row and 128 columns in backend/fp8_layout.h's layout (a main part and a 4-row tail, so that cuBLASLt
// sees row counts that are multiples of 4): codes [round_up(M, 4), K], the padding rows' codes zero and their
// scales 1; scale [ceil(K/128) · round_up(M, 4)], (row m, column group g) at fp8_block_scale_index(m, g, M, K).
struct Fp8Activation {
  Tensor codes;      // U8 [fp8_activation_rows(M, scaling), K]
  Tensor scale;      // F32 [fp8_activation_scale_count(M, K, scaling)]
  int64_t rows = 0;  // M
  Fp8Scaling scaling = Fp8Scaling::Channel;
  bool defined() const { return codes.defined(); }
};
inline int64_t fp8_activation_rows(int64_t rows, Fp8Scaling scaling) {
  return scaling == Fp8Scaling::Channel ? rows : fp8_block_padded_rows(rows);
}
inline int64_t fp8_activation_scale_count(int64_t rows, int64_t K, Fp8Scaling scaling) {
  return scaling == Fp8Scaling::Channel ? rows : fp8_blocks(K) * fp8_block_padded_rows(rows);
}

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;
  // The dtype the backend keeps activations (and the bulk of the weights) in.
  virtual DType activation_dtype() const = 0;

  // ---- memory ----
  virtual Tensor empty(const Shape& shape, DType dt) = 0;
  Tensor zeros(const Shape& shape, DType dt);
  // Host tensor → device tensor of dtype `dt` (converting; CPU tensors of any float/int dtype accepted).
  virtual Tensor upload(const Tensor& host, DType dt) = 0;
  // Device tensor → CPU tensor of the same dtype.
  virtual Tensor download(const Tensor& t) = 0;
  // dst = src (same shape; dtype conversion allowed between float dtypes).
  virtual void convert(const Tensor& src, Tensor& dst) = 0;
  virtual void fill(Tensor& t, float value) = 0;
  // Normal(mean, stddev) values from a counter-based hash of (seed, element index) (splitmix64 + Box–Muller): the
  // same values for the same seed on every call; backends agree to within the rounding of log/cos and of the
  // tensor's dtype. Float tensors only. The default computes on the host and uploads; CUDA draws on the device.
  virtual void fill_random_normal(Tensor& t, uint64_t seed, float mean, float stddev);
  virtual void synchronize() = 0;
  // Starts copying the device tensor `t` to host memory and returns at once (work enqueued later does not delay
  // the copy, and may run while it does: `t` must not be written until wait() has returned). The default downloads
  // synchronously.
  virtual std::unique_ptr<PendingDownload> download_async(const Tensor& t);

  // ---- statistics (optional) ----
  virtual MemoryStats memory_stats() const { return {}; }
  virtual void reset_peak_memory() {}
  // Marks the timeline now (after all work enqueued so far); device_seconds(a, b) waits for b and returns the device
  // time between the two marks. The default is the host clock after synchronize().
  virtual std::shared_ptr<DeviceTimePoint> mark_time();
  virtual double device_seconds(const DeviceTimePoint& from, const DeviceTimePoint& to);
  // Device time per op since the last call, as a table, where the backend records it (the CUDA backend with
  // H3_CUDA_PROFILE=1); empty otherwise.
  virtual std::string op_profile_report() { return {}; }

  // ---- the copy queue (block streaming, models/block_streamer.h) ----
  // Host → device copies on a queue of their own beside the compute queue (every other op, mark_time): each queue
  // runs its work in order, and the two meet only where one waits for a mark of the other. The defaults (the CPU
  // backend) run every copy at once in the caller's order, so the marks have passed when they are made.
  //
  // U8 [bytes] of page-locked host memory (asynchronous copies from it overlap compute), 4096-byte aligned (O_DIRECT
  // reads land in it). Default: ordinary aligned host memory.
  virtual Tensor pinned_host_buffer(size_t bytes);
  // dst = host on the copy queue, after the copies enqueued there so far: the same conversion and bits as
  // upload(host, dst.dtype()) (dst: a device tensor of host's element count). `host` must stay unchanged until a
  // copy mark made after this call has passed. Default: upload then convert.
  virtual void upload_async(const Tensor& host, Tensor& dst);
  // A mark on the copy queue after everything enqueued there so far (device_seconds measures between it and any
  // other mark of this backend). Default: mark_time().
  virtual std::shared_ptr<DeviceTimePoint> mark_copy_time() { return mark_time(); }
  // Work enqueued later on the compute queue (compute_wait) or the copy queue (copy_wait) waits for `mark`.
  virtual void compute_wait(const DeviceTimePoint& /*mark*/) {}
  virtual void copy_wait(const DeviceTimePoint& /*mark*/) {}
  // Blocks the calling thread, which may be any thread, until `mark` has passed.
  virtual void host_wait(const DeviceTimePoint& /*mark*/) {}

  // ---- dense algebra ----
  // y[M,N] = x[M,K] · w[N,K]ᵀ (+ bias[N]), accumulated in f32.
  virtual void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) = 0;
  // FP8 linears (Fp8Weight above). fp8_unsupported_reason: empty where --precision fp8 runs, else the sentence that
  // refuses it. quantize_weight_fp8: w [N, K] (a backend tensor) → its FP8 form. linear_fp8: y[M,N] (BF16 or F32)
  // = x · wᵀ (+ bias) with x quantized as the weight's scaling says. The defaults throw the reason.
  // The CUDA backend may store a Block weight whose product cuBLASLt refuses as Channel instead (it logs the shape
  // and the reason once): a weight's own `scaling` is what its activations must be quantized to.
  virtual std::string fp8_unsupported_reason() const;
  virtual Fp8Weight quantize_weight_fp8(const Tensor& w, Fp8Scaling scaling);
  virtual void linear_fp8(const Tensor& x, const Fp8Weight& w, const Tensor* bias, Tensor& y);
  // The two halves of linear_fp8: x [M, K] → its FP8 form (Fp8Activation above; `q` is allocated here), and the
  // product of an activation quantized already (x.scaling must be w.scaling). linear_fp8 = both, bit for bit.
  virtual void quantize_activation_fp8(const Tensor& x, Fp8Scaling scaling, Fp8Activation& q);
  virtual void linear_fp8_quantized(const Fp8Activation& x, const Fp8Weight& w, const Tensor* bias, Tensor& y);
  // The producers of the DiT blocks' FP8 activations with the quantization fused in (issue 18: no pass over the
  // activation between the kernel that makes it and the product that reads it). Each is defined as its bf16 op
  // into a tensor of activation_dtype() followed by quantize_activation_fp8 of that tensor (so the values
  // quantized are the activation as stored), and the defaults do exactly that; a backend that fuses them must
  // give the same codes and scales bit for bit. `q` is allocated here, quantized `scaling`'s way.
  virtual void rms_norm_modulate_fp8(const Tensor& x, const Tensor& w, float eps, const Tensor& table,
                                     int shift_param, int scale_param, const Tensor& idx, Fp8Scaling scaling,
                                     Fp8Activation& q);
  virtual void gated_residual_modulate_fp8(Tensor& x, const Tensor& y, const Tensor& gate_table, int gate_param,
                                           const Tensor& gate_idx, const Tensor& w, float eps, const Tensor& table,
                                           int shift_param, int scale_param, const Tensor& idx, Fp8Scaling scaling,
                                           Fp8Activation& q);
  virtual void swiglu_fp8(const Tensor& u, bool value_first, Fp8Scaling scaling, Fp8Activation& q);
  // The attention's output quantized for the out product: its bf16 op is self_attention, or self_attention_in_fp8
  // when `attention_in_fp8`; the default quantizes that output in a pass of its own. A backend whose FP8 attention
  // writes the codes itself may scale them its own documented way (the CUDA backend, per-channel scaling: each
  // segment's rows by the segment's bound on |O|, cuda_kernels.h's Fp8AttentionCodes).
  virtual void self_attention_fp8(Tensor& qkv, const AttentionSpec& spec, bool attention_in_fp8, Fp8Scaling scaling,
                                  Fp8Activation& q);

  // ---- normalization ----
  // y = x · rsqrt(mean(x²) + eps) · w  per row (w may be null).
  virtual void rms_norm(const Tensor& x, const Tensor* w, float eps, Tensor& y) = 0;
  // y = (x − mean) · rsqrt(var + eps) · w + b  per row (w, b may be null).
  virtual void layer_norm(const Tensor& x, const Tensor* w, const Tensor* b, float eps, Tensor& y) = 0;
  // AdaLN with a per-row table lookup: table is [R, P, D] (P parameter vectors per table row), idx [rows] picks the
  // table row of every row:  y[r] = RMSNorm(x[r]; w, eps) · (1 + table[idx[r], scale_param]) + table[idx[r], shift_param]
  virtual void rms_norm_modulate(const Tensor& x, const Tensor& w, float eps, const Tensor& table, int shift_param,
                                 int scale_param, const Tensor& idx, Tensor& y) = 0;

  // ---- residuals and elementwise ----
  // x[r] += table[idx[r], gate_param] · y[r]
  virtual void gated_residual(Tensor& x, const Tensor& y, const Tensor& table, int gate_param, const Tensor& idx) = 0;
  // x[r] += gate_table[gate_idx[r], gate_param] · y[r]; then
  // h[r] = RMSNorm(x[r]; w, eps) · (1 + table[idx[r], scale_param]) + table[idx[r], shift_param]
  // (gated_residual then rms_norm_modulate, in one pass where the backend fuses them; the normalization reads the
  // updated x as stored, i.e. after rounding to x's dtype). The gate table and the modulation table may differ, each
  // with its own row index. The default calls the two ops.
  virtual void gated_residual_modulate(Tensor& x, const Tensor& y, const Tensor& gate_table, int gate_param,
                                       const Tensor& gate_idx, const Tensor& w, float eps, const Tensor& table,
                                       int shift_param, int scale_param, const Tensor& idx, Tensor& h);
  // x += y · scale (scale: per-channel [D], or null for a plain add)
  virtual void residual_add(Tensor& x, const Tensor& y, const Tensor* scale) = 0;
  // residual_add then rms_norm of the updated x into h (the normalization reads x as stored), in one pass where the
  // backend fuses them. The default calls the two ops.
  virtual void residual_rms_norm(Tensor& x, const Tensor& y, const Tensor* scale, const Tensor* w, float eps,
                                 Tensor& h);
  // a = value · silu(gate), where u = [value | gate] (value_first) or [gate | value] along the last dim.
  virtual void swiglu(const Tensor& u, bool value_first, Tensor& a) = 0;
  // y = silu(x); y = gelu(x) (tanh approximation or exact erf).
  virtual void silu(const Tensor& x, Tensor& y) = 0;
  virtual void gelu(const Tensor& x, bool tanh_approx, Tensor& y) = 0;

  // ---- attention ----
  // qkv: [rows, (heads_q + 2·heads_kv)·head_dim] laid out [q heads | k heads | v heads] per row.
  // out: [rows, heads_q·head_dim]. The backend may modify qkv in place (q/k normalization and rotation).
  virtual void self_attention(Tensor& qkv, const AttentionSpec& spec, Tensor& out) = 0;
  // What self_attention does to qkv before attending, alone: the per-head q/k RMSNorm and rotary embedding of spec,
  // in place (the v heads untouched), for attentions computed elsewhere (FastH3's VSA-H3). The default
  // refuses: a backend offers it where it overrides it (the CPU backend does).
  virtual void qk_norm_rope(Tensor& qkv, const AttentionSpec& spec);
  // Attention computed in FP8 (issue 18; the DiT's main blocks under --precision fp8): self_attention with q, k, v
  // and the softmax probabilities rounded to E4M3 as backend/cpu/cpu_fp8_attention.h defines (non-causal), its
  // output as self_attention's (bf16/f32: the FP8 out product's input is self_attention_fp8 above).
  // fp8_attention_unsupported_reason: empty where it runs, else the sentence (without its full stop) that says why
  // not; the default self_attention_in_fp8 throws it. A backend that has it may still run a shape its kernel does
  // not take in bf16 (self_attention), saying so once in the log.
  virtual std::string fp8_attention_unsupported_reason() const;
  virtual void self_attention_in_fp8(Tensor& qkv, const AttentionSpec& spec, Tensor& out);

  // ---- block-sparse attention (FastH3's VSA-H3: spec/fasth3.md §3–§6, models/dit/dit_sparse_attention.h) ----
  // Over the tiles of a SparseTiles (below); q/k/v heads in qkv [rows, 3·heads·head_dim] laid out [q | k | v] per
  // row, q/k already normalized and rotated (qk_norm_rope). The defaults download, run the float32 reference
  // functions of models/dit/dit_sparse_attention.h and upload the result: the CPU backend's implementation, and the
  // exact twin of a backend's kernels.
  //
  // means F32 [heads, tiles, head_dim]: of each tile, the float32 sum in tile order of the heads x holds in channels
  // [channel0, channel0 + heads·head_dim) of its rows, divided by the tile's size (vsa_tile_means).
  virtual void tile_means(const Tensor& x, int64_t channel0, int64_t heads, int64_t head_dim,
                          const SparseTiles& tiles, Tensor& means);
  // scores F32 [heads, tiles, tiles] = q̄·k̄ summed in float32 in channel order (no fused multiply-add), then divided
  // by √head_dim (vsa_tile_scores).
  virtual void tile_scores(const Tensor& q_means, const Tensor& k_means, Tensor& scores);
  // The key tiles of every query tile (vsa_route_mask's rule as vsa_key_tile_lists): a prefix query tile, every
  // tile; a video query tile, every prefix tile and its `keep` best video tiles (compete: its best keep + prefix of
  // all tiles), larger score first, a NaN as −inf, equal scores to the lower tile. lists holds I32 tensors of the
  // backend's device (allocated here).
  virtual void route_key_tiles(const Tensor& scores, const SparseTiles& tiles, int64_t keep, bool compete,
                               SparseKeyTiles& lists);
  // out [rows, heads·head_dim]: every q head's softmax attention (scale 1/√head_dim) over the rows of its query
  // tile's key tiles `lists` (null: every tile, i.e. dense attention) (vsa_masked_attention).
  virtual void block_sparse_attention(const Tensor& qkv, int64_t heads, int64_t head_dim, const SparseTiles& tiles,
                                      const SparseKeyTiles* lists, Tensor& out);
  // The gated pooled branch: out[r, h] += o_c[h, tile(r)] ⊙ gate[r, h], o_c[h, m] = Σ_n softmax_n(scores[h, m, :])
  // · v_means[h, n] (gate and out [rows, heads·head_dim]; vsa_add_pooled).
  virtual void add_pooled_attention(const Tensor& scores, const Tensor& v_means, const Tensor& gate,
                                    const SparseTiles& tiles, Tensor& out);

  // ---- row movement ----
  // dst[idx[i]] = src[i]  (scatter);  dst[i] = src[idx[i]]  (gather). dtype conversion allowed.
  virtual void scatter_rows(const Tensor& src, const Tensor& idx, Tensor& dst) = 0;
  virtual void gather_rows(const Tensor& src, const Tensor& idx, Tensor& dst) = 0;

  // ---- pairs of rows (the DiT's token reduction, models/dit/dit_token_reduction.h) ----
  // pairs: I32 [R, 2]; every row of full [L, D] is a member of exactly one pair (a, b), a == b keeping row a alone;
  // reduced: [R, D] of full's dtype. Defaults round-trip through the CPU backend, like the 1-D signal ops.
  // Pooling: reduced[i] = full[a] when a == b (bit for bit), else (full[a] + full[b])·0.5 in f32, rounded once.
  virtual void pool_row_pairs(const Tensor& full, const Tensor& pairs, Tensor& reduced);
  // The restore, a scatter-add of each pooled row's update into its members: with p_i the value pool_row_pairs
  // stores for pair i, recomputed from `full` (which must still hold the rows pooled),
  //   full[a] = reduced[i] when a == b, else full[a] += reduced[i] − p_i and full[b] += reduced[i] − p_i
  // (the update reduced[i] − p_i in f32, each sum in f32, rounded once). reduced[i] = p_i leaves full unchanged.
  virtual void unpool_row_pairs(const Tensor& reduced, const Tensor& pairs, Tensor& full);

  // ---- 1-D signal ops (audio VAE) ----
  // F32 tensors on every backend (the audio VAE runs in float32 only; spec/audio_vae.md §1). Each op has a default
  // implementation that round-trips through the CPU backend (download, compute, upload), so every backend supports
  // it until it overrides it. Shapes are checked by the check_* functions below.
  //
  // Zero-padded cross-correlation (PyTorch Conv1d): x [B, Cin, T], w [Cout, Cin, k], bias [Cout] or null,
  //   y[b, o, t] = bias[o] + Σ_{c, j} w[o, c, j] · x[b, c, t·stride − padding + j·dilation]   (x = 0 outside [0, T)),
  //   y [B, Cout, conv1d_output_length(T, k, stride, padding, dilation)].
  virtual void conv1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                      int64_t dilation, Tensor& y);
  // PyTorch ConvTranspose1d: x [B, Cin, T], w [Cin, Cout, k], bias [Cout] or null,
  //   y[b, o, t] = bias[o] + Σ_{c, i, j : t = i·stride − padding + j} x[b, c, i] · w[c, o, j],
  //   y [B, Cout, (T − 1)·stride − 2·padding + k].
  virtual void conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                                Tensor& y);
  // Anti-aliased SnakeBeta (BigVGAN's Activation1d at ratio kSnakeAaRatio = 2) on every row x[b, c, :] of length T,
  // y [B, C, T] (y must not overlap x). With K = up_filter length and h = up_filter:
  //   1. upsample: replicate-pad P = K/2 − 1 samples on both sides, u[o] = 2 · Σ_i x_pad[i] · h[o − 2i] (transposed
  //      FIR, stride 2), keep u[o] for o in [2P + (K − 2)/2, … ) — 2T samples;
  //   2. SnakeBeta: u + sin²(e^log_alpha[c] · u) / (e^log_beta[c] + 1e-9);
  //   3. downsample with g = down_filter of length Kd: replicate-pad Kd/2 − (Kd even) left and Kd/2 right,
  //      y[t] = Σ_k u_pad[2t + k] · g[k].
  // log_alpha, log_beta: [C]; up_filter, down_filter: any shape with K ≥ 2 elements.
  virtual void snake_beta_aa(const Tensor& x, const Tensor& log_alpha, const Tensor& log_beta, const Tensor& up_filter,
                             const Tensor& down_filter, Tensor& y);
  // x /= divisor elementwise: a true division, as a mean over `divisor` summed branches computes it.
  virtual void divide(Tensor& x, float divisor);

  // ---- audio VAE encoder (spec/audio_vae.md §4) ----
  // F32 tensors on every backend, with defaults that round-trip through the CPU backend like the 1-D signal ops.
  //
  // Snake on every row x[b, c, :] of x [B, C, T]: y = x + (1 / (alpha[c] + 1e-9)) · sin(alpha[c] · x)², in float32
  // and in that order (the reference's MiniMaxH3AudioSnake1d). alpha: C values (any shape). y may be x.
  virtual void snake(const Tensor& x, const Tensor& alpha, Tensor& y);
  // The trunk's conv → (shortcut) → Snake chains in one call: y = conv1d(x, w, bias, stride, padding, dilation),
  // then y += residual when residual is given ([B, Cout, Tout], y's shape; y = (conv + bias) + residual in that
  // order), then act = Snake(y, alpha) — so that a backend may apply the bias, the shortcut and the Snake in one pass
  // over y after a bias-free convolution. act is y's shape and may be y (y then ends holding the activation) or x
  // when x has y's shape (the convolution is done with x by then); otherwise act and y keep both values. The
  // default calls conv1d, residual_add and snake in turn, with no temporaries: its results are those ops' bits.
  virtual void conv1d_snake(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                            int64_t dilation, const Tensor* residual, const Tensor& alpha, Tensor& y, Tensor& act);
  // Channels-last forms of conv1d and conv1d_snake, for a backend whose convolutions are faster that way (the
  // encoder then keeps its trunk's activations [B, T, C]): x [B, T, Cin], w [Cout, k, Cin] (the Conv1d weight with
  // its last two axes swapped), residual, y and act [B, Tout, Cout]; the same sums and roundings as the
  // channels-first ops in every other respect (act may be y, or x when x has y's shape). The defaults transpose to
  // channels-first, call conv1d / conv1d_snake and transpose back (with temporaries); a backend that prefers them
  // says so with prefers_channels_last_conv1d().
  virtual bool prefers_channels_last_conv1d() const { return false; }
  virtual void conv1d_nlc(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                          int64_t dilation, Tensor& y);
  virtual void conv1d_snake_nlc(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                                int64_t dilation, const Tensor* residual, const Tensor& alpha, Tensor& y, Tensor& act);
  // y[b, n, m] = x[b, m, n]: x [B, M, N] → y [B, N, M] (a channels-first signal ↔ rows of features); y is not x.
  virtual void transpose_last_two(const Tensor& x, Tensor& y);
  // x *= y elementwise (the same number of elements).
  virtual void multiply(Tensor& x, const Tensor& y);
  // The pre_block's causal attention with its head average and adaptive pooling (spec/audio_vae.md §4.2 steps 2–4)
  // over `batch` independent sequences of T = rows / batch rows each. qkv [batch·T, 3·H·Dh] holds [q | k | v] per
  // row, each H heads of Dh; y [batch·T, P]. For row t of a sequence (j over that sequence's rows):
  //   o_h[t] = Σ_{j ≤ t} softmax_j(scale · q_h[t] · k_h[j]) · v_h[j],   m[t] = (Σ_h o_h[t]) / H,
  //   y[t, i] = mean of m[t, a_i .. b_i)  with a_i = ⌊i·Dh/P⌋, b_i = ⌈(i+1)·Dh/P⌉  (adaptive average pooling Dh → P).
  virtual void pooled_causal_attention(const Tensor& qkv, int64_t batch, int64_t heads, float scale, Tensor& y);

  // ---- video VAE encoder (spec/video_vae.md §6) ----
  // F32 tensors on every backend (the reference encodes in float32, §1). Defaults round-trip through the CPU
  // backend, like the 1-D signal ops.
  //
  // Padded cross-correlation of one video: x [Cin, T, H, W], w [Cout, Cin, kt, kh, kw], bias [Cout] or null.
  //   xp = x padded spatially (pad_top rows above, pad_bottom below, pad_left / pad_right columns) by spatial_mode,
  //        then pad_front all-zero frames prepended;
  //   y[o, t, i, j] = bias[o] + Σ_{c, a, b, d} w[o, c, a, b, d] · xp[c, t·stride_t + a, i·stride_h + b, j·stride_w + d],
  //   y [Cout, conv3d_output_shape(...)].
  virtual void conv3d(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv3dGeometry& g, Tensor& y);
  // Group normalization of every frame on its own (the encoder's per-frame GroupNorm), then SiLU when `silu`:
  // x, y [C, T, H, W], C split into `groups` consecutive groups of C/groups channels; for frame t and group g,
  // μ and σ² (biased) over the group's channels × H × W samples of that frame;
  //   y[c, t] = (x[c, t] − μ) / sqrt(σ² + eps) · weight[c] + bias[c]   (then y·sigmoid(y) when silu).
  // weight, bias: [C]. y may be x. Implementations compute μ, σ² and the affine normalization in float64 (a float32
  // μ would cost the deviations of large-offset activations their precision) and the SiLU in float32.
  virtual void frame_group_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t groups, float eps,
                                bool silu, Tensor& y);

  // ---- video VAE output (spec/video_vae.md §9.3, §10) ----
  // Unpatchifies and stitches the decoded tiles of one window into frames [frame_begin, frame_end) of its canvas.
  // features: [tiles · tile_tokens, C·r·s·s] (F32, BF16 or F16): tile k = i·nx + j (row-major grid), its tokens
  // (tt, yy, xx) row-major, the features of a token ordered (c, it, iy, ix) — pixel [c, r·tt + it, s·yy + iy,
  // s·xx + ix] of the tile. canvas: F32 [C, frame_end − frame_begin, height(), width()]. Every canvas pixel comes
  // from the one tile whose kept region holds it (all but the last overlap rows / columns unless it is the last
  // row / column of the grid): its raw value v, blended with the raw tile above over the first overlap rows,
  // v = video_blend(above, v, y, E_y), then with the raw tile to the left over the first overlap columns,
  // v = video_blend(left, v, x, E_x), with E = min(overlap, tile extent) — models/video_vae/stitch.h's composition.
  virtual void stitch_video_tiles(const Tensor& features, const VideoTileGrid& grid, int64_t frame_begin,
                                  int64_t frame_end, Tensor& canvas);
  // Decoder output frames → pixels: pixels [C, n, H, W] F32 holds the first n frames of frames [C, F, H, W] F32
  // (n ≤ F) as clamp(v·std[c] + mean[c], 0, 1), where v = frames[c, f], except that the first
  // E = min(fade_extent, F_prev, F) frames are first cross-faded with the last E frames of fade_from
  // [C, F_prev, H, W] (may be null): v = video_blend(fade_from[c, F_prev − E + f], frames[c, f], f, E).
  virtual void video_frames_to_pixels(const Tensor& frames, const Tensor* fade_from, int64_t fade_extent,
                                      const std::vector<float>& mean, const std::vector<float>& std, Tensor& pixels);
};

// The fixed resampling ratio of snake_beta_aa.
constexpr int64_t kSnakeAaRatio = 2;
// Output lengths of conv1d and conv_transpose1d (may be ≤ 0 for inputs too short; the checks reject those).
int64_t conv1d_output_length(int64_t length, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation);
int64_t conv_transpose1d_output_length(int64_t length, int64_t kernel, int64_t stride, int64_t padding);
// Shape and parameter rules of the 1-D ops, shared by every implementation (throw h3::Error naming the problem).
void check_conv1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                  int64_t dilation, const Tensor& y);
void check_conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                            const Tensor& y);
void check_snake_beta_aa(const Tensor& x, const Tensor& log_alpha, const Tensor& log_beta, const Tensor& up_filter,
                         const Tensor& down_filter, const Tensor& y);
void check_snake(const Tensor& x, const Tensor& alpha, const Tensor& y);
// The channels-last forms' rules: those of their channels-first ops on the tensors' [B, C, T] views.
void check_conv1d_nlc(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                      int64_t dilation, const Tensor& y);
void check_conv1d_snake_nlc(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                            int64_t dilation, const Tensor* residual, const Tensor& alpha, const Tensor& y,
                            const Tensor& act);
// conv1d_snake's rules: check_conv1d's, residual (when given) of y's shape and dtype, check_snake's for y → act.
void check_conv1d_snake(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                        int64_t dilation, const Tensor* residual, const Tensor& alpha, const Tensor& y,
                        const Tensor& act);
void check_transpose_last_two(const Tensor& x, const Tensor& y);
void check_multiply(const Tensor& x, const Tensor& y);
void check_pooled_causal_attention(const Tensor& qkv, int64_t batch, int64_t heads, const Tensor& y);
// The row-pair ops' rules (pool_row_pairs, unpool_row_pairs): the shapes and dtypes above and every pair's rows in
// [0, L); `op` names the op in the message. That the pairs partition full's rows is the CPU backend's check.
void check_row_pairs(const char* op, const Tensor& full, const Tensor& pairs, const Tensor& reduced);
// The bins of adaptive average pooling from n to p values (PyTorch's adaptive_avg_pool1d): bin i averages
// [⌊i·n/p⌋, ⌈(i+1)·n/p⌉).
inline int64_t adaptive_pool_begin(int64_t i, int64_t n, int64_t p) { return (i * n) / p; }
inline int64_t adaptive_pool_end(int64_t i, int64_t n, int64_t p) { return ((i + 1) * n + p - 1) / p; }
// conv3d's output [To, Ho, Wo] for an input of T × H × W frames and a kt × kh × kw kernel (entries ≤ 0 when the
// padded input is shorter than the kernel; check_conv3d rejects those).
std::array<int64_t, 3> conv3d_output_shape(int64_t T, int64_t H, int64_t W, int64_t kt, int64_t kh, int64_t kw,
                                           const Conv3dGeometry& g);
void check_conv3d(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv3dGeometry& g, const Tensor& y);
void check_frame_group_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t groups,
                            const Tensor& y);
void check_stitch_video_tiles(const Tensor& features, const VideoTileGrid& grid, int64_t frame_begin,
                              int64_t frame_end, const Tensor& canvas);
void check_video_frames_to_pixels(const Tensor& frames, const Tensor* fade_from, int64_t fade_extent,
                                  const std::vector<float>& mean, const std::vector<float>& std, const Tensor& pixels);

// The host computations behind fill_random_normal's default (the reference values every backend approximates).
void random_normal_host(Tensor& host_f32, uint64_t seed, float mean, float stddev);

// The CPU reference backend (always available).
std::unique_ptr<Backend> make_cpu_backend();
// The CUDA backend on device 0; throws h3::Error when the build or the machine has no CUDA.
std::unique_ptr<Backend> make_cuda_backend();
bool cuda_backend_available();
// "cpu", "cuda" or "auto" (CUDA when available).
std::unique_ptr<Backend> make_backend(const std::string& which);

}  // namespace h3
