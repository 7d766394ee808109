// The MiniMax-H3 transformer ("DiT", spec/dit.md): weights from either checkpoint layout and the forward pass,
// computed only through the Backend op set.
//
// Two ways to run it:
// - forward(args): one complete forward with exactly the reference forward's arguments (batch 1 dropped);
// - begin_request(layout, text, timesteps) once per request, then step(video, audio, timestep indices) per sampling
//   step, then end_request(). begin_request computes everything that does not change across the steps (refined
//   text, RoPE tables, the AdaLN and norm_out tables of every timestep the request will use); a step runs only the
//   input projections, the blocks and the heads. forward() is begin_request + step + end_request (one code path).
//
// A request may trade fidelity for speed (DitRequestOptions: h3.c's --layers, --core-reuse, --token-reduction); the
// defaults are the exact forward, bit for bit.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "io/config.h"
#include "io/snapshot.h"
#include "models/block_streamer.h"
#include "models/block_streaming.h"
#include "models/dit/dit_sparse_attention.h"
#include "tensor/tensor.h"

namespace h3 {

// Modality tags of the packed sequence (checkpoint contract: they index the AdaLN table).
constexpr int64_t kDitTagVideo = 0;
constexpr int64_t kDitTagText = 1;
constexpr int64_t kDitTagAudio = 2;
constexpr int64_t kDitModalities = 3;
// Parameters per (timestep, modality) row of a block's AdaLN table, in checkpoint order.
constexpr int kShiftMsa = 0, kScaleMsa = 1, kGateMsa = 2, kShiftMlp = 3, kScaleMlp = 4, kGateMlp = 5;
constexpr int kAdaLnParams = 6;
// Parameters per timestep row of the norm_out table: shift first, then scale.
constexpr int kOutShift = 0, kOutScale = 1, kOutParams = 2;

// Host (CPU) tensors, exactly the reference forward's arguments with the batch axis of 1 dropped.
struct DitForwardArgs {
  Tensor hidden_states;                              // [Nv, patch_dim] float
  Tensor audio_hidden_states;                        // [Na, audio_in_channels] float
  Tensor encoder_hidden_states;                      // [Nt, text_dim] float
  std::vector<float> timestep;                       // T values (the distinct noise levels), finite
  std::vector<int64_t> timestep_indices, token_tags;  // L each
  Tensor position_ids;                               // [L, 3] f64 or f32 (cast to f32 inside, as the reference does)
  std::vector<int64_t> video_indices, audio_indices, text_indices;  // a partition of [0, L)
};

struct DitOutput {
  Tensor sample;        // host F32 [Nv, patch_dim], rows in video_indices order
  Tensor audio_sample;  // host F32 [Na, audio_in_channels], rows in audio_indices order
};

// What stays fixed across the steps of one request.
struct DitLayout {
  std::vector<int64_t> token_tags;  // L
  Tensor position_ids;              // [L, 3] host, f64 or f32
  std::vector<int64_t> video_indices, audio_indices, text_indices;
  // The generated video's patch grid (frames, patch rows, patch columns): its rows are the last frames·rows·columns
  // entries of video_indices, frame-major, then row-major. Only token reduction reads it (zeros: not given).
  std::array<int64_t, 3> target_video_grid{};
};

// --precision (issue 18): fp8 runs the main blocks' qkv, out, fc1 and fc2 products in FP8 E4M3
// (Backend::linear_fp8_quantized, their inputs quantized by the ops that make them: rms_norm_modulate_fp8,
// gated_residual_modulate_fp8, self_attention_fp8, swiglu_fp8), their weights quantized once when a block becomes
// resident, their bf16 copies freed; the refiner, the AdaLN and the float32 modules stay as loaded. Weights whose
// dimensions are not multiples of 16 stay bf16. fp8_attention computes the main blocks' attention itself in FP8
// (Backend::self_attention_in_fp8; its output then quantized for the out product as above; the refiner's stays as
// it is). Default: bf16, the exact forward.
struct DitPrecision {
  bool fp8 = false;
  Fp8Scaling fp8_scaling = Fp8Scaling::Channel;
  bool fp8_attention = false;
};

struct DitOptions {
  // AdaLN projection weights (39% of all parameters) are needed only in begin_request. false: keep them as host
  // (mmap) views and stream each block's weight through the backend while its tables are computed; true: keep
  // them resident on the backend.
  bool keep_adaln_weights = false;
  // The checkpoint blocks whose attention and FFN weights Dit::load loads (absent: all). The others are loaded when
  // a request runs them (select_blocks).
  std::optional<std::vector<int64_t>> blocks = std::nullopt;
  // Absent: the blocks are resident. Present: they stream through a ring of device block buffers
  // (models/block_streaming.h).
  std::optional<BlockStreaming> streaming = std::nullopt;
  DitPrecision precision{};
};

// A request's speed controls (issue 16, h3.c's); the defaults are the exact forward.
struct DitRequestOptions {
  // --layers: how many of the checkpoint's blocks run (absent: all), min_dit_layers(num_layers)..num_layers. The
  // ones dropped have the lowest AdaLN gate magnitudes over this request's timesteps (h3.c's ranking,
  // models/dit/dit_layers.h); their weights are freed, and loaded again when a later request runs them.
  std::optional<int64_t> layers;
  // --core-reuse: the blocks (the core) run on the first step, every core_reuse-th step after it and the last pass;
  // a step between adds the residual the last of them held — the core's output minus its input — to its own fresh
  // input projection, then runs norm_out and the heads. 1: every step runs the core.
  int64_t core_reuse = 1;
  // --token-reduction: pairs of horizontally adjacent target-video rows run as one row inside the middle blocks
  // (models/dit/dit_token_reduction.h; needs DitLayout::target_video_grid).
  bool token_reduction = false;
  // The request's passes (step's `pass` numbers them): core reuse refreshes on the last. 0: unknown (no such refresh).
  int64_t passes = 0;
  // FastH3 (models/dit/dit_fasth3.h, spec/fasth3.md): absent, the main blocks' attention is dense. Present: it is
  // VSA-H3 over tiles of tile_elems rows (64 or 256), and a block with a non-zero to_gate_compress adds the gated
  // pooled branch (pure sparse otherwise). Needs DitLayout::target_video_grid with the generated video rows as the
  // packed tail, the CPU backend, and no token reduction.
  struct SparseAttention {
    int64_t tile_elems = 0;
    VsaOptions vsa;
  };
  std::optional<SparseAttention> sparse_attention;
};

// Argument validation (all of it lives in dit_args.cpp). Each throws h3::Error with one sentence naming the
// tensor and the rule. validate_dit_forward_args checks everything forward() needs, before any work.
void validate_dit_forward_args(const DitConfig& c, const DitForwardArgs& a);
void validate_dit_request(const DitConfig& c, const DitLayout& layout, const Tensor& encoder_hidden_states,
                          const std::vector<float>& timesteps);
void validate_dit_request_options(const DitConfig& c, const DitRequestOptions& o);
void validate_dit_step(const DitConfig& c, int64_t num_video, int64_t num_audio, int64_t seq_len,
                       int64_t num_timesteps, const Tensor& video_rows, const Tensor& audio_rows,
                       const std::vector<int64_t>& timestep_index_per_row);

// The layout of a transformer folder (config.json + weights): from the config's class / field names.
// Returns a present Component; throws when DIR has no config.json.
Component dit_component_from_dir(const std::string& dir);

struct DitWeights;       // models/dit/dit_weights.h
class Communicator;      // parallel/communicator.h
struct DitBlockWeights;  // models/dit/dit_weights.h

// Makes checkpoint block `block`'s weights resident again into `out` (after select_blocks freed them): from the
// checkpoint file for a loaded Dit, regenerated for a random one.
using DitBlockLoader = std::function<void(int64_t block, DitBlockWeights& out)>;

class Dit {
 public:
  // Reads the config, checks every tensor against the manifest of the component's layout (the weight keys must
  // agree with it), builds the fused weights and uploads them.
  static std::unique_ptr<Dit> load(Backend& be, const Component& transformer, DitOptions opt = {});
  // A DiT over weights already made on `be` (e.g. generated on the device for benchmarks: no checkpoint file).
  // `w` must have the shapes load_dit_weights makes for `cfg`. Without `reload`, a block select_blocks freed
  // cannot be made resident again. `streaming` (PinnedHost only: there is no file to read): the blocks' matrices
  // move to pinned host copies and stream through the ring (DitOptions::streaming).
  static std::unique_ptr<Dit> from_weights(Backend& be, DitConfig cfg, Layout layout, DitWeights w,
                                           DitBlockLoader reload = {},
                                           std::optional<BlockStreaming> streaming = std::nullopt,
                                           DitPrecision precision = {});
  ~Dit();
  Dit(const Dit&) = delete;
  Dit& operator=(const Dit&) = delete;

  const DitConfig& config() const;
  // Whether the checkpoint is a FastH3 student (to_gate_compress in every main block; models/dit/dit_fasth3.h).
  bool has_gates() const;
  Layout checkpoint_layout() const;

  // One complete forward (validates args first). Ends any request in progress.
  DitOutput forward(const DitForwardArgs& args);

  // Starts a request (replacing any request in progress): `timesteps` is the global list of every noise level the
  // request will use; steps address it through their per-row indices. The AdaLN tables of a timestep list are
  // cached, so a second request with the same list skips their computation. Runs select_blocks first.
  void begin_request(const DitLayout& layout, const Tensor& encoder_hidden_states, const std::vector<float>& timesteps,
                     const DitRequestOptions& options = {});
  // video_rows [Nv, patch_dim], audio_rows [Na, audio_in_channels] (host, float); timestep_index_per_row [L]
  // indexes begin_request's `timesteps`. `pass`: the step's pass of the request, 0-based (token reduction's early
  // phase and core reuse's last refresh read it); absent: the number of steps of this request before it.
  DitOutput step(const Tensor& video_rows, const Tensor& audio_rows, const std::vector<int64_t>& timestep_index_per_row,
                 std::optional<int64_t> pass = std::nullopt);
  void end_request();
  // What begin_request and step refuse, alone (no work, nothing on the backend): for callers that must refuse before
  // several ranks start (parallel/dit_group.h).
  void check_request(const DitLayout& layout, const Tensor& encoder_hidden_states, const std::vector<float>& timesteps,
                     const DitRequestOptions& options = {}) const;
  void check_step(const Tensor& video_rows, const Tensor& audio_rows,
                  const std::vector<int64_t>& timestep_index_per_row, std::optional<int64_t> pass = std::nullopt) const;

  // The checkpoint blocks a request over `timesteps` with `layers` runs (all when absent, else h3.c's gate ranking
  // over the AdaLN tables of every block), made resident: the others are freed, the missing ones loaded again (from the
  // checkpoint, or through from_weights' loader). The tables are cached as begin_request's.
  std::vector<int64_t> select_blocks(const std::vector<float>& timesteps, std::optional<int64_t> layers);
  // The checkpoint blocks resident now, ascending (none while the blocks stream); and the bytes of every weight
  // held on the backend (with streaming: the ring's buffers, the norms and the non-block weights).
  std::vector<int64_t> resident_blocks() const;
  uint64_t resident_weight_bytes() const;
  // With DitOptions::streaming: the last pass's copies (bytes, copy time, compute's wait) and the memory the ring
  // holds; absent for resident blocks.
  std::optional<BlockStreamingStats> streaming_stats() const;
  // With streaming: the host memory the ring holds (its pinned copies or its staging), without measuring a pass;
  // 0 for resident blocks.
  uint64_t streaming_host_bytes() const;

  // How many times AdaLN + norm_out tables have been computed for a new timestep list (a cache hit does not count).
  int64_t adaln_table_builds() const;

  // Ulysses sequence parallelism (issue 21; parallel/dit_group.h drives it): this DiT becomes rank comm->rank() of
  // a group of comm->size() DiTs with the same weights, each on its own backend. Every rank then calls
  // begin_request and step with the same arguments at the same time, each from its own thread: a step computes the
  // packed rows of this rank's shard (contiguous, sizes differing by at most one), exchanges q|k|v by all-to-all so
  // that each rank attends over all rows with num_attention_heads / size heads, exchanges the attention output
  // back, and gathers every rank's rows before the heads: every rank returns the whole output. The refined text
  // and the AdaLN tables are computed on every rank. null (the default): alone, the unsharded forward. Throws
  // when the group's size does not divide the heads; set it between requests.
  void set_communicator(Communicator* comm);

  struct Impl;

 private:
  explicit Dit(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace h3
