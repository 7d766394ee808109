#include "backend/backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <numbers>

#include "backend/device.h"
#include "backend/memory_budget.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace h3 {

Tensor Backend::zeros(const Shape& shape, DType dt) {
  Tensor t = empty(shape, dt);
  fill(t, 0.f);
  return t;
}

// ---- random fill, asynchronous download, timing: defaults ----

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class ReadyDownload final : public PendingDownload {
 public:
  explicit ReadyDownload(Tensor t) : t_(std::move(t)) {}
  Tensor wait() override { return t_; }

 private:
  Tensor t_;
};

class HostTimePoint final : public DeviceTimePoint {
 public:
  std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now();
};

}  // namespace

void random_normal_host(Tensor& t, uint64_t seed, float mean, float stddev) {
  H3_CHECK(t.device() == Device::CPU && t.dtype() == DType::F32, "random_normal_host: needs a host F32 tensor, got ",
           t.str());
  const uint64_t key = splitmix64(seed);
  float* p = t.ptr<float>();
  parallel_for(0, t.numel(), int64_t(1) << 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const uint64_t h = splitmix64(key ^ static_cast<uint64_t>(i));
      const float u1 = (static_cast<float>(h >> 40) + 1.f) * (1.f / 16777216.f);  // (0, 1]
      const float u2 = static_cast<float>(h & 0xffffffu) * (1.f / 16777216.f);    // [0, 1)
      const float z = std::sqrt(-2.f * std::log(u1)) * std::cos(2.f * std::numbers::pi_v<float> * u2);
      p[i] = z * stddev + mean;
    }
  });
}

void Backend::fill_random_normal(Tensor& t, uint64_t seed, float mean, float stddev) {
  H3_CHECK(dtype_is_float(t.dtype()), "fill_random_normal: ", t.str(), " is not a float tensor");
  Tensor host = Tensor::empty(t.shape(), DType::F32);
  random_normal_host(host, seed, mean, stddev);
  Tensor up = upload(host, t.dtype());
  convert(up, t);
}

std::unique_ptr<PendingDownload> Backend::download_async(const Tensor& t) {
  return std::make_unique<ReadyDownload>(download(t));
}

std::string Backend::fp8_unsupported_reason() const {
  return cat("--precision fp8 needs the CUDA backend on a GPU of compute capability 8.9 or newer; the ", name(),
             " backend computes in bf16/f32 only (use --precision bf16)");
}

Fp8Weight Backend::quantize_weight_fp8(const Tensor&, Fp8Scaling) { throw Error(fp8_unsupported_reason() + "."); }

void Backend::linear_fp8(const Tensor& x, const Fp8Weight& w, const Tensor* bias, Tensor& y) {
  H3_CHECK(w.defined(), "linear_fp8: no FP8 weight");
  Fp8Activation q;
  quantize_activation_fp8(x, w.scaling, q);
  linear_fp8_quantized(q, w, bias, y);
}

void Backend::quantize_activation_fp8(const Tensor&, Fp8Scaling, Fp8Activation&) {
  throw Error(fp8_unsupported_reason() + ".");
}

void Backend::linear_fp8_quantized(const Fp8Activation&, const Fp8Weight&, const Tensor*, Tensor&) {
  throw Error(fp8_unsupported_reason() + ".");
}

namespace {

// Rows × last dimension of a row-major tensor (backend.h's "rows" convention).
int64_t rows_of(const Tensor& t) { return t.ndim() == 0 ? 1 : t.numel() / t.shape().back(); }

}  // namespace

void Backend::rms_norm_modulate_fp8(const Tensor& x, const Tensor& w, float eps, const Tensor& table,
                                    int shift_param, int scale_param, const Tensor& idx, Fp8Scaling scaling,
                                    Fp8Activation& q) {
  Tensor h = empty({rows_of(x), x.shape().back()}, activation_dtype());
  rms_norm_modulate(x, w, eps, table, shift_param, scale_param, idx, h);
  quantize_activation_fp8(h, scaling, q);
}

void Backend::gated_residual_modulate_fp8(Tensor& x, const Tensor& y, const Tensor& gate_table, int gate_param,
                                          const Tensor& gate_idx, const Tensor& w, float eps, const Tensor& table,
                                          int shift_param, int scale_param, const Tensor& idx, Fp8Scaling scaling,
                                          Fp8Activation& q) {
  Tensor h = empty({rows_of(x), x.shape().back()}, activation_dtype());
  gated_residual_modulate(x, y, gate_table, gate_param, gate_idx, w, eps, table, shift_param, scale_param, idx, h);
  quantize_activation_fp8(h, scaling, q);
}

void Backend::swiglu_fp8(const Tensor& u, bool value_first, Fp8Scaling scaling, Fp8Activation& q) {
  H3_CHECK(u.ndim() >= 1 && u.shape().back() % 2 == 0, "swiglu: input ", u.str(),
           " must have an even last dimension (value | gate)");
  Tensor a = empty({rows_of(u), u.shape().back() / 2}, activation_dtype());
  swiglu(u, value_first, a);
  quantize_activation_fp8(a, scaling, q);
}

void Backend::self_attention_fp8(Tensor& qkv, const AttentionSpec& spec, bool attention_in_fp8, Fp8Scaling scaling,
                                 Fp8Activation& q) {
  Tensor out = empty({rows_of(qkv), int64_t(spec.heads_q) * spec.head_dim}, activation_dtype());
  if (attention_in_fp8)
    self_attention_in_fp8(qkv, spec, out);
  else
    self_attention(qkv, spec, out);
  quantize_activation_fp8(out, scaling, q);
}

std::string Backend::fp8_attention_unsupported_reason() const {
  return cat("FP8 attention needs the CUDA backend on a Hopper GPU (compute capability 9.0, h3's sm_90a kernels); "
             "the ", name(), " backend runs attention in bf16/f32 only");
}

void Backend::self_attention_in_fp8(Tensor&, const AttentionSpec&, Tensor&) {
  throw Error(fp8_attention_unsupported_reason() + ".");
}

Tensor Backend::pinned_host_buffer(size_t bytes) {
  constexpr size_t kAlign = 4096;
  const size_t size = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, size);
  H3_CHECK(p != nullptr, "host buffer of ", bytes, " bytes: out of memory");
  return Tensor::view(p, {static_cast<int64_t>(bytes)}, DType::U8, std::shared_ptr<void>(p, std::free));
}

void Backend::upload_async(const Tensor& host, Tensor& dst) {
  H3_CHECK(host.numel() == dst.numel(), "upload_async: ", host.str(), " -> ", dst.str(), " differ in element count");
  const Tensor up = upload(host, dst.dtype());
  convert(up, dst);
}

std::shared_ptr<DeviceTimePoint> Backend::mark_time() {
  synchronize();
  return std::make_shared<HostTimePoint>();
}

double Backend::device_seconds(const DeviceTimePoint& from, const DeviceTimePoint& to) {
  const auto* a = dynamic_cast<const HostTimePoint*>(&from);
  const auto* b = dynamic_cast<const HostTimePoint*>(&to);
  H3_CHECK(a && b, "device_seconds: time points of another backend");
  return std::chrono::duration<double>(b->at - a->at).count();
}

// ---- residuals ----

void Backend::gated_residual_modulate(Tensor& x, const Tensor& y, const Tensor& gate_table, int gate_param,
                                      const Tensor& gate_idx, const Tensor& w, float eps, const Tensor& table,
                                      int shift_param, int scale_param, const Tensor& idx, Tensor& h) {
  gated_residual(x, y, gate_table, gate_param, gate_idx);
  rms_norm_modulate(x, w, eps, table, shift_param, scale_param, idx, h);
}

void Backend::qk_norm_rope(Tensor&, const AttentionSpec&) {
  fail("the ", name(), " backend has no separate q/k normalization and rotation (qk_norm_rope), which the sparse ",
       "attention needs; it runs on the CPU backend");
}

void Backend::residual_rms_norm(Tensor& x, const Tensor& y, const Tensor* scale, const Tensor* w, float eps,
                                Tensor& h) {
  residual_add(x, y, scale);
  rms_norm(x, w, eps, h);
}

// ---- 1-D signal ops: shape rules ----

int64_t conv1d_output_length(int64_t length, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation) {
  const int64_t span = length + 2 * padding - dilation * (kernel - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

int64_t conv_transpose1d_output_length(int64_t length, int64_t kernel, int64_t stride, int64_t padding) {
  return (length - 1) * stride - 2 * padding + kernel;
}

namespace {

void check_signal(const Tensor& t, const char* op, const char* what) {
  H3_CHECK(t.dtype() == DType::F32, op, ": ", what, " must be F32, got ", t.str());
  H3_CHECK(t.ndim() == 3, op, ": ", what, " must be [batch, channels, length], got ", t.str());
}

void check_f32(const Tensor& t, const char* op, const char* what) {
  H3_CHECK(t.dtype() == DType::F32, op, ": ", what, " must be F32, got ", t.str());
}

void check_stride_padding(const char* op, int64_t stride, int64_t padding) {
  H3_CHECK(stride >= 1 && padding >= 0, op, ": stride must be >= 1 and padding >= 0, got ", stride, " and ", padding);
}

void check_conv_common(const char* op, const Tensor& x, const Tensor& w, const Tensor* bias, int64_t cin,
                       int64_t cout, int64_t stride, int64_t padding, const Tensor& y, int64_t out_length) {
  H3_CHECK(x.dim(1) == cin, op, ": input ", x.str(), " has ", x.dim(1), " channels, the weight ", w.str(), " takes ",
           cin);
  if (bias) {
    check_f32(*bias, op, "bias");
    H3_CHECK(bias->numel() == cout, op, ": bias ", bias->str(), " does not match ", cout, " output channels");
  }
  H3_CHECK(out_length >= 1, op, ": input length ", x.dim(2), " is too short for kernel ", w.dim(2), ", stride ",
           stride, ", padding ", padding);
  H3_CHECK(y.dim(0) == x.dim(0) && y.dim(1) == cout && y.dim(2) == out_length, op, ": output ", y.str(),
           " should be [", x.dim(0), ", ", cout, ", ", out_length, "]");
}

}  // namespace

void check_conv1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                  int64_t dilation, const Tensor& y) {
  check_signal(x, "conv1d", "input");
  check_signal(w, "conv1d", "weight");
  check_signal(y, "conv1d", "output");
  check_stride_padding("conv1d", stride, padding);
  H3_CHECK(dilation >= 1, "conv1d: dilation must be >= 1, got ", dilation);
  check_conv_common("conv1d", x, w, bias, w.dim(1), w.dim(0), stride, padding, y,
                    conv1d_output_length(x.dim(2), w.dim(2), stride, padding, dilation));
}

void check_conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                            const Tensor& y) {
  check_signal(x, "conv_transpose1d", "input");
  check_signal(w, "conv_transpose1d", "weight");
  check_signal(y, "conv_transpose1d", "output");
  check_stride_padding("conv_transpose1d", stride, padding);
  check_conv_common("conv_transpose1d", x, w, bias, w.dim(0), w.dim(1), stride, padding, y,
                    conv_transpose1d_output_length(x.dim(2), w.dim(2), stride, padding));
}

void check_snake_beta_aa(const Tensor& x, const Tensor& log_alpha, const Tensor& log_beta, const Tensor& up_filter,
                         const Tensor& down_filter, const Tensor& y) {
  const char* op = "snake_beta_aa";
  check_signal(x, op, "input");
  check_signal(y, op, "output");
  H3_CHECK(y.shape() == x.shape(), op, ": output ", y.str(), " must have the input's shape ", x.str());
  for (const Tensor* p : {&log_alpha, &log_beta}) {
    check_f32(*p, op, "SnakeBeta parameter");
    H3_CHECK(p->numel() == x.dim(1), op, ": SnakeBeta parameter ", p->str(), " must have one value per channel (",
             x.dim(1), ")");
  }
  for (const Tensor* f : {&up_filter, &down_filter}) {
    check_f32(*f, op, "filter");
    H3_CHECK(f->numel() >= kSnakeAaRatio, op, ": filter ", f->str(), " needs at least ", kSnakeAaRatio, " taps");
  }
}

void check_stitch_video_tiles(const Tensor& features, const VideoTileGrid& g, int64_t frame_begin, int64_t frame_end,
                              const Tensor& canvas) {
  const char* op = "stitch_video_tiles";
  const size_t ny = g.y_starts.size(), nx = g.x_starts.size();
  H3_CHECK(ny >= 1 && nx >= 1 && g.y_overlaps.size() == ny - 1 && g.x_overlaps.size() == nx - 1, op,
           ": the grid needs at least one tile per axis and one overlap between consecutive tiles");
  H3_CHECK(g.channels >= 1 && g.temporal_patch >= 1 && g.spatial_patch >= 1 && g.latent_frames >= 1 &&
               g.tile_latent_h >= 1 && g.tile_latent_w >= 1,
           op, ": the grid's channels, patch sizes and tile extents must be >= 1");
  for (size_t i = 0; i + 1 < ny; ++i)
    H3_CHECK(g.y_overlaps[i] >= 0 && g.y_overlaps[i] < g.tile_height() &&
                 g.y_starts[i + 1] == g.y_starts[i] + g.tile_height() - g.y_overlaps[i],
             op, ": tile row ", i + 1, " must start where row ", i, " ends minus its overlap");
  for (size_t j = 0; j + 1 < nx; ++j)
    H3_CHECK(g.x_overlaps[j] >= 0 && g.x_overlaps[j] < g.tile_width() &&
                 g.x_starts[j + 1] == g.x_starts[j] + g.tile_width() - g.x_overlaps[j],
             op, ": tile column ", j + 1, " must start where column ", j, " ends minus its overlap");
  H3_CHECK(g.y_starts[0] == 0 && g.x_starts[0] == 0, op, ": the first tile must sit at the canvas origin");
  H3_CHECK(dtype_is_float(features.dtype()) && features.ndim() == 2 &&
               features.dim(0) == g.tiles() * g.tile_tokens() && features.dim(1) == g.features(),
           op, ": features ", features.str(), " should be [", g.tiles() * g.tile_tokens(), ", ", g.features(), "]");
  H3_CHECK(0 <= frame_begin && frame_begin < frame_end && frame_end <= g.frames(), op, ": frames [", frame_begin,
           ", ", frame_end, ") are not a non-empty range of the window's ", g.frames());
  H3_CHECK(canvas.dtype() == DType::F32 && canvas.ndim() == 4 && canvas.dim(0) == g.channels &&
               canvas.dim(1) == frame_end - frame_begin && canvas.dim(2) == g.height() && canvas.dim(3) == g.width(),
           op, ": canvas ", canvas.str(), " should be F32[", g.channels, ", ", frame_end - frame_begin, ", ",
           g.height(), ", ", g.width(), "]");
}

void check_snake(const Tensor& x, const Tensor& alpha, const Tensor& y) {
  const char* op = "snake";
  check_signal(x, op, "input");
  check_signal(y, op, "output");
  H3_CHECK(y.shape() == x.shape(), op, ": output ", y.str(), " must have the input's shape ", x.str());
  check_f32(alpha, op, "alpha");
  H3_CHECK(alpha.numel() == x.dim(1), op, ": alpha ", alpha.str(), " must have one value per channel (", x.dim(1),
           ")");
}

void check_conv1d_snake(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                        int64_t dilation, const Tensor* residual, const Tensor& alpha, const Tensor& y,
                        const Tensor& act) {
  check_conv1d(x, w, bias, stride, padding, dilation, y);
  if (residual) {
    check_signal(*residual, "conv1d_snake", "residual");
    H3_CHECK(residual->shape() == y.shape(), "conv1d_snake: residual ", residual->str(), " must have the output's shape ",
             y.str());
  }
  check_snake(y, alpha, act);
}

namespace {

// A [B, T, C] signal's shape as its channels-first op sees it ([B, C, T]); a 1-element view of the same dtype, shape
// only (the checks read shapes and dtypes, never data).
Tensor channels_first_view(const Tensor& t) {
  if (t.ndim() != 3) return t;  // the check names the bad rank
  return Tensor::view(t.data(), {t.dim(0), t.dim(2), t.dim(1)}, t.dtype(), nullptr, t.device());
}

}  // namespace

void check_conv1d_nlc(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                      int64_t dilation, const Tensor& y) {
  check_conv1d(channels_first_view(x), channels_first_view(w), bias, stride, padding, dilation,
               channels_first_view(y));
}

void check_conv1d_snake_nlc(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                            int64_t dilation, const Tensor* residual, const Tensor& alpha, const Tensor& y,
                            const Tensor& act) {
  const Tensor r = residual ? channels_first_view(*residual) : Tensor();
  check_conv1d_snake(channels_first_view(x), channels_first_view(w), bias, stride, padding, dilation,
                     residual ? &r : nullptr, alpha, channels_first_view(y), channels_first_view(act));
}

void check_transpose_last_two(const Tensor& x, const Tensor& y) {
  const char* op = "transpose_last_two";
  check_f32(x, op, "input");
  check_f32(y, op, "output");
  H3_CHECK(x.ndim() == 3 && y.ndim() == 3 && y.dim(0) == x.dim(0) && y.dim(1) == x.dim(2) && y.dim(2) == x.dim(1),
           op, ": output ", y.str(), " must be the input ", x.str(), " with its last two axes swapped");
  H3_CHECK(x.numel() == 0 || x.data() != y.data(), op, ": the output must not be the input");
}

void check_multiply(const Tensor& x, const Tensor& y) {
  check_f32(x, "multiply", "operand");
  check_f32(y, "multiply", "factor");
  H3_CHECK(x.numel() == y.numel(), "multiply: ", x.str(), " and ", y.str(), " differ in element count");
}

void check_row_pairs(const char* op, const Tensor& full, const Tensor& pairs, const Tensor& reduced) {
  H3_CHECK(dtype_is_float(full.dtype()) && full.ndim() == 2, op, ": full must be a float [rows, D] tensor, got ",
           full.str());
  H3_CHECK(pairs.dtype() == DType::I32 && pairs.ndim() == 2 && pairs.dim(1) == 2, op,
           ": pairs must be an I32 [pairs, 2] tensor, got ", pairs.str());
  H3_CHECK(reduced.dtype() == full.dtype() && reduced.ndim() == 2 && reduced.dim(0) == pairs.dim(0) &&
               reduced.dim(1) == full.dim(1),
           op, ": reduced ", reduced.str(), " must be [", pairs.dim(0), ", ", full.dim(1), "] of full's dtype ",
           dtype_name(full.dtype()));
}

void check_pooled_causal_attention(const Tensor& qkv, int64_t batch, int64_t heads, const Tensor& y) {
  const char* op = "pooled_causal_attention";
  check_f32(qkv, op, "qkv");
  check_f32(y, op, "output");
  H3_CHECK(qkv.ndim() == 2 && y.ndim() == 2 && y.dim(0) == qkv.dim(0) && y.dim(1) >= 1, op, ": qkv ", qkv.str(),
           " and output ", y.str(), " must be [rows, 3 * heads * head_dim] and [rows, pooled]");
  H3_CHECK(batch >= 1 && qkv.dim(0) % batch == 0 && qkv.dim(0) >= batch, op, ": ", qkv.dim(0),
           " rows do not split into ", batch, " non-empty sequences");
  H3_CHECK(heads >= 1 && qkv.dim(1) % (3 * heads) == 0 && qkv.dim(1) >= 3 * heads, op, ": qkv ", qkv.str(),
           " does not hold q, k and v of ", heads, " heads per row");
}

std::array<int64_t, 3> conv3d_output_shape(int64_t T, int64_t H, int64_t W, int64_t kt, int64_t kh, int64_t kw,
                                           const Conv3dGeometry& g) {
  auto out = [](int64_t padded, int64_t k, int64_t stride) { return padded < k ? 0 : (padded - k) / stride + 1; };
  return {out(T + g.pad_front, kt, g.stride_t), out(H + g.pad_top + g.pad_bottom, kh, g.stride_h),
          out(W + g.pad_left + g.pad_right, kw, g.stride_w)};
}

void check_conv3d(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv3dGeometry& g, const Tensor& y) {
  const char* op = "conv3d";
  for (const Tensor* t : {&x, &y}) {
    check_f32(*t, op, t == &x ? "input" : "output");
    H3_CHECK(t->ndim() == 4, op, ": ", t == &x ? "input " : "output ", t->str(), " must be [channels, frames, height, ",
             "width]");
  }
  check_f32(w, op, "weight");
  H3_CHECK(w.ndim() == 5 && w.dim(1) == x.dim(0), op, ": weight ", w.str(), " must be [Cout, ", x.dim(0),
           ", kt, kh, kw] for input ", x.str());
  if (bias) {
    check_f32(*bias, op, "bias");
    H3_CHECK(bias->numel() == w.dim(0), op, ": bias ", bias->str(), " does not match ", w.dim(0), " output channels");
  }
  H3_CHECK(g.stride_t >= 1 && g.stride_h >= 1 && g.stride_w >= 1, op, ": strides must be >= 1");
  H3_CHECK(g.pad_front >= 0 && g.pad_top >= 0 && g.pad_bottom >= 0 && g.pad_left >= 0 && g.pad_right >= 0, op,
           ": paddings must be >= 0");
  if (g.spatial_mode == PadMode::Reflect)
    H3_CHECK(std::max(g.pad_top, g.pad_bottom) < x.dim(2) && std::max(g.pad_left, g.pad_right) < x.dim(3), op,
             ": reflect padding needs each pad smaller than its extent, got pads (", g.pad_top, ", ", g.pad_bottom,
             ", ", g.pad_left, ", ", g.pad_right, ") for ", x.dim(2), " x ", x.dim(3));
  if (g.spatial_mode == PadMode::Replicate)
    H3_CHECK(x.dim(2) >= 1 && x.dim(3) >= 1, op, ": replicate padding needs a non-empty frame");
  const auto [To, Ho, Wo] = conv3d_output_shape(x.dim(1), x.dim(2), x.dim(3), w.dim(2), w.dim(3), w.dim(4), g);
  H3_CHECK(To >= 1 && Ho >= 1 && Wo >= 1, op, ": the padded input ", x.str(), " is smaller than the kernel ", w.str());
  H3_CHECK(y.dim(0) == w.dim(0) && y.dim(1) == To && y.dim(2) == Ho && y.dim(3) == Wo, op, ": output ", y.str(),
           " should be [", w.dim(0), ", ", To, ", ", Ho, ", ", Wo, "]");
}

void check_frame_group_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t groups,
                            const Tensor& y) {
  const char* op = "frame_group_norm";
  check_f32(x, op, "input");
  check_f32(y, op, "output");
  check_f32(weight, op, "weight");
  check_f32(bias, op, "bias");
  H3_CHECK(x.ndim() == 4 && y.shape() == x.shape(), op, ": input ", x.str(), " and output ", y.str(),
           " must both be [channels, frames, height, width]");
  H3_CHECK(groups >= 1 && x.dim(0) % groups == 0, op, ": ", x.dim(0), " channels do not split into ", groups,
           " groups");
  H3_CHECK(weight.numel() == x.dim(0) && bias.numel() == x.dim(0), op, ": weight ", weight.str(), " and bias ",
           bias.str(), " need one value per channel (", x.dim(0), ")");
}

void check_video_frames_to_pixels(const Tensor& frames, const Tensor* fade_from, int64_t fade_extent,
                                  const std::vector<float>& mean, const std::vector<float>& std, const Tensor& pixels) {
  const char* op = "video_frames_to_pixels";
  H3_CHECK(frames.dtype() == DType::F32 && frames.ndim() == 4, op, ": frames must be F32[C, F, H, W], got ",
           frames.str());
  const int64_t C = frames.dim(0);
  H3_CHECK(static_cast<int64_t>(mean.size()) == C && static_cast<int64_t>(std.size()) == C, op, ": ", mean.size(),
           " means and ", std.size(), " deviations for ", C, " channels");
  H3_CHECK(pixels.dtype() == DType::F32 && pixels.ndim() == 4 && pixels.dim(0) == C && pixels.dim(1) >= 1 &&
               pixels.dim(1) <= frames.dim(1) && pixels.dim(2) == frames.dim(2) && pixels.dim(3) == frames.dim(3),
           op, ": pixels ", pixels.str(), " must be F32[", C, ", 1..", frames.dim(1), ", ", frames.dim(2), ", ",
           frames.dim(3), "]");
  H3_CHECK(fade_extent >= 0, op, ": the fade extent must be >= 0, got ", fade_extent);
  if (fade_from)
    H3_CHECK(fade_from->dtype() == DType::F32 && fade_from->ndim() == 4 && fade_from->dim(0) == C &&
                 fade_from->dim(2) == frames.dim(2) && fade_from->dim(3) == frames.dim(3),
             op, ": fade_from ", fade_from->str(), " does not match frames ", frames.str());
}

// ---- 1-D signal ops: defaults through the CPU backend ----

namespace {

Backend& cpu_reference() {
  static const std::unique_ptr<Backend> cpu = make_cpu_backend();
  return *cpu;
}

// A CPU copy of an optional device tensor (null stays null).
struct HostCopy {
  Tensor t;
  const Tensor* ptr = nullptr;
  HostCopy(Backend& be, const Tensor* dev) {
    if (dev) {
      t = be.download(*dev);
      ptr = &t;
    }
  }
};

// Writes the CPU result `host` into the device tensor `dst`.
void store(Backend& be, const Tensor& host, Tensor& dst) {
  Tensor up = be.upload(host, dst.dtype());
  be.convert(up, dst);
}

}  // namespace

void Backend::conv1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                     int64_t dilation, Tensor& y) {
  check_conv1d(x, w, bias, stride, padding, dilation, y);
  HostCopy hb(*this, bias);
  Tensor hy = Tensor::empty(y.shape(), DType::F32);
  cpu_reference().conv1d(download(x), download(w), hb.ptr, stride, padding, dilation, hy);
  store(*this, hy, y);
}

void Backend::conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                               Tensor& y) {
  check_conv_transpose1d(x, w, bias, stride, padding, y);
  HostCopy hb(*this, bias);
  Tensor hy = Tensor::empty(y.shape(), DType::F32);
  cpu_reference().conv_transpose1d(download(x), download(w), hb.ptr, stride, padding, hy);
  store(*this, hy, y);
}

void Backend::snake_beta_aa(const Tensor& x, const Tensor& log_alpha, const Tensor& log_beta, const Tensor& up_filter,
                            const Tensor& down_filter, Tensor& y) {
  check_snake_beta_aa(x, log_alpha, log_beta, up_filter, down_filter, y);
  Tensor hy = Tensor::empty(y.shape(), DType::F32);
  cpu_reference().snake_beta_aa(download(x), download(log_alpha), download(log_beta), download(up_filter),
                                download(down_filter), hy);
  store(*this, hy, y);
}

void Backend::divide(Tensor& x, float divisor) {
  check_f32(x, "divide", "input");
  Tensor hx = download(x);
  cpu_reference().divide(hx, divisor);
  store(*this, hx, x);
}

void Backend::snake(const Tensor& x, const Tensor& alpha, Tensor& y) {
  check_snake(x, alpha, y);
  Tensor hy = Tensor::empty(y.shape(), DType::F32);
  cpu_reference().snake(download(x), download(alpha), hy);
  store(*this, hy, y);
}

void Backend::conv1d_snake(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                           int64_t dilation, const Tensor* residual, const Tensor& alpha, Tensor& y, Tensor& act) {
  check_conv1d_snake(x, w, bias, stride, padding, dilation, residual, alpha, y, act);
  conv1d(x, w, bias, stride, padding, dilation, y);
  if (residual) residual_add(y, *residual, nullptr);
  snake(y, alpha, act);
}

namespace {

// [B, M, N] → a new [B, N, M] on the backend.
Tensor transposed_copy(Backend& be, const Tensor& x) {
  Tensor y = be.empty({x.dim(0), x.dim(2), x.dim(1)}, x.dtype());
  be.transpose_last_two(x, y);
  return y;
}

}  // namespace

void Backend::conv1d_nlc(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                         int64_t dilation, Tensor& y) {
  check_conv1d_nlc(x, w, bias, stride, padding, dilation, y);
  Tensor yc = empty({y.dim(0), y.dim(2), y.dim(1)}, DType::F32);
  conv1d(transposed_copy(*this, x), transposed_copy(*this, w), bias, stride, padding, dilation, yc);
  transpose_last_two(yc, y);
}

void Backend::conv1d_snake_nlc(const Tensor& x, const Tensor& w, const Tensor* bias, int64_t stride, int64_t padding,
                               int64_t dilation, const Tensor* residual, const Tensor& alpha, Tensor& y, Tensor& act) {
  check_conv1d_snake_nlc(x, w, bias, stride, padding, dilation, residual, alpha, y, act);
  const Shape cf{y.dim(0), y.dim(2), y.dim(1)};
  Tensor yc = empty(cf, DType::F32), ac = empty(cf, DType::F32);
  const Tensor rc = residual ? transposed_copy(*this, *residual) : Tensor();
  conv1d_snake(transposed_copy(*this, x), transposed_copy(*this, w), bias, stride, padding, dilation,
               residual ? &rc : nullptr, alpha, yc, ac);
  if (act.data() != y.data()) transpose_last_two(yc, y);
  transpose_last_two(ac, act);
}

void Backend::transpose_last_two(const Tensor& x, Tensor& y) {
  check_transpose_last_two(x, y);
  Tensor hy = Tensor::empty(y.shape(), DType::F32);
  cpu_reference().transpose_last_two(download(x), hy);
  store(*this, hy, y);
}

void Backend::multiply(Tensor& x, const Tensor& y) {
  check_multiply(x, y);
  Tensor hx = download(x);
  cpu_reference().multiply(hx, download(y));
  store(*this, hx, x);
}

void Backend::pooled_causal_attention(const Tensor& qkv, int64_t batch, int64_t heads, float scale, Tensor& y) {
  check_pooled_causal_attention(qkv, batch, heads, y);
  Tensor hy = Tensor::empty(y.shape(), DType::F32);
  cpu_reference().pooled_causal_attention(download(qkv), batch, heads, scale, hy);
  store(*this, hy, y);
}

void Backend::pool_row_pairs(const Tensor& full, const Tensor& pairs, Tensor& reduced) {
  check_row_pairs("pool_row_pairs", full, pairs, reduced);
  Tensor hr = Tensor::empty(reduced.shape(), reduced.dtype());
  cpu_reference().pool_row_pairs(download(full), download(pairs), hr);
  store(*this, hr, reduced);
}

void Backend::unpool_row_pairs(const Tensor& reduced, const Tensor& pairs, Tensor& full) {
  check_row_pairs("unpool_row_pairs", full, pairs, reduced);
  Tensor hf = download(full);
  cpu_reference().unpool_row_pairs(download(reduced), download(pairs), hf);
  store(*this, hf, full);
}

void Backend::conv3d(const Tensor& x, const Tensor& w, const Tensor* bias, const Conv3dGeometry& g, Tensor& y) {
  check_conv3d(x, w, bias, g, y);
  HostCopy hb(*this, bias);
  Tensor hy = Tensor::empty(y.shape(), DType::F32);
  cpu_reference().conv3d(download(x), download(w), hb.ptr, g, hy);
  store(*this, hy, y);
}

void Backend::frame_group_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t groups, float eps,
                               bool silu, Tensor& y) {
  check_frame_group_norm(x, weight, bias, groups, y);
  Tensor hy = Tensor::empty(y.shape(), DType::F32);
  cpu_reference().frame_group_norm(download(x), download(weight), download(bias), groups, eps, silu, hy);
  store(*this, hy, y);
}

void Backend::stitch_video_tiles(const Tensor& features, const VideoTileGrid& grid, int64_t frame_begin,
                                 int64_t frame_end, Tensor& canvas) {
  check_stitch_video_tiles(features, grid, frame_begin, frame_end, canvas);
  Tensor hc = Tensor::empty(canvas.shape(), DType::F32);
  cpu_reference().stitch_video_tiles(download(features), grid, frame_begin, frame_end, hc);
  store(*this, hc, canvas);
}

void Backend::video_frames_to_pixels(const Tensor& frames, const Tensor* fade_from, int64_t fade_extent,
                                     const std::vector<float>& mean, const std::vector<float>& std, Tensor& pixels) {
  check_video_frames_to_pixels(frames, fade_from, fade_extent, mean, std, pixels);
  HostCopy hf(*this, fade_from);
  Tensor hp = Tensor::empty(pixels.shape(), DType::F32);
  cpu_reference().video_frames_to_pixels(download(frames), hf.ptr, fade_extent, mean, std, hp);
  store(*this, hp, pixels);
}

#ifndef H3_HAVE_CUDA
std::unique_ptr<Backend> make_cuda_backend() {
  fail(kNoUsableCudaDevice, " (this build of h3 has no CUDA backend: rebuild with nvcc available); ", kCpuInstead);
}
bool cuda_backend_available() { return false; }
#endif

std::unique_ptr<Backend> make_backend(const std::string& which) {
  H3_CHECK(which == "cpu" || which == "cuda" || which == "auto", "--device must be cpu, cuda or auto, got '", which,
           "'");
  const std::optional<uint64_t> limit = env_device_memory_limit();  // a bad value fails before the device opens
  std::unique_ptr<Backend> be = which == "cpu"    ? make_cpu_backend()
                                : which == "cuda" ? make_cuda_backend()
                                : cuda_backend_available() ? make_cuda_backend()
                                                           : make_cpu_backend();
  if (limit) set_device_memory_limit(*be, limit);
  return be;
}

}  // namespace h3
