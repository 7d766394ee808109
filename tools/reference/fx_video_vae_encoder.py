"""
Video VAE encoder fixtures (the conditioning encode of spec/video_vae.md section 7.1):
tests/fixtures/video_vae_encoder/{vae/, <case>/case.safetensors, <case>/expected.safetensors, <case>/case.json}.

Every case runs the pipeline's own `encode_vae_condition` (uint8 -> /255 -> ImageNet normalization -> vae.encode ->
posterior.sample(Generator seeded 42) -> float16 round trip -> (z - latents_mean) / latents_std) on the float32 model,
replays it stage by stage (asserting that the replay is bit-identical), and runs the same stages on a float64 copy of
the model (`model.double()`, the float32-normalized pixels upcast, the float32 draw upcast). `tile` / `tile_overlap`
are the reference's tile_sample_min_{height,width} / tile_sample_min_overlap_{height,width} (pixels; the same value on
both axes), set with `vae.enable_tiling`.
"""

import copy
import pathlib

import torch

from common import fresh_dir, log, max_abs, randn, rel_l2, require_finite, save_tensors, scalar_i64, summary, write_json
from vae_common import IMAGENET_MEAN, IMAGENET_STD, build_encoder_vae

VAE_SEED = 8600
ENCODE_SEED = 42  # components.keyframe_encode_seed
DEFAULT_TILE, DEFAULT_OVERLAP = 256, 64

# (name, frames, height px, width px, tile px, min overlap px, what it covers). The spatial ratio is 8.
CASES = (
    ("frame_one_tile", 1, 24, 32, DEFAULT_TILE, DEFAULT_OVERLAP, "one frame, one tile (the default tiling)"),
    ("frame_tiles", 1, 48, 72, 32, 16, "one frame in 2 x 4 tiles of 32 px: overlaps rows 16 px, columns 24, 16, 16 px "
     "(latent 2 / 3, 2, 2)"),
    ("frame_portrait_tiles", 1, 56, 24, 32, 16, "a portrait frame in 3 x 1 tiles of 32 x 24 px (rows overlap 24, 16 px;"
     " the width is one tile); the deepest level is 4 x 3 (odd)"),
    ("frames22_tiles", 22, 32, 40, 32, 16, "22 frames: two 17-frame clips (the second padded by repeating the last "
     "frame), 1 x 2 tiles overlapping 24 px, 10 latents minus token_drop 3 -> 7"),
    ("frames10_padded", 10, 16, 24, DEFAULT_TILE, DEFAULT_OVERLAP, "a 10-frame reference (shorter than 22, encoded "
     "whole): one clip padded from 10 to 17 frames -> 5 latents minus 3 -> 2; the smallest canvas (2 x 3 latents)"),
)


def tile_plan(vae, length_px: int, tile: int, overlap: int) -> dict:
    starts, lengths, overlaps = vae._split_tiles(length_px, tile, overlap)
    return {"starts": starts, "lengths": lengths, "overlaps": overlaps}


def first_tile(vae, pixels: torch.Tensor, tile: int, overlap: int) -> torch.Tensor:
    """The first spatial tile of the first clip, as the reference's _encode / _encode_clip cut it."""
    clip = vae.config.clip_length
    if pixels.shape[2] > 1:
        if pixels.shape[2] % clip:
            pad = pixels[:, :, -1:].repeat(1, 1, (-pixels.shape[2]) % clip, 1, 1)
            pixels = torch.cat([pixels, pad], dim=2)
        pixels = pixels[:, :, :clip]
    height = vae._split_tiles(pixels.shape[-2], tile, overlap)[1][0]
    width = vae._split_tiles(pixels.shape[-1], tile, overlap)[1][0]
    return pixels[..., :height, :width]


def stages(vae, pixels_normalized: torch.Tensor, eps: torch.Tensor) -> dict:
    """Posterior, sample, float16 round trip and normalization in the model's dtype (the encode_vae_condition steps)."""
    dtype = next(vae.parameters()).dtype
    posterior = vae.encode(pixels_normalized.to(dtype), return_dict=False)[0]
    sampled = posterior.mean + posterior.std * eps.to(dtype)
    rounded = sampled.to(torch.float16).to(dtype)
    latents_mean = torch.tensor(vae.config.latents_mean, dtype=dtype).view(1, -1, 1, 1, 1)
    latents_std = torch.tensor(vae.config.latents_std, dtype=dtype).view(1, -1, 1, 1, 1)
    return {
        "mean": posterior.mean,
        "logvar": posterior.logvar,
        "sampled": sampled,
        "rounded": rounded,
        "normalized": (rounded - latents_mean) / latents_std,
    }


def run(out_root: pathlib.Path) -> list:
    from diffusers.modular_pipelines.minimax_h3.encoders import encode_vae_condition

    root = out_root / "video_vae_encoder"
    root.mkdir(parents=True, exist_ok=True)
    failures = []
    vae = build_encoder_vae(VAE_SEED)
    vae.save_pretrained(str(fresh_dir(root / "vae")))
    vae64 = copy.deepcopy(vae).double()
    pixel_mean = torch.tensor(IMAGENET_MEAN).view(1, -1, 1, 1, 1)
    pixel_std = torch.tensor(IMAGENET_STD).view(1, -1, 1, 1, 1)
    for index, (name, frames, height, width, tile, overlap, what) in enumerate(CASES):
        try:
            log(f"  video_vae_encoder/{name}: {frames} x {height} x {width}, tile {tile}/{overlap} px — {what}")
            case_dir = fresh_dir(root / name)
            for model in (vae, vae64):
                model.enable_tiling(tile, tile, overlap, overlap)
            # Smooth colour ramps plus noise, so that neighbouring tiles see related but different content.
            ramp = torch.linspace(0, 1, height).view(1, 1, 1, -1, 1) + torch.linspace(0, 1, width).view(1, 1, 1, 1, -1)
            base = 80 * ramp + torch.tensor([40.0, 90.0, 20.0]).view(1, 3, 1, 1, 1)
            noise = 60 * randn((1, 3, frames, height, width), VAE_SEED + 100 + index)
            pixels = (base + noise).round().clamp(0, 255).to(torch.uint8)

            expected = encode_vae_condition(vae, pixels, IMAGENET_MEAN, IMAGENET_STD, ENCODE_SEED)
            # The same steps, written out (encode_vae_condition's normalization, randn_tensor's CPU draw).
            normalized_pixels = (pixels.to(torch.float32).div(255.0) - pixel_mean) / pixel_std
            posterior = vae.encode(normalized_pixels, return_dict=False)[0]
            eps = torch.randn(posterior.mean.shape, generator=torch.Generator().manual_seed(ENCODE_SEED),
                              dtype=torch.float32)
            f32 = stages(vae, normalized_pixels, eps)
            f64 = stages(vae64, normalized_pixels, eps)
            if not torch.equal(f32["normalized"], expected):
                raise ValueError("the staged replay differs from encode_vae_condition by "
                                 f"{max_abs(f32['normalized'], expected):.3e}")
            for key, tensor in f32.items():
                require_finite(f"{name} {key}", tensor)
            log(f"    posterior mean {summary(f32['mean'])}; logvar {summary(f32['logvar'])}")
            distances = {key: rel_l2(f32[key], f64[key]) for key in f32}
            flips = int((f32["rounded"].double() != f64["rounded"]).sum())
            log("    f32 vs f64 rel L2: " + ", ".join(f"{k} {v:.2e}" for k, v in distances.items())
                + f"; float16 roundings that differ: {flips} of {f32['rounded'].numel()}")
            # Debugging aids: the first tile's moments in float64, and for one-frame cases its activations after
            # conv_in, every down block and norm_out + SiLU.
            tile0 = first_tile(vae64, normalized_pixels.double(), tile, overlap)
            activations, hooks = {}, []
            if frames == 1:
                modules = {"conv_in": vae64.encoder.conv_in, "norm_out": vae64.encoder.norm_out}
                modules.update({f"down_blocks_{i}": b for i, b in enumerate(vae64.encoder.down_blocks)})
                for key, module in modules.items():
                    hooks.append(module.register_forward_hook(
                        lambda _m, _i, output, key=key: activations.__setitem__(f"tile0_{key}_f64", output)))
            tile0_moments = vae64.quant_conv(vae64.encoder(tile0))
            for hook in hooks:
                hook.remove()
            if "tile0_norm_out_f64" in activations:  # the hook sees GroupNorm's output; the encoder applies SiLU
                activations["tile0_norm_out_f64"] = torch.nn.functional.silu(activations["tile0_norm_out_f64"])

            save_tensors(case_dir / "case.safetensors", {
                "pixels": pixels,
                "eps": eps,
                "tile": scalar_i64(tile),
                "tile_overlap": scalar_i64(overlap),
            })
            out = {"normalized_pipeline": expected, "tile0_moments_f64": tile0_moments, **activations}
            for key in f32:
                out[f"{key}_f32"] = f32[key]
                out[f"{key}_f64"] = f64[key]
            save_tensors(case_dir / "expected.safetensors", out)
            ratio = vae.spatial_compression_ratio
            write_json(case_dir / "case.json", {
                "what": what,
                "pixels_shape": list(pixels.shape),
                "latent_shape": list(expected.shape),
                "tile": tile,
                "tile_overlap": overlap,
                "spatial_ratio": ratio,
                "height_tiles": tile_plan(vae, height, tile, overlap),
                "width_tiles": tile_plan(vae, width, tile, overlap),
                "f32_vs_f64_rel_l2": distances,
                "float16_roundings_f32_vs_f64_differ": flips,
                "encode": "encode_vae_condition(vae, pixels, ImageNet mean/std, 42) on the CPU in float32: "
                "normalized_pipeline; the *_f32 stages replay it (normalized_f32 == normalized_pipeline), the *_f64 "
                "stages run model.double() on the float32-normalized pixels with eps upcast. logvar is the clamped "
                "one; sampled = mean + exp(0.5 logvar) * eps; rounded = sampled.to(float16) back to the model dtype; "
                "normalized = (rounded - latents_mean) / latents_std in the model dtype. tile0_*: the first tile of "
                "the first clip: quant_conv(encoder(tile)) in float64, and for one frame the activations after "
                "conv_in, each down block and SiLU(norm_out).",
            })
        except Exception:
            import traceback

            traceback.print_exc()
            failures.append(name)
    return failures
