// The Qwen3-VL language model as MiniMax-H3's conditioner (spec/conditioner.md §7): token embeddings and the first
// kConditionerLayers decoder layers; the output is the hidden state after layer 50, before any final norm. Text-only
// presentations (every M-RoPE axis is the token index) and presentations with images and videos (the vision tower's
// rows in place of the pads, 3-axis positions, DeepStack). Computes only through Backend.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/config.h"
#include "io/snapshot.h"
#include "models/block_streamer.h"
#include "models/block_streaming.h"
#include "models/qwen3vl/rope.h"
#include "tensor/tensor.h"

namespace h3 {

struct VisionFeatures;

class QwenTextModel {
 public:
  // Reads the component's config.json and loads decoder layers 0..kConditionerLayers-1 (never the later layers, the
  // final norm or lm_head) onto `backend`, in its activation dtype. The token embedding table (1.6 GB at the
  // released size) stays on the host, a view of the checkpoint: encode() uploads only the prompt's rows. Throws
  // naming the tensor when one is missing or misshapen. `backend` must outlive the model.
  // `streaming`: the decoder layers' four matrices (q|k|v, o, gate|up, down) stream through a ring of device layer
  // buffers (models/block_streamer.h) instead of being resident; the norms stay. The hidden states are the same.
  static std::unique_ptr<QwenTextModel> load(Backend& backend, const Component& text_encoder,
                                             std::optional<BlockStreaming> streaming = std::nullopt);
  // The same from a parsed config and a checkpoint location (folder, index or file; see Checkpoint::open).
  // `num_layers` < kConditionerLayers loads and runs only the leading layers — for benchmarks; MiniMax-H3's
  // conditioning is the output of all kConditionerLayers.
  static std::unique_ptr<QwenTextModel> load(Backend& backend, const TextEncoderConfig& config,
                                             const std::string& weights, int64_t num_layers = kConditionerLayers,
                                             std::optional<BlockStreaming> streaming = std::nullopt);
  ~QwenTextModel();
  // A model of random weights made on the backend (models/random_weights.h): matrices N(0, 1/√fan_in), norms near 1,
  // embeddings N(0, 1) (made on the backend and kept on the host like a loaded model's). For benchmarks at the
  // released size and tests at tiny sizes; deterministic for a seed.
  // `streaming`: the layers' matrices stream from pinned host copies (made one layer at a time on the backend).
  static std::unique_ptr<QwenTextModel> random(Backend& backend, const TextEncoderConfig& config, uint64_t seed,
                                               int64_t num_layers = kConditionerLayers,
                                               std::optional<BlockStreaming> streaming = std::nullopt);
  // Bytes the resident weights of `num_layers` layers occupy on a backend of activation dtype `dt` (the embedding
  // table stays on the host).
  static uint64_t resident_bytes(const TextEncoderConfig& config, DType dt, int64_t num_layers = kConditionerLayers);

  // The hidden state after the last loaded decoder layer (layer kConditionerLayers-1) for the token sequence `ids`
  // (batch 1, no padding, no truncation, any length >= 1): host F32 [ids.size(), hidden_size]. Throws for an empty
  // sequence or an id outside the vocabulary.
  // Without vision features every token is embedded as a token, at position = its index on all three axes. With
  // `images` and/or `videos` (QwenVisionModel::encode on the same backend, one call per modality, as the reference
  // calls its tower) the <|image_pad|> tokens take the image rows and the <|video_pad|> tokens the video rows, each
  // in sequence order (the n-th run of a modality holds its n-th image, or the next temporal block of its videos),
  // the positions are multimodal_positions' (rope.h), and after decoder layer k each pad row gets DeepStack feature k
  // of its own modality added (§7.2–7.4, 7.6). Throws when the runs and the grids disagree, or for a pad token of a
  // modality whose features are not given.
  Tensor encode(const std::vector<int32_t>& ids, const VisionFeatures* images = nullptr,
                const VisionFeatures* videos = nullptr);

  const TextEncoderConfig& config() const { return config_; }

  // Rows of the MLP computed at once (default 4096): bounds its [rows, 2·intermediate] buffer on long sequences.
  // The result does not depend on it.
  void set_mlp_row_chunk(int64_t rows);

  // Bytes of the weights held on the backend (with streaming: the norms and the ring's buffers).
  uint64_t device_weight_bytes() const;
  // With streaming: the last encode's copies and the memory the ring holds; absent for resident layers.
  std::optional<BlockStreamingStats> streaming_stats() const;
  // With streaming: the host memory the ring holds, without measuring an encode; 0 for resident layers.
  uint64_t streaming_host_bytes() const;

 private:
  struct Layer {
    Tensor input_norm;  // [hidden]
    Tensor qkv;         // [(heads + 2·kv_heads)·head_dim, hidden]: q_proj | k_proj | v_proj
    Tensor q_norm, k_norm;  // [head_dim]
    Tensor o;           // [hidden, heads·head_dim]
    Tensor post_norm;   // [hidden]
    Tensor gate_up;     // [2·intermediate, hidden]: gate_proj | up_proj
    Tensor down;        // [hidden, intermediate]
  };

  struct Scratch;

  QwenTextModel(Backend& backend, const TextEncoderConfig& config);
  // `layer` with the streamed matrices `m` (qkv, o, gate_up, down) in `out`.
  static const Layer& with_matrices(const Layer& layer, const std::vector<Tensor>& m, Layer& out);
  void decoder_layer(const Layer& layer, Tensor& x, Scratch& scratch);
  // Where one modality's pad tokens are (I32 on the backend) and the features that fill them.
  struct VisionRows {
    const VisionFeatures* features;
    Tensor rows;
  };
  // The embedding rows of `ids` on the backend, with every modality's feature rows in place of its pads.
  Tensor embed(const std::vector<int32_t>& ids, const std::vector<VisionRows>& vision);

  Backend& backend_;
  TextEncoderConfig config_;
  std::vector<float> inv_freq_;  // [head_dim / 2]
  Tensor embed_tokens_;          // [vocab, hidden] host (checkpoint dtype)
  std::vector<Layer> layers_;    // layers 0..kConditionerLayers-1 (streamed: their norms only)
  std::unique_ptr<BlockStreamer> streamer_;
  int64_t mlp_row_chunk_ = 4096;
};

}  // namespace h3
