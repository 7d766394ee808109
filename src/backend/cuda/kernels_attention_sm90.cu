// Our attention kernel for Hopper (sm_90a): non-causal, head_dim 64 or 128, bf16 or f16 in and out, f32 softmax and
// accumulation. The schedule is FlashAttention-3's (Shah et al., 2024), written here from its description:
//
// - One CTA per 128 (or 192) query rows of one head: a producer warpgroup whose one thread issues TMA loads
//   (cp.async.bulk.tensor) of Q once and of K and V tiles of 128 or 176 keys into a two-stage shared-memory ring, each
//   slot guarded by a "full" mbarrier (transaction bytes) and an "empty" mbarrier (consumers' release), and two (or,
//   for head_dim 64, three) consumer warpgroups of 64 query rows each that issue wgmma.mma_async for S = Q·Kᵀ (both
//   operands in shared memory) and O += P·V (P from registers, V in shared memory read N-major).
// - Intra-warpgroup overlap: while S_j = Q·K_jᵀ and O += P_{j-1}·V_{j-1} run on the tensor cores, nothing waits;
//   the warpgroup then waits for S_j only, computes its online softmax, waits for the P·V product, rescales O and
//   rounds P_j to 16 bits.
// - Ping-pong between the consumer warpgroups: named barriers make them take turns issuing their GEMMs, so one
//   warpgroup's softmax (exp2 on the SFU) overlaps the others' GEMMs.
// - Q, K and V are read where the q/k norm + RoPE kernel left them (packed q|k|v rows or head-major copies)
//   through 4-D tensor maps (channel, row, head, segment) with the 128-byte swizzle; rows past the end of a
//   segment are zero-filled by TMA and masked to −∞ as keys. O goes out through the warpgroup's own Q rows in
//   shared memory (swizzled the same way) and 16-byte coalesced stores.
//
// Arithmetic: S in f32; softmax in the log2 domain with the row maximum (ex2.approx); P rounded to the input type
// before P·V, as FlashAttention and cuDNN do; row sums of the unrounded f32 P; O scaled by 1/sum in f32 and
// rounded once.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/sm90_attention.cuh"

namespace h3::cuda {

namespace {

// The PTX wrappers and the host's tensor-map encoder (sm90_primitives.cuh), the two GEMMs of one tile, the online
// softmax and the box geometry kBoxCols / kRowBytes (sm90_attention.cuh).
using namespace sm90;

constexpr int kWgRows = 64;          // query rows per consumer warpgroup
constexpr int kStages = 2;           // K/V ring depth
constexpr int kQFull = 0;
constexpr int kKFull = 1, kKEmpty = kKFull + kStages, kVFull = kKEmpty + kStages, kVEmpty = kVFull + kStages;
constexpr int kBarriers = kVEmpty + kStages;
constexpr int kProducerRegs = 24;

// The schedule for head_dim DH (64 or 128: one or two boxes of 64 channels per row), K/V tiles of BN keys (128, or
// FlashAttention-3's 176 for head_dim 128: fewer per-tile waits and O rescales) and NC consumer warpgroups of 64
// query rows (2, or 3 for head_dim 64 as FlashAttention-3 runs it: with half the tensor work per score, a third
// warpgroup's softmax hides behind the other two's GEMMs). Shared memory from a 1 KiB-aligned base: Q, the K ring,
// the V ring, the mbarriers, then the stalled flag.
template <int DH, int BN, int NC>
struct Tiling {
  static_assert(DH == 64 || DH == 128, "head_dim 64 or 128");
  static_assert(BN % 16 == 0 && BN <= 256 && (BN * kRowBytes) % 1024 == 0, "K/V tile rows");
  static_assert(NC == 2 || NC == 3, "two or three consumer warpgroups");
  static constexpr int kBlockM = NC * kWgRows;                 // query rows per CTA
  static constexpr int kThreads = 128 * (1 + NC);
  static constexpr uint32_t kQBoxBytes = kBlockM * kRowBytes;  // kBlockM query rows x 64 channels
  static constexpr int kBoxes = DH / kBoxCols;                 // boxes of 64 channels per row
  static constexpr uint32_t kQTileBytes = kBoxes * kQBoxBytes;
  static constexpr uint32_t kBoxBytes = BN * kRowBytes;        // BN rows x 64 channels
  static constexpr uint32_t kTileBytes = kBoxes * kBoxBytes;   // BN rows x DH channels
  static constexpr uint32_t kQOff = 0;
  static constexpr uint32_t kKOff = kQOff + kQTileBytes;
  static constexpr uint32_t kVOff = kKOff + kStages * kTileBytes;
  static constexpr uint32_t kBarOff = kVOff + kStages * kTileBytes;
  static constexpr uint32_t kStalledOff = kBarOff + kBarriers * 8;     // int: a wait timed out
  static constexpr size_t kSmemBytes = kStalledOff + 16 + 1024;        // + slack to align the base
  static constexpr uint32_t kReleaseArrivals = NC * 4;                 // lane 0 of every consumer warp
  // Named barriers (0 is __syncthreads): one turn barrier per consumer, then one per consumer for its epilogue.
  static constexpr int kTurnBarrier = 1, kEpilogueBarrier = 1 + NC;
  // The register file split: (24 + NC·regs)·128 ≤ 64 Ki.
  static constexpr int kConsumerRegs = NC == 2 ? 240 : 160;
  static_assert((kProducerRegs + NC * kConsumerRegs) * 128 <= 65536, "register budget");
};

struct HopperParams {
  void* o = nullptr;
  int64_t o_row = 0, o_head = 0, o_batch = 0;
  int seq_len = 0, group = 1;  // group: query heads per k/v head
  float scale_log2 = 0.f;
  int* err = nullptr;          // the backend's device error word
};

// ---- the kernel ----

template <typename T, int DH, int BN, int NC>
__global__ void __launch_bounds__(Tiling<DH, BN, NC>::kThreads, 1)
    hopper_attention_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                            const __grid_constant__ CUtensorMap tv, const HopperParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = smem_address(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char* const base_ptr = smem_raw + (base - raw);
  using Kv = Tiling<DH, BN, NC>;
  constexpr int kBlockM = Kv::kBlockM;
  const uint32_t bars = base + Kv::kBarOff;
  auto bar = [bars](int i) { return bars + 8u * static_cast<uint32_t>(i); };
  volatile int* const stalled = reinterpret_cast<volatile int*>(base_ptr + Kv::kStalledOff);
  int* const err = p.err;
  auto wait = [stalled, err](uint32_t b, uint32_t parity) { mbar_wait(b, parity, stalled, err); };

  const int m_block = blockIdx.x, h = blockIdx.y, seg = blockIdx.z, hk = h / p.group;
  const int len = p.seq_len, tiles = (len + BN - 1) / BN;
  // The warpgroup index, visibly uniform to the compiler (wgmma and setmaxnreg need warpgroup-uniform control flow).
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);

  if (threadIdx.x == 0) {
    mbar_init(bar(kQFull), 1);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(bar(kKFull + s), 1);
      mbar_init(bar(kVFull + s), 1);
      mbar_init(bar(kKEmpty + s), Kv::kReleaseArrivals);
      mbar_init(bar(kVEmpty + s), Kv::kReleaseArrivals);
    }
    *stalled = 0;
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    // Producer: one thread issues every load; slot s of tile j is refilled once both consumers released tile j − 2.
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) {
      mbar_expect_tx(bar(kQFull), Kv::kQTileBytes);
      for (int b = 0; b < Kv::kBoxes; ++b)
        tma_load(base + Kv::kQOff + b * Kv::kQBoxBytes, &tq, bar(kQFull), b * kBoxCols, m_block * kBlockM, h, seg);
      for (int j = 0; j < tiles; ++j) {
        const int s = j % kStages;
        const uint32_t free_parity = ((j / kStages) & 1) ^ 1;  // a fresh barrier passes parity 1 at once
        const uint32_t k_dst = base + Kv::kKOff + s * Kv::kTileBytes, v_dst = base + Kv::kVOff + s * Kv::kTileBytes;
        wait(bar(kKEmpty + s), free_parity);
        mbar_expect_tx(bar(kKFull + s), Kv::kTileBytes);
        for (int b = 0; b < Kv::kBoxes; ++b)
          tma_load(k_dst + b * Kv::kBoxBytes, &tk, bar(kKFull + s), b * kBoxCols, j * BN, hk, seg);
        wait(bar(kVEmpty + s), free_parity);
        mbar_expect_tx(bar(kVFull + s), Kv::kTileBytes);
        for (int b = 0; b < Kv::kBoxes; ++b)
          tma_load(v_dst + b * Kv::kBoxBytes, &tv, bar(kVFull + s), b * kBoxCols, j * BN, hk, seg);
      }
    }
    return;
  }

  // Consumers.
  setmaxnreg_inc<Kv::kConsumerRegs>();
  const int c = wg - 1, tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
  const uint32_t q = base + Kv::kQOff + c * kWgRows * kRowBytes;  // this warpgroup's 64 rows in each Q box
  const bool lead = lane == 0;
  auto k_tile = [base](int s) { return base + Kv::kKOff + s * Kv::kTileBytes; };
  auto v_tile = [base](int s) { return base + Kv::kVOff + s * Kv::kTileBytes; };
  // Turn-taking: a consumer waits for its turn before issuing a tile's GEMMs and then hands the turn over.
  // Consumer 1 hands consumer 0 the first turn; its last hand-over is skipped so that both barriers end balanced.
  // The turn goes round: consumer c hands it to c + 1 (mod NC). The last consumer hands consumer 0 the first turn
  // and skips its last hand-over, so that every barrier ends balanced.
  auto take_turn = [c] { named_sync(Kv::kTurnBarrier + c, 2 * 128); };
  auto pass_turn = [c, tiles](int j) {
    if (c != NC - 1 || j + 1 < tiles) named_arrive(Kv::kTurnBarrier + (c + 1) % NC, 2 * 128);
  };
  if (c == NC - 1) named_arrive(Kv::kTurnBarrier, 2 * 128);

  float o[DH / 2], s[BN / 2];
  uint32_t pf[BN / 4];
#pragma unroll
  for (int i = 0; i < DH / 2; ++i) o[i] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f, alpha0, alpha1;
  const bool ragged = len % BN != 0;

  wait(bar(kQFull), 0);
  wait(bar(kKFull), 0);
  take_turn();
  wgmma_fence();
  gemm_qk<T, Kv>(s, q, k_tile(0));
  wgmma_commit();
  pass_turn(0);
  wgmma_wait<0>();
  fence_operands(s);
  if (lead) mbar_arrive(bar(kKEmpty));
  if (tiles == 1 && ragged) mask_tail(s, 0, len, lane);
  online_softmax(s, m0, m1, l0, l1, p.scale_log2, alpha0, alpha1);
  round_p<T>(s, pf);

  for (int j = 1; j < tiles; ++j) {
    const int st = j % kStages, pst = (j - 1) % kStages;
    const uint32_t parity = (j / kStages) & 1, prev_parity = ((j - 1) / kStages) & 1;
    wait(bar(kKFull + st), parity);
    wait(bar(kVFull + pst), prev_parity);  // long loaded: waiting here keeps the two issues back to back
    take_turn();
    wgmma_fence();
    gemm_qk<T, Kv>(s, q, k_tile(st));
    wgmma_commit();
    gemm_pv<T, Kv>(o, pf, v_tile(pst));
    wgmma_commit();
    pass_turn(j);
    wgmma_wait<1>();  // S_j is ready; P_{j-1}·V_{j-1} may still run
    fence_operands(s);
    if (lead) mbar_arrive(bar(kKEmpty + st));
    if (j == tiles - 1 && ragged) mask_tail(s, j * BN, len, lane);
    online_softmax(s, m0, m1, l0, l1, p.scale_log2, alpha0, alpha1);
    finish_pv(o, alpha0, alpha1, [&] {
      if (lead) mbar_arrive(bar(kVEmpty + pst));
    });
    round_p<T>(s, pf);
  }

  {
    const int st = (tiles - 1) % kStages;
    wait(bar(kVFull + st), ((tiles - 1) / kStages) & 1);
    wgmma_fence();
    gemm_pv<T, Kv>(o, pf, v_tile(st));
    wgmma_commit();
    wgmma_wait<0>();
    fence_operands(o);
    if (lead) mbar_arrive(bar(kVEmpty + st));
  }

  // Epilogue: O / row sum, rounded, staged in this warpgroup's Q rows (their last reader, the final S GEMM, has
  // completed) with the same 128-byte swizzle (conflict-free), then 16-byte stores of whole rows.
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  const float inv0 = 1.f / l0, inv1 = 1.f / l1;  // ≥ 1 term equals 1: the row maximum's
  unsigned char* const stage = base_ptr + (q - base);
  const int r0 = warp * 16 + lane / 4, r1 = r0 + 8, quad = lane & 3;
#pragma unroll
  for (int k = 0; k < DH / 8; ++k) {
    const uint32_t box = (k / 8) * Kv::kQBoxBytes, chunk = k % 8;
    *reinterpret_cast<uint32_t*>(stage + box + r0 * kRowBytes + ((chunk ^ (r0 & 7)) << 4) + quad * 4) =
        pack2<T>(o[4 * k] * inv0, o[4 * k + 1] * inv0);
    *reinterpret_cast<uint32_t*>(stage + box + r1 * kRowBytes + ((chunk ^ (r1 & 7)) << 4) + quad * 4) =
        pack2<T>(o[4 * k + 2] * inv1, o[4 * k + 3] * inv1);
  }
  named_sync(Kv::kEpilogueBarrier + c, 128);
  T* const og = static_cast<T*>(p.o) + seg * p.o_batch + h * p.o_head;
  const int row0 = m_block * kBlockM + c * kWgRows;
  constexpr int kChunks = DH / 8;  // 16-byte pieces of an output row
#pragma unroll
  for (int it = 0; it < kWgRows * kChunks / 128; ++it) {
    const int idx = it * 128 + tid, row = idx / kChunks, ch = idx % kChunks;
    if (row0 + row >= len) continue;
    const uint4 v = *reinterpret_cast<const uint4*>(stage + (ch / 8) * Kv::kQBoxBytes + row * kRowBytes +
                                                    (((ch % 8) ^ (row & 7)) << 4));
    *reinterpret_cast<uint4*>(og + int64_t(row0 + row) * p.o_row + ch * 8) = v;
  }
#endif
}

// ---- host side ----

// q, k or v as a 4-D tensor (channel, row, head, segment) with boxes of 64 channels x box_rows rows.
bool encode(CUtensorMap& map, Elem t, const void* base, int dh, int len, int heads, int segments, int64_t row,
            int64_t head, int64_t segment, int box_rows) {
  const cuuint64_t dims[4] = {cuuint64_t(dh), cuuint64_t(len), cuuint64_t(heads), cuuint64_t(segments)};
  const cuuint64_t strides[3] = {cuuint64_t(row) * 2, cuuint64_t(head) * 2, cuuint64_t(segment) * 2};
  const cuuint32_t box[4] = {kBoxCols, cuuint32_t(box_rows), 1, 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUtensorMapDataType type = t == Elem::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  return tensor_map_encoder()(&map, type, 4, const_cast<void*>(base), dims, strides, box, elem_strides,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

bool strides16(std::initializer_list<int64_t> s) {
  for (int64_t v : s)
    if (v <= 0 || v % 8 != 0) return false;
  return true;
}

template <typename T, int DH, int BN, int NC>
void launch_typed(const CUtensorMap& tq, const CUtensorMap& tk, const CUtensorMap& tv, const HopperParams& hp,
                  const FlashParams& p, cudaStream_t s) {
  using Tl = Tiling<DH, BN, NC>;
  static bool configured = false;
  if (!configured) {
    H3_CUDA_CHECK(cudaFuncSetAttribute(hopper_attention_kernel<T, DH, BN, NC>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Tl::kSmemBytes)),
                  "hopper attention");
    configured = true;
  }
  const dim3 grid((p.seq_len + Tl::kBlockM - 1) / Tl::kBlockM, p.heads_q, p.batch);
  hopper_attention_kernel<T, DH, BN, NC><<<grid, Tl::kThreads, Tl::kSmemBytes, s>>>(tq, tk, tv, hp);
  H3_CUDA_LAUNCH_CHECK(s, "hopper attention");
}

template <int DH, int BN, int NC>
const char* launch_tiled(const FlashParams& p, const HopperParams& hp, cudaStream_t s) {
  alignas(64) CUtensorMap tq, tk, tv;
  if (!encode(tq, p.t, p.q, DH, p.seq_len, p.heads_q, p.batch, p.q_row, p.q_head, p.q_batch,
              Tiling<DH, BN, NC>::kBlockM) ||
      !encode(tk, p.t, p.k, DH, p.seq_len, p.heads_kv, p.batch, p.k_row, p.kv_head, p.kv_batch, BN) ||
      !encode(tv, p.t, p.v, DH, p.seq_len, p.heads_kv, p.batch, p.v_row, p.kv_head, p.kv_batch, BN))
    return "the driver refused the tensor maps";
  if (p.t == Elem::BF16)
    launch_typed<__nv_bfloat16, DH, BN, NC>(tq, tk, tv, hp, p, s);
  else
    launch_typed<__half, DH, BN, NC>(tq, tk, tv, hp, p, s);
  return nullptr;
}

}  // namespace

const char* launch_hopper_attention(const FlashParams& p, const HopperSchedule& sched, int* err, cudaStream_t s) {
  if (sched.key_tile != 128 && sched.key_tile != 176) return "key tile is not 128 or 176";
  if (sched.hd64_consumers != 2 && sched.hd64_consumers != 3) return "not 2 or 3 consumer warpgroups";
  if (p.head_dim != 64 && p.head_dim != 128) return "head_dim is not 64 or 128";
  if (p.causal) return "causal attention";
  if (p.t == Elem::F32) return "f32 q/k/v";
  if (!(p.scale > 0.f) || !std::isfinite(p.scale)) return "non-positive scale";
  if (p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0) return "query heads not a multiple of k/v heads";
  if (p.batch >= 65536 || p.heads_q >= 65536) return "too many segments or heads for the grid";
  if (!strides16({p.q_row, p.k_row, p.v_row, p.o_row, p.q_head, p.kv_head, p.o_head, p.q_batch, p.kv_batch,
                  p.o_batch}) ||
      !aligned16(p.q) || !aligned16(p.k) || !aligned16(p.v) || !aligned16(p.o))
    return "q/k/v/o not 16-byte aligned in every stride";
  if (!device_is_sm90()) return "not a compute capability 9.0 device";
  if (!tensor_map_encoder()) return "the driver has no cuTensorMapEncodeTiled";
  if (p.seq_len == 0 || p.batch == 0) return nullptr;
  HopperParams hp;
  hp.o = p.o;
  hp.o_row = p.o_row;
  hp.o_head = p.o_head;
  hp.o_batch = p.o_batch;
  hp.seq_len = p.seq_len;
  hp.group = p.heads_q / p.heads_kv;
  hp.scale_log2 = p.scale * 1.4426950408889634f;
  hp.err = err;
  if (p.head_dim == 128)
    return sched.key_tile == 176 ? launch_tiled<128, 176, 2>(p, hp, s) : launch_tiled<128, 128, 2>(p, hp, s);
  if (sched.hd64_consumers == 3) return launch_tiled<64, 128, 3>(p, hp, s);  // 176-key tiles would spill
  return sched.key_tile == 176 ? launch_tiled<64, 176, 2>(p, hp, s) : launch_tiled<64, 128, 2>(p, hp, s);
}

}  // namespace h3::cuda
