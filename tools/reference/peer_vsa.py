"""FastVideo's own VSA-H3 attention on the GPU (run.sh --vsa-bench), beside bench_dit --vsa: one main block's
attention as FastVideo's DistributedAttention_VSA.forward runs it without sequence parallelism (q|k|v|gate stacked
and scattered into the padded tile buffer, MiniMaxH3VSAImpl.forward: tile means, scores, top-k block mask, its Triton
block-sparse kernel, the gated pooled branch; the output gathered back), at the shapes and tile size of our bench,
and PyTorch's dense SDPA on the same q/k/v for scale. Random bf16 q/k/v/gate [1, L, 56, 128] (the released model's
heads); the rows as bench_dit lays them out (36 text rows, the audio rows, the video grid at the tail: prefix
segments (36, 0, audio)).

FastVideo comes from source, not installed: FASTVIDEO_SRC (the folder holding fastvideo/) and FASTVIDEO_KERNEL_SRC
(the folder holding fastvideo_kernel/, i.e. FastVideo's fastvideo-kernel/python; default FASTVIDEO_SRC's
fastvideo-kernel/python), imported by fastvideo_source.py. Needs torch with CUDA and Triton.

Writes OUT/peer_vsa.json {"<shape>/tile<T>/s<sparsity>/<gated|pure>": {"s": sorted seconds per attention call},
"<shape>/dense_sdpa": {...}}; per-forward figures are 50 such calls.

    FASTVIDEO_SRC=/path/to/FastVideo python3 tools/reference/peer_vsa.py [--shapes 864x480x124,1344x768x124]
        [--sparsities 0.9,0.0] [--tile 64] [--reps 5] [--pure]
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fastvideo_source import VSA_H3_BACKEND, import_fastvideo, import_fastvideo_kernel  # noqa: E402

HEADS, HEAD_DIM, TEXT_ROWS, LAYERS = 56, 128, 36, 50


def rows_for(w, h, frames):
    """bench_dit's rows_for: frames rounded to 17n+5, 5n+2 latent frames, 2 audio rows per 1/40 s."""
    n = max(0, (frames - 5 + 16) // 17)
    f = 17 * n + 5
    audio = 2 * math.ceil(f / 24.0 * 32000.0 / 800.0)
    return audio, (5 * n + 2, h // 32, w // 32)


def timed(fn, reps):
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    return sorted(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="864x480x124,1344x768x124")
    ap.add_argument("--sparsities", default="0.9,0.0")
    ap.add_argument("--tile", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--pure", action="store_true", help="no gate (pure sparse) instead of the gated pooled branch")
    args = ap.parse_args()
    src = os.environ.get("FASTVIDEO_SRC", "")
    if not src:
        raise SystemExit("peer_vsa needs FASTVIDEO_SRC: the FastVideo source tree (the folder holding fastvideo/)")
    kernel_src = os.environ.get("FASTVIDEO_KERNEL_SRC", os.path.join(src, "fastvideo-kernel", "python"))
    # The kernels first: the backend's own `from fastvideo_kernel...` imports then find them.
    import_fastvideo_kernel(kernel_src, ["fastvideo_kernel.block_sparse_attn", "fastvideo_kernel.block_sparse_attn_256",
                                         "fastvideo_kernel.triton_kernels.index"])
    (backend,) = import_fastvideo(src, [VSA_H3_BACKEND])
    if backend.block_sparse_attn_64_bhsd is None:
        raise SystemExit("FastVideo's VSA-H3 backend did not find fastvideo_kernel's block-sparse kernels")
    dev = torch.device("cuda")
    torch.manual_seed(0)
    gated = not args.pure
    results = {"torch": torch.__version__, "device": torch.cuda.get_device_name()}
    with torch.no_grad():
        for shape in args.shapes.split(","):
            w, h, frames = (int(x) for x in shape.split("x"))
            audio, grid = rows_for(w, h, frames)
            L = TEXT_ROWS + audio + math.prod(grid)
            q, k, v, gate = (torch.randn(1, L, HEADS, HEAD_DIM, device=dev, dtype=torch.bfloat16) for _ in range(4))
            impl = backend.MiniMaxH3VSAImpl(num_heads=HEADS, head_size=HEAD_DIM, causal=False,
                                            softmax_scale=HEAD_DIM**-0.5, prefix="transformer_blocks.0.attn")
            for sparsity in (float(s) for s in args.sparsities.split(",")):
                meta = backend.MiniMaxH3VSAMetadataBuilder().build(
                    current_timestep=0, raw_latent_shape=grid, patch_size=(1, 1, 1), VSA_sparsity=sparsity,
                    prefix_segments=(TEXT_ROWS, 0, audio), device=dev, exempt=True, tile_size=args.tile)

                def attention():
                    stack = [q, k, v, gate] if gated else [q, k, v]
                    tiled = impl.preprocess_qkv(torch.cat(stack, dim=0), meta)
                    parts = tiled.chunk(len(stack), dim=0)
                    out = impl.forward(parts[0], parts[1], parts[2], parts[3] if gated else None, meta)
                    return impl.postprocess_output(out, meta)

                key = f"{shape}/tile{args.tile}/s{sparsity}/{'gated' if gated else 'pure'}"
                ts = timed(attention, args.reps)
                results[key] = {"s": ts, "L": L, "prefix_tiles": meta.num_prefix_tiles,
                                "video_tiles": meta.num_video_tiles}
                print(f"  {key}: L {L}, {meta.num_prefix_tiles} + {meta.num_video_tiles} tiles: "
                      f"{ts[len(ts) // 2] * 1e3:.2f} ms per block, {ts[len(ts) // 2] * LAYERS:.3f} s per {LAYERS} "
                      "blocks", flush=True)
            qh, kh, vh = (x.transpose(1, 2) for x in (q, k, v))
            ts = timed(lambda: torch.nn.functional.scaled_dot_product_attention(qh, kh, vh), args.reps)
            results[f"{shape}/dense_sdpa"] = {"s": ts, "L": L}
            print(f"  {shape}/dense_sdpa: {ts[len(ts) // 2] * 1e3:.2f} ms per block", flush=True)
    out_dir = os.environ.get("OUT", ".")
    json.dump(results, open(os.path.join(out_dir, "peer_vsa.json"), "w"), indent=1)
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
