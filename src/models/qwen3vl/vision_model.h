// The Qwen3-VL vision tower (spec/conditioner.md §6; transformers' Qwen3VLVisionModel): patch rows of images (or
// video blocks) to one language-model row per merge block, plus the DeepStack features the language model adds after
// its first decoder layers. Loaded only for workflows that show pictures to the conditioner (fl2va, ref2va): it reads
// the text encoder checkpoint's `model.visual.*` tensors and nothing else. Computes only through Backend; the
// position-embedding table stays on the host, where each grid's interpolation is computed.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/config.h"
#include "io/snapshot.h"
#include "models/qwen3vl/image_processor.h"
#include "models/qwen3vl/vision_grid.h"
#include "tensor/tensor.h"

namespace h3 {

// What the tower hands the language model (QwenTextModel::encode), on the backend that computed it, in its
// activation dtype.
struct VisionFeatures {
  Tensor embeds;                  // [Σ tokens, out_hidden]: the final merger's rows, image after image
  std::vector<Tensor> deepstack;  // one [Σ tokens, out_hidden] per DeepStack tap, in block order
  std::vector<ImageGrid> grids;   // the images', in order
  int64_t merge_size = 0;  // vision_config.spatial_merge_size
};

// Host F32 copies of the tower's intermediate results (for parity tests and debugging; encode() fills it when given).
struct VisionStages {
  Tensor patch_embed;          // [N, hidden]
  Tensor block_input;          // [N, hidden]: patch_embed + the interpolated position embedding
  std::vector<Tensor> blocks;  // each block's output [N, hidden]
};

// torch.linspace(start, end, n) in float32 as PyTorch's CPU kernel computes it (spec/conditioner.md §6.2):
// step = (end − start)/(n − 1) in float32; the first n/2 points start + step·i, the others end − step·(n − 1 − i),
// each with a single rounding. n = 1 gives {start}.
std::vector<float> torch_linspace(float start, float end, int64_t n);

// The position-embedding table [side², hidden] (host, any float dtype; side = ⌊√num_position_embeddings⌋)
// bilinearly resampled to every grid (§6.2): rows in merge-block order, repeated for each temporal block; host F32
// [Σ patches, hidden] holding the values a model computing in `dt` gets — the table and the four bilinear weights
// rounded to dt, every product and each of the three sums (left to right) rounded to dt.
Tensor interpolate_position_embedding(const Tensor& table, const std::vector<ImageGrid>& grids, int64_t merge_size,
                                      DType dt);
// The table as a model computing in `dt` holds it: host F32 of every value rounded to dt.
Tensor round_position_table(const Tensor& table, DType dt);

class QwenVisionModel {
 public:
  // Reads the text encoder's config.json and loads its vision tower onto `backend`, in its activation dtype. Throws
  // for a vision config h3 cannot run (naming the field and the rule) and for a missing or misshapen tensor (naming
  // it). `backend` must outlive the model.
  static std::unique_ptr<QwenVisionModel> load(Backend& backend, const Component& text_encoder);
  static std::unique_ptr<QwenVisionModel> load(Backend& backend, const TextEncoderConfig& config,
                                               const std::string& weights);
  // A tower of random weights made on `backend` in its activation dtype (models/random_weights.h: matrices
  // N(0, 1/√fan_in), LayerNorm weights near 1, small biases; the position table N(0, 1), kept on the host as load()
  // keeps it), the same for the same seed. Throws for a vision config h3 cannot run, as load() does.
  static std::unique_ptr<QwenVisionModel> random(Backend& backend, const TextEncoderConfig& config, uint64_t seed);
  // Bytes the resident weights occupy on a backend of activation dtype `dt` (the position table stays on the host).
  static uint64_t resident_bytes(const TextEncoderConfig& config, DType dt);

  // The tower on the patch rows of `inputs` (prepare_images): attention stays within each temporal block of each
  // image. Throws when the rows do not match the grids.
  VisionFeatures encode(const QwenVisionInputs& inputs, VisionStages* stages = nullptr);

  const QwenVisionConfig& config() const { return config_.vision; }

 private:
  struct Block {
    Tensor norm1_w, norm1_b, qkv_w, qkv_b, proj_w, proj_b, norm2_w, norm2_b, fc1_w, fc1_b, fc2_w, fc2_b;
  };
  struct Merger {
    Tensor norm_w, norm_b, fc1_w, fc1_b, fc2_w, fc2_b;
  };
  struct Scratch;

  QwenVisionModel(Backend& backend, const TextEncoderConfig& config) : backend_(backend), config_(config) {}
  // What load() and random() derive from the config alone: the MLP activation and the rotary frequencies.
  void derive_constants();
  void block(const Block& b, Tensor& x, Scratch& s);
  // LayerNorm (over hidden before grouping, or over the merged width after) → Linear → GELU (erf) → Linear.
  Tensor merge(const Merger& m, const Tensor& x, bool norm_after_grouping);

  Backend& backend_;
  TextEncoderConfig config_;
  bool tanh_gelu_ = true;        // the blocks' MLP activation (hidden_act); the mergers always use the erf GELU
  std::vector<float> inv_freq_;  // the 2-D rotary's [head_dim / 4]
  Tensor patch_w_, patch_b_;     // [hidden, 3·tp·p·p], [hidden]
  Tensor pos_table_;             // [num_position_embeddings, hidden], host (checkpoint dtype)
  // The position rows of a call (interpolate_position_embedding's values) from the table rounded once and the blocks
  // of the last grids seen (a session's keyframes and references come back at the same sizes).
  Tensor position_rows(const std::vector<ImageGrid>& grids);
  static constexpr size_t kPositionBlocksCached = 8;
  Tensor pos_rounded_;                                                     // round_position_table(pos_table_, act)
  std::list<std::pair<std::pair<int64_t, int64_t>, Tensor>> pos_blocks_;  // (h, w) → one temporal block, MRU first
  std::vector<Block> blocks_;
  Merger merger_;
  std::vector<Merger> deepstack_;  // deepstack_merger_list, in config order
};

}  // namespace h3
