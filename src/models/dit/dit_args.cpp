// Every check on the DiT's forward arguments, in one place. Each failure is one sentence naming the tensor (by the
// reference forward's argument name) and the rule it breaks; all checks run before any computation.
#include <cmath>
#include <limits>

#include "models/dit/dit.h"
#include "models/dit/dit_layers.h"
#include "util/error.h"

namespace h3 {

namespace {

using Index = std::vector<int64_t>;

int64_t size_of(const Index& v) { return static_cast<int64_t>(v.size()); }

// The sequence length, from position_ids [L, 3].
int64_t check_position_ids(const Tensor& p) {
  H3_CHECK(p.defined() && p.ndim() == 2 && p.dim(1) == 3, "position_ids must be an [L, 3] tensor of (t, h, w) ",
           "coordinates, got ", p.defined() ? p.str() : std::string("nothing"));
  H3_CHECK(dtype_is_float(p.dtype()), "position_ids must be a float tensor (f64 or f32), got ", p.str());
  const int64_t L = p.dim(0);
  H3_CHECK(L >= 1, "position_ids must have at least one row (the packed sequence is empty)");
  H3_CHECK(L <= std::numeric_limits<int32_t>::max(), "position_ids has ", L, " rows; at most 2^31 - 1 are supported");
  for (int64_t i = 0; i < p.numel(); ++i)
    H3_CHECK(std::isfinite(p.at(i)), "position_ids[", i / 3, ", ", i % 3, "] = ", p.at(i), " is not finite");
  return L;
}

void check_token_tags(const Index& tags, int64_t L) {
  H3_CHECK(size_of(tags) == L, "token_tags must have one entry per row of the sequence (L = ", L,
           " from position_ids), got ", tags.size());
  for (size_t i = 0; i < tags.size(); ++i)
    H3_CHECK(tags[i] == kDitTagVideo || tags[i] == kDitTagText || tags[i] == kDitTagAudio, "token_tags[", i, "] = ",
             tags[i], " is not a modality tag (0 video, 1 text, 2 audio)");
}

void check_timesteps(const std::vector<float>& t) {
  H3_CHECK(!t.empty(), "timestep must hold at least one value");
  for (size_t i = 0; i < t.size(); ++i)
    H3_CHECK(std::isfinite(t[i]), "timestep[", i, "] = ", t[i], " is not finite");
}

void check_timestep_indices(const Index& ti, int64_t L, int64_t T, const char* name) {
  H3_CHECK(size_of(ti) == L, name, " must have one entry per row of the sequence (L = ", L, "), got ", ti.size());
  for (size_t i = 0; i < ti.size(); ++i)
    H3_CHECK(ti[i] >= 0 && ti[i] < T, name, "[", i, "] = ", ti[i], " is out of range [0, ", T, ") (timestep holds ",
             T, " value", T == 1 ? "" : "s", ")");
}

// video_indices, audio_indices, text_indices: every entry in [0, L), no row named twice, every row named once.
void check_partition(const Index& video, const Index& audio, const Index& text, int64_t L) {
  const Index* sets[] = {&video, &audio, &text};
  const char* names[] = {"video_indices", "audio_indices", "text_indices"};
  std::vector<int8_t> owner(L, -1);
  std::vector<int64_t> owner_pos(L, -1);
  for (int s = 0; s < 3; ++s)
    for (size_t i = 0; i < sets[s]->size(); ++i) {
      const int64_t r = (*sets[s])[i];
      H3_CHECK(r >= 0 && r < L, names[s], "[", i, "] = ", r, " is out of range [0, ", L,
               ") (the sequence has L = ", L, " rows, from position_ids)");
      H3_CHECK(owner[r] < 0, names[owner[r]], "[", owner_pos[r], "] and ", names[s], "[", i, "] both name row ", r,
               "; video_indices, audio_indices and text_indices must partition [0, ", L, ")");
      owner[r] = static_cast<int8_t>(s);
      owner_pos[r] = static_cast<int64_t>(i);
    }
  for (int64_t r = 0; r < L; ++r)
    H3_CHECK(owner[r] >= 0, "row ", r, " of the sequence is in none of video_indices, audio_indices, text_indices; ",
             "together they must partition [0, ", L, ")");
}

// A float tensor [rows, width] whose row count comes from an index set.
void check_rows(const Tensor& t, const char* name, int64_t rows, const char* rows_from, int64_t width,
                const char* width_what) {
  const std::string got = t.defined() ? t.str() : std::string("nothing");
  H3_CHECK(t.defined() && t.ndim() == 2 && t.dim(0) == rows && t.dim(1) == width, name, " must be [", rows, ", ",
           width, "] (one row per entry of ", rows_from, ", ", width_what, "), got ", got);
  H3_CHECK(dtype_is_float(t.dtype()), name, " must be a float tensor, got ", got);
}

void check_layout(const DitConfig& c, const Index& tags, const Tensor& position_ids, const Index& video,
                  const Index& audio, const Index& text, const Tensor& encoder_hidden_states) {
  const int64_t L = check_position_ids(position_ids);
  check_token_tags(tags, L);
  check_partition(video, audio, text, L);
  check_rows(encoder_hidden_states, "encoder_hidden_states", size_of(text), "text_indices", c.text_dim, "text_dim");
}

}  // namespace

void validate_dit_request(const DitConfig& c, const DitLayout& layout, const Tensor& encoder_hidden_states,
                          const std::vector<float>& timesteps) {
  check_layout(c, layout.token_tags, layout.position_ids, layout.video_indices, layout.audio_indices,
               layout.text_indices, encoder_hidden_states);
  check_timesteps(timesteps);
}

void validate_dit_request_options(const DitConfig& c, const DitRequestOptions& o) {
  if (o.layers)
    H3_CHECK(*o.layers >= min_dit_layers(c.num_layers) && *o.layers <= c.num_layers, "layers must be between ",
             min_dit_layers(c.num_layers), " and ", c.num_layers, " (seven tenths of the transformer's ", c.num_layers,
             " blocks, rounded up, to all of them), got ", *o.layers);
  H3_CHECK(o.core_reuse >= 1, "core_reuse must be at least 1 (1: the core runs on every step), got ", o.core_reuse);
  H3_CHECK(o.passes >= 0, "passes must be >= 0 (0: unknown), got ", o.passes);
  if (!o.sparse_attention) return;
  vsa_tile_shape(o.sparse_attention->tile_elems);  // 64 or 256
  vsa_kept_video_tiles(o.sparse_attention->vsa.sparsity, 1);  // sparsity in [0, 1)
  H3_CHECK(!o.token_reduction, "the sparse attention and token reduction exclude each other: VSA-H3 tiles the ",
           "generated video's full grid, which token reduction pairs up");
}

void validate_dit_step(const DitConfig& c, int64_t num_video, int64_t num_audio, int64_t seq_len,
                       int64_t num_timesteps, const Tensor& video_rows, const Tensor& audio_rows,
                       const std::vector<int64_t>& timestep_index_per_row) {
  check_rows(video_rows, "hidden_states", num_video, "video_indices", c.patch_dim(),
             "patch_dim = in_channels x prod(patch_size)");
  check_rows(audio_rows, "audio_hidden_states", num_audio, "audio_indices", c.audio_in_channels, "audio_in_channels");
  check_timestep_indices(timestep_index_per_row, seq_len, num_timesteps, "timestep_indices");
}

void validate_dit_forward_args(const DitConfig& c, const DitForwardArgs& a) {
  check_layout(c, a.token_tags, a.position_ids, a.video_indices, a.audio_indices, a.text_indices,
               a.encoder_hidden_states);
  check_timesteps(a.timestep);
  validate_dit_step(c, size_of(a.video_indices), size_of(a.audio_indices), a.position_ids.dim(0),
                    static_cast<int64_t>(a.timestep.size()), a.hidden_states, a.audio_hidden_states,
                    a.timestep_indices);
}

}  // namespace h3
