"""FastH3 (VSA-H3 sparse attention, few-step student sampling) fixtures: tests/fixtures/fasth3/.

Made from FastVideo's own torch path (spec/fasth3.md): its VSA-H3 backend module
(fastvideo/attention/backends/video_sparse_attn_h3.py with its helpers in video_sparse_attn.py), whose Triton
block-sparse kernel is replaced by FastVideo's token-level torch oracle (reference_sparse_attention in
fastvideo/tests/attention/test_vsa_h3_metadata.py, the function FastVideo uses as its kernel parity oracle), and its
MiniMax-H3 scheduler (fastvideo/models/schedulers/scheduling_minimax_h3.py). Only those files are imported from a
FastVideo source tree named by FASTVIDEO_SRC (the repository root, the folder holding fastvideo/), by
fastvideo_source.py: the packages around them are empty namespace packages so their heavy __init__ files
(distributed, Triton kernels) never run, and the two small modules the backend needs from them (fastvideo.logger,
fastvideo.distributed) are stubs.

    FASTVIDEO_SRC=/path/to/FastVideo PYTHONPATH=.ref python3 tools/reference/make_fixtures.py --only fasth3

Cases (each folder: case.safetensors + case.json):
  geometry_t64, geometry_t256   tiling of a ragged grid with prefix segments: partition/untile indices, tile sizes
  routing_nan_tie               _build_block_mask on hand-made scores holding a NaN and an exact tie
  attn_t64_*, attn_t256_*       the backend's forward (tile, pool, score, route, sparse attention, gated pooled
                                branch, untile) in float64 (expected) and float32 (its self-noise)
  schedule                      the student's sampling grid (5 grid points = 4 forwards, basic_fasth3.py) and one
                                step of each scheduler
"""

import argparse
import math
import os
import pathlib
import sys
import types

from common import fresh_dir, log, save_tensors, write_json  # first: it hides the GPUs before torch loads

import torch  # noqa: E402

from fastvideo_source import VSA_H3_BACKEND, import_fastvideo  # noqa: E402

HEADS = 2
HEAD_DIM = 8
PREFIX_NAME = "transformer_blocks.{}.attn"  # FastVideo's layer prefix; layer_idx_from_prefix parses the index
# The student's sampling (basic_fasth3.py): 5 grid points (4 forwards) on the base schedulers' shifts (spec/sampling.md
# §2: video 12, audio 3).
STUDENT_GRID_POINTS = 5
SHIFTS = {"video": 12.0, "audio": 3.0}


# ----------------------------------------------------------------------------------------------------------------
# FastVideo import with stubbed surroundings


def load_fastvideo(src: str) -> dict:
    """Import FastVideo's VSA-H3 backend, its test oracle and its scheduler from a source tree."""
    backend, oracle, scheduler = import_fastvideo(src, [
        VSA_H3_BACKEND, "fastvideo.tests.attention.test_vsa_h3_metadata",
        "fastvideo.models.schedulers.scheduling_minimax_h3"
    ])

    def oracle_kernel(q, k, v, mask, variable_block_sizes):
        """The block-sparse kernel's contract, computed by FastVideo's token-level oracle (BSHD tiled buffers)."""
        meta = types.SimpleNamespace(variable_block_sizes=variable_block_sizes,
                                     tile_elems=q.shape[1] // variable_block_sizes.numel())
        return oracle.reference_sparse_attention(q, k, v, mask, meta), None

    def oracle_kernel_bhsd(q, k, v, mask, variable_block_sizes):
        out, _ = oracle_kernel(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), mask, variable_block_sizes)
        return out.transpose(1, 2).contiguous(), None

    # The backend calls these module globals; FastVideo's own import left them None (no fastvideo_kernel here).
    backend.block_sparse_attn_64_bhsd = oracle_kernel_bhsd
    backend.block_sparse_attn_256_bshd = oracle_kernel
    return {"backend": backend, "oracle": oracle, "scheduler": scheduler}


# ----------------------------------------------------------------------------------------------------------------
# Inputs


def packed_rows(prefix_segments, grid, heads, dim, seed, dtype=torch.float32) -> torch.Tensor:
    """[1, L, heads, dim] activations: N(0,1) noise plus a smooth field over the video grid (and over the prefix
    row index), so tile means differ clearly and routing is not decided by rounding; rounded through bf16 like the
    post-RoPE activations the backend receives."""
    gen = torch.Generator().manual_seed(seed)
    t, h, w = grid
    prefix = sum(prefix_segments)
    freq = torch.randn(4, heads, dim, generator=gen) * 0.5
    phase = torch.rand(heads, dim, generator=gen) * 2 * math.pi
    f, i, j = torch.meshgrid(torch.arange(t), torch.arange(h), torch.arange(w), indexing="ij")
    video_arg = (f.reshape(-1, 1, 1) * freq[0] + i.reshape(-1, 1, 1) * freq[1] + j.reshape(-1, 1, 1) * freq[2])
    prefix_arg = torch.arange(prefix).reshape(-1, 1, 1) * freq[3] * 0.1
    field = torch.cos(torch.cat([prefix_arg, video_arg], dim=0) + phase) * 1.5
    noise = torch.randn(prefix + t * h * w, heads, dim, generator=gen)
    return (noise + field).to(torch.bfloat16).to(dtype)[None]


def build_meta(backend, prefix_segments, grid, tile_elems, sparsity, exempt=True, dense_layers=()):
    return backend.MiniMaxH3VSAMetadataBuilder().build(
        current_timestep=0,
        raw_latent_shape=tuple(grid),
        patch_size=(1, 1, 1),
        VSA_sparsity=sparsity,
        prefix_segments=tuple(prefix_segments),
        device=torch.device("cpu"),
        exempt=exempt,
        dense_layers=tuple(dense_layers),
        tile_size=tile_elems,
    )


def vsa_forward(backend, meta, layer, q, k, v, gate):
    """FastVideo's DistributedAttention_VSA.forward without sequence parallelism: stack, tile, forward, untile."""
    impl = backend.MiniMaxH3VSAImpl(num_heads=q.shape[2], head_size=q.shape[3], causal=False,
                                    softmax_scale=q.shape[3]**-0.5, prefix=PREFIX_NAME.format(layer))
    stack = [q, k, v] if gate is None else [q, k, v, gate]
    tiled = impl.preprocess_qkv(torch.cat(stack, dim=0), meta).clone()  # tile() aliases the builder's buffer
    parts = tiled.chunk(len(stack), dim=0)
    out = impl.forward(parts[0], parts[1], parts[2], parts[3] if gate is not None else None, meta)
    return impl.postprocess_output(out, meta), parts


def tile_scores(backend, meta, tiled_q, tiled_k):
    pooled_q = backend._pool_tiles(tiled_q, meta.variable_block_sizes, meta.tile_elems)
    pooled_k = backend._pool_tiles(tiled_k, meta.variable_block_sizes, meta.tile_elems)
    return torch.matmul(pooled_q, pooled_k.transpose(-2, -1)) / (tiled_q.shape[-1]**0.5)


def rel_l2(a, b) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


# ----------------------------------------------------------------------------------------------------------------
# Cases

# Ragged in t, h and w at both tile shapes; every prefix segment leaves a partial tail tile, one segment is empty.
GEOMETRIES = {
    "t64": {"prefix_segments": [70, 0, 5, 130], "grid": [9, 10, 13], "tile_elems": 64},
    "t256": {"prefix_segments": [300, 40], "grid": [6, 10, 13], "tile_elems": 256},
}
# Smaller grids for the attention cases (the files hold every row), still ragged everywhere.
ATTENTION_GEOMETRIES = {
    "t64": {"prefix_segments": [70, 0, 5, 30], "grid": [5, 6, 9], "tile_elems": 64},
    "t256": {"prefix_segments": [300, 40], "grid": [5, 10, 9], "tile_elems": 256},
}

ATTENTION_CASES = (
    # name, geometry, sparsity, exempt, gate, layer, dense_layers
    ("attn_t64_s0_gate", "t64", 0.0, True, True, 3, ()),
    ("attn_t64_s075_exempt_gate", "t64", 0.75, True, True, 3, ()),
    ("attn_t64_s075_exempt", "t64", 0.75, True, False, 3, ()),
    ("attn_t64_s05_compete", "t64", 0.5, False, False, 3, ()),
    ("attn_t64_s075_dense_layer", "t64", 0.75, True, True, 3, (3,)),
    ("attn_t256_s05_exempt_gate", "t256", 0.5, True, True, 1, ()),
    ("attn_t256_s0", "t256", 0.0, True, False, 1, ()),
)


def geometry_case(fv, root, name, spec) -> list:
    backend = fv["backend"]
    meta = build_meta(backend, spec["prefix_segments"], spec["grid"], spec["tile_elems"], 0.0)
    tile_shape = backend.VSA_H3_TILE_SHAPES[spec["tile_elems"]]
    partition, sizes, untile, n_prefix, n_video = backend._h3_tile_geometry(
        tuple(s for s in spec["prefix_segments"] if s > 0), tuple(spec["grid"]), torch.device("cpu"), tile_shape)
    total = sum(spec["prefix_segments"]) + math.prod(spec["grid"])
    failures = []
    # Self-checks: the sizes cover the sequence, and tiling then untiling is the identity.
    if int(sizes.sum()) != total or untile.numel() != total:
        failures.append(f"{name}: tile sizes/untile index do not cover {total} rows")
    x = torch.randn(1, total, 1, 1, generator=torch.Generator().manual_seed(5))
    impl = backend.MiniMaxH3VSAImpl(num_heads=1, head_size=1, causal=False, softmax_scale=1.0)
    if not torch.equal(impl.postprocess_output(impl.tile(x, meta), meta), x):
        failures.append(f"{name}: untile(tile(x)) != x")
    folder = fresh_dir(root / f"geometry_{name}")
    save_tensors(folder / "case.safetensors", {
        "tile_partition_indices": partition.to(torch.int64),
        "variable_block_sizes": sizes.to(torch.int64),
        "untile_combined_index": untile.to(torch.int64),
    })
    write_json(folder / "case.json", {
        "prefix_segments": spec["prefix_segments"], "grid": spec["grid"], "tile_elems": spec["tile_elems"],
        "tile_shape": list(tile_shape), "num_prefix_tiles": int(n_prefix), "num_video_tiles": int(n_video),
        "total_rows": total,
    })
    log(f"  geometry_{name}: {n_prefix} prefix + {n_video} video tiles, {total} rows")
    return failures


def routing_case(fv, root) -> list:
    """_build_block_mask on scores with a NaN and an exact tie (spec/fasth3.md §4: FastVideo leaves both to topk)."""
    backend = fv["backend"]
    n_prefix, n_video, sparsity = 2, 8, 0.7  # k_vid = ceil(0.3 * 8) = 3
    n = n_prefix + n_video
    gen = torch.Generator().manual_seed(11)
    scores = torch.randn(1, 2, n, n, generator=gen, dtype=torch.float32)
    # head 0, query tile 4: a NaN among the video keys (topk orders NaN as the largest value).
    scores[0, 0, 4, n_prefix + 5] = float("nan")
    # head 0, query tile 6: the 3rd and 4th largest video scores tie exactly (the cut falls inside the tie).
    row = scores[0, 0, 6, n_prefix:]
    order = torch.argsort(row, descending=True)
    row[order[3]] = row[order[2]]
    # head 1, query tile 7: a NaN and a tie together; and a tie between two prefix tiles (which are all kept).
    scores[0, 1, 7, n_prefix + 1] = float("nan")
    scores[0, 1, 7, n_prefix + 6] = scores[0, 1, 7, n_prefix + 2]
    scores[0, 1, 5, 0] = scores[0, 1, 5, 1]
    failures = []
    folder = fresh_dir(root / "routing_nan_tie")
    tensors = {"scores": scores}
    for mode, exempt in (("exempt", True), ("compete", False)):
        mask = backend._build_block_mask(scores, n_prefix, n_video, sparsity, exempt)
        k_vid = backend.compute_topk(sparsity, n_video)
        per_row = mask[:, :, n_prefix:].sum(-1)
        want = min(k_vid + n_prefix, n)  # exempt: k_vid video tiles + every prefix tile; compete: the same budget
        if not bool((per_row == want).all()) or not bool(mask[:, :, :n_prefix].all()):
            failures.append(f"routing_nan_tie/{mode}: rows do not keep {want} tiles")
        tensors[f"mask_{mode}"] = mask.to(torch.uint8)
    save_tensors(folder / "case.safetensors", tensors)
    write_json(folder / "case.json", {
        "num_prefix_tiles": n_prefix, "num_video_tiles": n_video, "sparsity": sparsity,
        "k_vid": backend.compute_topk(sparsity, n_video),
        "nan_rows": [[0, 4], [1, 7]], "tie_rows": [[0, 6], [1, 7], [1, 5]],
        "note": "masks are torch.topk's choice on the CPU (NaN counts as the largest value; tie order is "
                "implementation-defined). Rows without a NaN or a tie at the cut are the parity rows.",
    })
    log(f"  routing_nan_tie: k_vid {backend.compute_topk(sparsity, n_video)} of {n_video}")
    return failures


def attention_case(fv, root, case) -> list:
    name, geometry, sparsity, exempt, with_gate, layer, dense_layers = case
    backend = fv["backend"]
    spec = ATTENTION_GEOMETRIES[geometry]
    segments, grid, tile_elems = spec["prefix_segments"], spec["grid"], spec["tile_elems"]
    seed = 100 + ATTENTION_CASES.index(case) * 10
    q, k, v = (packed_rows(segments, grid, HEADS, HEAD_DIM, seed + i) for i in range(3))
    gate = packed_rows(segments, grid, HEADS, HEAD_DIM, seed + 3) * 0.5 if with_gate else None
    meta = build_meta(backend, segments, grid, tile_elems, sparsity, exempt, dense_layers)

    outputs = {}
    for label, dtype in (("f64", torch.float64), ("f32", torch.float32)):
        cast = [t.to(dtype) if t is not None else None for t in (q, k, v, gate)]
        out, tiled = vsa_forward(backend, meta, layer, *cast)
        outputs[label] = (out, tiled)
    out64, tiled64 = outputs["f64"]
    out32, _ = outputs["f32"]
    # _pool_tiles accumulates in fp32 whatever the input dtype, so the scores are fp32 in both runs.
    scores = tile_scores(backend, meta, tiled64[0], tiled64[1]).to(torch.float32)
    layer_sparsity = 0.0 if layer in dense_layers else sparsity
    mask = backend._build_block_mask(scores, meta.num_prefix_tiles, meta.num_video_tiles, layer_sparsity, exempt)

    failures = []
    noise = rel_l2(out32, out64)
    if not bool(torch.isfinite(out64).all()) or noise > 1e-4:
        failures.append(f"{name}: float32 vs float64 rel L2 {noise:.3g}")
    n_prefix = meta.num_prefix_tiles
    if not bool(mask[:, :, :n_prefix].all()):
        failures.append(f"{name}: a prefix query tile is not dense")
    prefix_rows = sum(segments)
    dense = torch.nn.functional.scaled_dot_product_attention(
        q.double().transpose(1, 2), k.double().transpose(1, 2), v.double().transpose(1, 2)).transpose(1, 2)
    if not with_gate:
        # Without a gate the prefix rows are exact dense attention, and at sparsity 0 every row is.
        rows = out64.shape[1] if layer_sparsity == 0.0 else prefix_rows
        err = float((out64[:, :rows] - dense[:, :rows]).abs().max())
        if err > 1e-10:
            failures.append(f"{name}: dense rows differ from SDPA by {err:.3g}")
    if layer_sparsity > 0.0 and rel_l2(out64[:, prefix_rows:], dense[:, prefix_rows:]) < 1e-6:
        failures.append(f"{name}: sparse video rows equal dense attention (routing had no effect)")

    folder = fresh_dir(root / name)
    tensors = {"q": q, "k": k, "v": v, "out": out64, "scores": scores,
               "mask": mask.to(torch.uint8), "variable_block_sizes": meta.variable_block_sizes.to(torch.int64),
               "untile_combined_index": meta.untile_combined_index.to(torch.int64)}
    if with_gate:
        tensors["gate"] = gate
    save_tensors(folder / "case.safetensors", tensors)
    write_json(folder / "case.json", {
        "prefix_segments": segments, "grid": grid, "tile_elems": tile_elems,
        "tile_shape": list(backend.VSA_H3_TILE_SHAPES[tile_elems]), "sparsity": sparsity, "exempt": exempt,
        "gate": with_gate, "layer": layer, "dense_layers": list(dense_layers), "layer_sparsity": layer_sparsity,
        "num_prefix_tiles": n_prefix, "num_video_tiles": meta.num_video_tiles,
        "k_vid": backend.compute_topk(layer_sparsity, meta.num_video_tiles),
        "heads": HEADS, "head_dim": HEAD_DIM, "f32_self_noise_rel_l2": noise,
    })
    log(f"  {name}: {n_prefix}+{meta.num_video_tiles} tiles, f32 self-noise rel L2 {noise:.2e}")
    return failures


def schedule_case(fv, root) -> list:
    """The student's grid: basic_fasth3.py's default num_inference_steps = 5 grid points (4 forwards) on the base
    schedulers (video shift 12, audio shift 3, spec/sampling.md §2); the step rule is the base scheduler's."""
    module = fv["scheduler"]
    tensors, info = {}, {"grid_points": STUDENT_GRID_POINTS, "forwards": STUDENT_GRID_POINTS - 1, "shifts": {}}
    failures = []
    for label, shift in SHIFTS.items():
        scheduler = module.MiniMaxH3Scheduler(shift=shift)
        scheduler.set_timesteps(STUDENT_GRID_POINTS, device="cpu")
        sample = torch.randn(3, 4, generator=torch.Generator().manual_seed(21))
        velocity = torch.randn(3, 4, generator=torch.Generator().manual_seed(22))
        stepped = []
        for timestep in scheduler.timesteps:
            sample = scheduler.step(velocity, timestep, sample, return_dict=False)[0]
            stepped.append(sample.clone())
        if scheduler.timesteps.numel() != STUDENT_GRID_POINTS - 1 or float(scheduler.sigmas[-1]) != 0.0:
            failures.append(f"schedule/{label}: expected {STUDENT_GRID_POINTS - 1} forwards ending at sigma 0")
        tensors[f"{label}_sigmas"] = scheduler.sigmas.to(torch.float32)
        tensors[f"{label}_timesteps"] = scheduler.timesteps.to(torch.float32)
        tensors[f"{label}_samples"] = torch.stack(stepped)
        info["shifts"][label] = shift
    tensors["sample0"] = torch.randn(3, 4, generator=torch.Generator().manual_seed(21))
    tensors["velocity"] = torch.randn(3, 4, generator=torch.Generator().manual_seed(22))
    folder = fresh_dir(root / "schedule")
    save_tensors(folder / "case.safetensors", tensors)
    write_json(folder / "case.json", info)
    log(f"  schedule: video sigmas {[round(float(s), 6) for s in tensors['video_sigmas']]}")
    return failures


def run(out) -> list:
    src = os.environ.get("FASTVIDEO_SRC", "")
    if not src:
        raise SystemExit("fx_fasth3 needs FASTVIDEO_SRC: the FastVideo source tree (the folder holding fastvideo/)")
    fv = load_fastvideo(src)
    root = fresh_dir(pathlib.Path(out) / "fasth3")
    failures = []
    for name, spec in GEOMETRIES.items():
        failures += geometry_case(fv, root, name, spec)
    failures += routing_case(fv, root)
    for case in ATTENTION_CASES:
        failures += attention_case(fv, root, case)
    failures += schedule_case(fv, root)
    for failure in failures:
        log(f"  SELF-CHECK FAILED: {failure}")
    return failures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="tests/fixtures")
    parser.add_argument("--fastvideo-src", default=os.environ.get("FASTVIDEO_SRC", ""))
    args = parser.parse_args()
    os.environ["FASTVIDEO_SRC"] = args.fastvideo_src
    sys.exit(1 if run(args.out) else 0)
