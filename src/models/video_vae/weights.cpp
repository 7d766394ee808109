#include "models/video_vae/weights.h"

#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/mapped_file.h"

namespace h3 {

namespace {

// Replaces the first occurrence of `from` (which must be present) by `to`.
std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  H3_CHECK(at != std::string::npos, "internal: '", from, "' not in '", s, "'");
  return s.replace(at, from.size(), to);
}

// Copies rows [row0, row0 + n) of `src` (rows along dim 0) into rows [dst_row0, …) of `dst`; same dtype and width.
void copy_rows(const Tensor& src, int64_t row0, int64_t n, Tensor& dst, int64_t dst_row0) {
  const size_t row_bytes = src.nbytes() / static_cast<size_t>(src.dim(0));
  std::memcpy(static_cast<char*>(dst.data()) + dst_row0 * row_bytes,
              static_cast<const char*>(src.data()) + row0 * row_bytes, n * row_bytes);
}

// Rows of one projection (0 = q, 1 = k, 2 = v) out of a per-head interleaved fused qkv tensor.
Tensor deinterleave_qkv(const Tensor& fused, int which, int64_t heads, int64_t head_dim, const std::string& what) {
  H3_CHECK(fused.ndim() >= 1 && fused.dim(0) == 3 * heads * head_dim, what, ": ", fused.str(), " should have ",
           3 * heads * head_dim, " rows (", heads, " heads x 3 x ", head_dim, ")");
  Shape shape = fused.shape();
  shape[0] = heads * head_dim;
  Tensor out = Tensor::empty(shape, fused.dtype());
  for (int64_t h = 0; h < heads; ++h) copy_rows(fused, h * 3 * head_dim + which * head_dim, head_dim, out, h * head_dim);
  return out;
}

// [first half | second half] → [second half | first half] along dim 0.
Tensor swap_halves(const Tensor& t, const std::string& what) {
  H3_CHECK(t.ndim() >= 1 && t.dim(0) % 2 == 0, what, ": ", t.str(), " needs an even number of rows");
  const int64_t half = t.dim(0) / 2;
  Tensor out = Tensor::empty(t.shape(), t.dtype());
  copy_rows(t, half, half, out, 0);
  copy_rows(t, 0, half, out, half);
  return out;
}

}  // namespace

VideoVaeTensorSource diffusers_video_vae_source(const Checkpoint& ckpt) {
  auto ck = std::make_shared<Checkpoint>(ckpt);
  return [ck](const std::string& name) { return ck->get(name); };
}

VideoVaeTensorSource video_vae_source(const Component& vae, const VideoVaeConfig& config) {
  const Checkpoint ckpt = Checkpoint::open(vae.weights);
  return vae.layout == Layout::Original ? original_video_vae_source(ckpt, config) : diffusers_video_vae_source(ckpt);
}

VideoVaeTensorSource original_video_vae_source(const Checkpoint& ckpt, const VideoVaeConfig& config) {
  auto ck = std::make_shared<Checkpoint>(ckpt);
  const int64_t heads = config.decoder_num_attention_heads, head_dim = config.decoder_attention_head_dim;
  return [ck, heads, head_dim](const std::string& name) -> Tensor {
    const std::string location = ck->location();
    for (int which = 0; which < 3; ++which) {
      const std::string proj = std::string(".attn.to_") + "qkv"[which] + ".";
      if (name.find(proj) != std::string::npos) {
        std::string orig = replace_once(name, proj, ".attn.to_qkv.");
        return deinterleave_qkv(ck->get(orig), which, heads, head_dim, location + ": " + orig);
      }
    }
    if (name.find(".attn.to_out.0.") != std::string::npos) return ck->get(replace_once(name, ".to_out.0.", ".to_out."));
    if (name.find(".ff.net.0.proj.") != std::string::npos) {
      std::string orig = replace_once(name, ".ff.net.0.proj.", ".ff.w1.");
      return swap_halves(ck->get(orig), location + ": " + orig);
    }
    if (name.find(".ff.net.2.") != std::string::npos) return ck->get(replace_once(name, ".ff.net.2.", ".ff.w2."));
    if (name.starts_with("decoder.proj_in.")) return ck->get(replace_once(name, "proj_in.", "x_embedder."));
    if (name.starts_with("encoder.down_blocks.")) {
      std::string orig = replace_once(name, "encoder.down_blocks.", "encoder.down.");
      if (orig.find(".resnets.") == std::string::npos)
        return ck->get(replace_once(orig, ".downsamplers.0.", ".downsample."));
      orig = replace_once(orig, ".resnets.", ".block.");
      if (orig.find(".conv_shortcut.") != std::string::npos)
        orig = replace_once(orig, ".conv_shortcut.", ".nin_shortcut.");
      return ck->get(orig);
    }
    return ck->get(name);
  };
}

Component video_vae_component_at(const std::string& dir) {
  using json = nlohmann::json;
  H3_CHECK(dir_exists(dir), "video VAE folder '", dir, "' does not exist");
  Component c;
  c.name = "vae";
  c.dir = dir;
  const std::string config = join_path(dir, "config.json"), source = join_path(dir, "source/config.json");
  H3_CHECK(file_exists(config), "'", dir, "' is not a video VAE folder: it has no config.json (expected a diffusers ",
           "vae/ folder or an original video_vae/ folder)");
  c.present = true;
  if (file_exists(source)) {
    // Original layout: the wrapper config names the weights file (source_path / source_safetensors_path).
    c.layout = Layout::Original;
    c.config_files = {config, source};
    json w = parse_json_file(config);
    std::string sub = "source", file = "model.safetensors";
    if (w.is_object() && w.contains("source_path") && w["source_path"].is_string()) sub = w["source_path"];
    if (w.is_object() && w.contains("source_safetensors_path") && w["source_safetensors_path"].is_string())
      file = w["source_safetensors_path"];
    c.weights = join_path(join_path(dir, sub), file);
  } else {
    c.layout = Layout::Diffusers;
    c.config_files = {config};
    c.weights = dir;
  }
  return c;
}

}  // namespace h3
