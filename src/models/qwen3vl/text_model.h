// The Qwen3-VL language model as MiniMax-H3's conditioner (spec/conditioner.md §7): token embeddings and the first
// kConditionerLayers decoder layers; the output is the hidden state after layer 50, before any final norm.
// Text-only presentations for now (every M-RoPE axis is the token index). Computes only through Backend.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/config.h"
#include "io/snapshot.h"
#include "models/qwen3vl/rope.h"
#include "tensor/tensor.h"

namespace h3 {

class QwenTextModel {
 public:
  // Reads the component's config.json and loads embed_tokens and decoder layers 0..kConditionerLayers-1 (never the
  // later layers, the final norm or lm_head) onto `backend`, in its activation dtype. Throws naming the tensor when
  // one is missing or misshapen. `backend` must outlive the model.
  static std::unique_ptr<QwenTextModel> load(Backend& backend, const Component& text_encoder);
  // The same from a parsed config and a checkpoint location (folder, index or file; see Checkpoint::open).
  // `num_layers` < kConditionerLayers loads and runs only the leading layers — for benchmarks; MiniMax-H3's
  // conditioning is the output of all kConditionerLayers.
  static std::unique_ptr<QwenTextModel> load(Backend& backend, const TextEncoderConfig& config,
                                             const std::string& weights, int64_t num_layers = kConditionerLayers);

  // The hidden state after the last loaded decoder layer (layer kConditionerLayers-1) for the token sequence `ids` (batch 1, no padding,
  // no truncation, any length >= 1): host F32 [ids.size(), hidden_size]. Throws for an empty sequence or an id
  // outside the vocabulary.
  Tensor encode(const std::vector<int32_t>& ids);

  const TextEncoderConfig& config() const { return config_; }

  // Rows of the MLP computed at once (default 4096): bounds its [rows, 2·intermediate] buffer on long sequences.
  // The result does not depend on it.
  void set_mlp_row_chunk(int64_t rows);

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

  QwenTextModel(Backend& backend, const TextEncoderConfig& config) : backend_(backend), config_(config) {}
  void decoder_layer(const Layer& layer, Tensor& x, Scratch& scratch);

  Backend& backend_;
  TextEncoderConfig config_;
  std::vector<float> inv_freq_;  // [head_dim / 2]
  Tensor embed_tokens_;          // [vocab, hidden]
  std::vector<Layer> layers_;    // layers 0..kConditionerLayers-1
  int64_t mlp_row_chunk_ = 4096;
};

}  // namespace h3
