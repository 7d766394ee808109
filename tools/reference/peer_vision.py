"""Peer baseline for fl2va's vision tower: transformers' Qwen3-VL vision tower (Qwen3VLVisionModel) at the release's
vision config (spec/conditioner.md §2.2), random weights, bf16 on one GPU with SDPA attention, on one 864x480
keyframe's pixel rows as the release's image processor makes them (spec/layout.md §2.4: grid_thw (1, 30, 54)).

    OUT=DIR python3 tools/reference/peer_vision.py [--width 864] [--height 480] [--reps 10] [--warmup 2]

Needs only torch and transformers (the GPU machine's python3; no diffusers). Prints one `JSON {...}` line and writes
$OUT/peer_vision.json with the CUDA-event median of --reps forwards after --warmup ones (the pixel rows and the grid
already on the GPU, as the pipeline hands them to the tower). Weights: matrices and embeddings N(0, 0.02), LayerNorm
weights 1 + N(0, 0.02), biases N(0, 0.02) — never zeros (zero norms would make the attention trivial). Compared with
`bench_pipeline --fl2va`'s `vision_tower` line by tools/reference/fl2va_ratios.py.
"""
import argparse
import json
import os
import sys

import torch

# spec/conditioner.md §2.2 (transformers' Qwen3VLVisionConfig field names).
VISION = {
    "depth": 27,
    "hidden_size": 1152,
    "hidden_act": "gelu_pytorch_tanh",
    "intermediate_size": 4304,
    "num_heads": 16,
    "in_channels": 3,
    "patch_size": 16,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "out_hidden_size": 5120,
    "num_position_embeddings": 2304,
    "deepstack_visual_indexes": [8, 16, 24],
}
# spec/layout.md §2.4: the release's image processor.
IMAGE_PROCESSOR = {
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "size": {"shortest_edge": 65536, "longest_edge": 16777216},
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "resample": 3,
    "rescale_factor": 1 / 255,
}
INIT_STD = 0.02


def pixel_rows(width: int, height: int, seed: int):
    """The processor's pixel_values and image_grid_thw for one random 8-bit RGB picture; falls back to random rows of
    the shape smart_resize gives when no image processor class can be built (the tower's time does not depend on the
    values)."""
    import numpy as np

    picture = np.random.default_rng(seed).integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    errors = []
    for name in ("Qwen2VLImageProcessorFast", "Qwen2VLImageProcessor"):
        try:
            import transformers

            from PIL import Image

            processor = getattr(transformers, name)(**IMAGE_PROCESSOR)
            out = processor(images=[Image.fromarray(picture)], return_tensors="pt")
            return out["pixel_values"], out["image_grid_thw"], name
        except Exception as error:  # a class missing from this transformers, or a backend it lacks
            errors.append(f"{name}: {error!r}"[:200])
    print(f"peer_vision: no image processor ({'; '.join(errors)}); random rows instead", flush=True)
    factor = IMAGE_PROCESSOR["patch_size"] * IMAGE_PROCESSOR["merge_size"]
    h, w = round(height / factor) * factor, round(width / factor) * factor  # inside the pixel bounds: no rescale
    p = IMAGE_PROCESSOR["patch_size"]
    grid = torch.tensor([[1, h // p, w // p]], dtype=torch.long)
    dim = 3 * IMAGE_PROCESSOR["temporal_patch_size"] * p * p
    rows = torch.randn(int(grid.prod()), dim, generator=torch.Generator().manual_seed(seed))
    return rows, grid, "random rows"


def build_tower():
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLVisionConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionModel

    config = Qwen3VLVisionConfig(**VISION)
    config._attn_implementation = "sdpa"
    with torch.device("cuda"):
        try:
            model = Qwen3VLVisionModel._from_config(config, attn_implementation="sdpa")
        except TypeError:  # a transformers whose _from_config takes no attn_implementation
            model = Qwen3VLVisionModel(config)
    model = model.to(torch.bfloat16).eval()
    generator = torch.Generator("cuda").manual_seed(0)
    with torch.no_grad():
        for module in model.modules():
            weight, bias = getattr(module, "weight", None), getattr(module, "bias", None)
            if isinstance(module, torch.nn.LayerNorm):
                weight.copy_(1 + INIT_STD * torch.randn(weight.shape, generator=generator, device="cuda"))
            elif isinstance(weight, torch.Tensor) and weight.ndim >= 2:
                weight.normal_(0, INIT_STD, generator=generator)
            if isinstance(bias, torch.Tensor):
                bias.normal_(0, INIT_STD, generator=generator)
        for name, p in model.named_parameters():
            if not bool(p.ne(0).any()):
                raise SystemExit(f"peer_vision: parameter {name} is all zeros after the initialization")
    implementation = getattr(model.config, "_attn_implementation", None)
    if implementation != "sdpa":
        raise SystemExit(f"peer_vision: the tower runs attention '{implementation}', not sdpa")
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=864)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    if args.reps < 5 or args.warmup < 2:
        sys.exit("peer_vision: --reps must be >= 5 and --warmup >= 2")
    import transformers

    pixels, grid, source = pixel_rows(args.width, args.height, seed=31)
    model = build_tower()
    pixels = pixels.to("cuda", torch.bfloat16)
    grid = grid.to("cuda")

    def forward():
        with torch.inference_mode():
            return model(pixels, grid_thw=grid)

    for _ in range(args.warmup):
        out = forward()
    torch.cuda.synchronize()
    times = []
    for _ in range(args.reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        out = forward()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    # The tower's output across transformers versions: a (merged, deepstack) tuple or a model output holding them.
    merged = out[0] if isinstance(out, (tuple, list)) else getattr(out, "pooler_output", None)
    if merged is None:
        merged = getattr(out, "last_hidden_state")
    merged = merged.float()
    ok = bool(torch.isfinite(merged).all()) and float(merged.max()) > float(merged.min())
    result = {
        "bench": "peer_vision",
        "width": args.width,
        "height": args.height,
        "grid_thw": grid[0].tolist(),
        "patches": int(pixels.shape[0]),
        "pixel_values": source,
        "merged_shape": list(merged.shape),
        "params": sum(p.numel() for p in model.parameters()),
        "dtype": "bfloat16",
        "attn_implementation": model.config._attn_implementation,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name(),
        "reps": args.reps,
        "s": times,
        "median_s": sorted(times)[len(times) // 2],
        "ok": ok,
    }
    out_dir = os.environ.get("OUT", ".")
    with open(os.path.join(out_dir, "peer_vision.json"), "w") as f:
        json.dump(result, f, indent=1)
    print("JSON " + json.dumps(result), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
