// Where the video VAE's tensors come from. The model asks for every tensor by its diffusers name
// (spec/video_vae.md §11.1); a source answers from a diffusers checkpoint, from the original release's file
// (renaming and re-laying the tensors on the fly, §11.2), or from anything else (random weights in a benchmark).
#pragma once
#include <functional>
#include <string>

#include "io/config.h"
#include "io/safetensors.h"
#include "io/snapshot.h"
#include "tensor/tensor.h"

namespace h3 {

// Returns the host tensor (any float dtype) stored under a diffusers name; throws when it is missing.
using VideoVaeTensorSource = std::function<Tensor(const std::string& diffusers_name)>;

// Diffusers layout: names as stored.
VideoVaeTensorSource diffusers_video_vae_source(const Checkpoint& ckpt);

// Original layout (`video_vae/source/model.safetensors`):
//   decoder.proj_in.*                 ← decoder.x_embedder.*
//   …attn.to_q/to_k/to_v.{weight,bias} ← rows of …attn.to_qkv.*, stored per head as [q_h | k_h | v_h] (3·head_dim rows
//                                        per head)
//   …attn.to_out.0.*                  ← …attn.to_out.*
//   …ff.net.0.proj.*                  ← …ff.w1.* with its halves swapped (original [gate | value], diffusers
//                                        [value | gate])
//   …ff.net.2.*                       ← …ff.w2.*
//   encoder.down_blocks.{i}.resnets.{j}.*        ← encoder.down.{i}.block.{j}.* (…conv_shortcut.* ← …nin_shortcut.*)
//   encoder.down_blocks.{i}.downsamplers.0.conv.* ← encoder.down.{i}.downsample.conv.*
// Every other name is the same in both layouts. Re-laid tensors are host copies.
VideoVaeTensorSource original_video_vae_source(const Checkpoint& ckpt, const VideoVaeConfig& config);
// The tensors of a video VAE component by diffusers name, whichever layout it is stored in.
VideoVaeTensorSource video_vae_source(const Component& vae, const VideoVaeConfig& config);

// The video VAE component stored in `dir`: an original `video_vae/` folder (config.json + source/config.json) or a
// diffusers `vae/` folder (config.json). Throws naming the folder when it is neither.
Component video_vae_component_at(const std::string& dir);

}  // namespace h3
