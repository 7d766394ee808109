// FastH3 checkpoint detection and request plan (models/dit/dit_fasth3.h, spec/fasth3.md §1, §7).
#include "models/dit/dit_fasth3.h"

#include <cstring>

#include "util/error.h"

namespace h3 {
namespace {

// basic_fasth3.py: num_inference_steps 5 grid points ("the distilled 4-forward grid").
constexpr int64_t kStudentPasses = 4;
constexpr int64_t kStudentTileElems = 64;   // basic_fasth3.py's --vsa-tile-size default, "the trained contract"
constexpr int64_t kDefaultTileElems = 256;  // FastVideoArgs' VSA_tile_size default

template <typename Bits>
bool all_signed_zero(const void* data, int64_t n) {
  constexpr Bits magnitude = static_cast<Bits>(~(Bits{1} << (sizeof(Bits) * 8 - 1)));
  for (int64_t i = 0; i < n; ++i) {
    Bits b;
    std::memcpy(&b, static_cast<const char*>(data) + i * static_cast<int64_t>(sizeof(Bits)), sizeof(Bits));
    if ((b & magnitude) != 0) return false;
  }
  return true;
}

}  // namespace

std::string dit_gate_name(int64_t block) { return cat("transformer_blocks.", block, ".attn.to_gate_compress.weight"); }

bool dit_has_gates(const Checkpoint& ck, const DitConfig& c, Layout layout) {
  int64_t with_gate = 0, first_without = -1;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    if (!ck.has(dit_gate_name(i))) {
      if (first_without < 0) first_without = i;
      continue;
    }
    ++with_gate;
    const TensorInfo& info = ck.info(dit_gate_name(i));
    H3_CHECK(info.shape == (Shape{c.inner_dim(), c.hidden_size}) && dtype_is_float(info.dtype), ck.location(),
             ": tensor '", dit_gate_name(i), "' is ", dtype_name(info.dtype), shape_str(info.shape),
             " but a FastH3 gate is a float [inner, hidden] = ", shape_str({c.inner_dim(), c.hidden_size}));
  }
  if (with_gate == 0) return false;
  H3_CHECK(layout == Layout::Diffusers, ck.location(),
           ": to_gate_compress weights come with FastVideo's FastH3 checkpoints, which use the diffusers layout, but "
           "this checkpoint is in the original layout");
  H3_CHECK(with_gate == c.num_layers, ck.location(), ": a FastH3 checkpoint has to_gate_compress in every one of its ",
           c.num_layers, " main blocks, but ", with_gate, " have it (block ", first_without, " has none)");
  return true;
}

bool dit_gate_is_zero(const Tensor& weight) {
  H3_CHECK(weight.device() == Device::CPU, "dit_gate_is_zero reads a host tensor");
  switch (weight.dtype()) {
    case DType::BF16:
    case DType::F16: return all_signed_zero<uint16_t>(weight.data(), weight.numel());
    case DType::F32: return all_signed_zero<uint32_t>(weight.data(), weight.numel());
    case DType::F64: return all_signed_zero<uint64_t>(weight.data(), weight.numel());
    default: fail("a FastH3 gate must be a float tensor, got ", weight.str());
  }
}

int64_t checkpoint_default_passes(bool checkpoint_has_gates, int64_t base_default) {
  return checkpoint_has_gates ? kStudentPasses : base_default;
}

FastH3Plan resolve_fasth3_plan(bool checkpoint_has_gates, const FastH3Choices& choices, int64_t base_default_passes) {
  FastH3Plan plan;
  plan.passes = choices.passes.value_or(checkpoint_default_passes(checkpoint_has_gates, base_default_passes));
  const bool sparse = choices.attention ? *choices.attention == AttentionChoice::Sparse : checkpoint_has_gates;
  if (!sparse) {
    H3_CHECK(!choices.sparsity && !choices.tile_elems,
             "--sparsity and the VSA tile size need the sparse attention: a FastH3 checkpoint (to_gate_compress "
             "weights) or the sparse attention selected for this one");
    return plan;
  }
  plan.kind = checkpoint_has_gates ? DitAttentionKind::kSparseGated : DitAttentionKind::kSparsePure;
  plan.tile_elems = choices.tile_elems.value_or(checkpoint_has_gates ? kStudentTileElems : kDefaultTileElems);
  vsa_tile_shape(plan.tile_elems);  // validates it
  plan.vsa.sparsity = choices.sparsity.value_or(0.0);
  H3_CHECK(plan.vsa.sparsity >= 0.0 && plan.vsa.sparsity < 1.0, "--sparsity must be in [0, 1) (the fraction of video ",
           "key tiles each video query tile skips), got ", plan.vsa.sparsity);
  return plan;
}

std::string describe_fasth3_attention(const FastH3Plan& plan) {
  if (plan.kind == DitAttentionKind::kDense) return "dense";
  const auto s = vsa_tile_shape(plan.tile_elems);
  return cat("VSA-H3 ",
             plan.kind == DitAttentionKind::kSparseGated ? "with gates (FastH3 student)"
                                                         : "without gates (pure sparse, gate GEMM skipped)",
             ", tile ", plan.tile_elems, " (", s[0], "x", s[1], "x", s[2], "), sparsity ", plan.vsa.sparsity,
             plan.vsa.mode == VsaMode::kExempt ? ", exempt" : ", compete");
}

std::string describe_fasth3_plan(const FastH3Plan& plan) {
  return cat("attention: ", describe_fasth3_attention(plan), "; ", plan.passes, " passes");
}

}  // namespace h3
