"""
Video VAE decode fixtures: tests/fixtures/video_vae/<case>/{vae/, case.safetensors, expected.safetensors, case.json}.
`tile` / `tile_overlap` are the reference's tile_sample_min_{height,width} / tile_sample_min_overlap_{height,width}
(pixels; the same value on both axes).
"""

import pathlib

import torch

from common import fresh_dir, log, max_abs, randn, require_finite, save_tensors, scalar_i64, summary, write_json
from vae_common import VIDEO_VAE_CONFIG, build_video_vae, manual_video_decode, pipeline_video_decode, tame_video_output

VAE_SEED = 8000
DEFAULT_TILE, DEFAULT_OVERLAP = 256, 64

# (name, latent frames, latent height, latent width, tile px, min overlap px, what it covers)
CASES = (
    ("one_tile_t7", 7, 2, 3, DEFAULT_TILE, DEFAULT_OVERLAP, "one temporal chunk, one spatial tile"),
    ("two_chunks_t12", 12, 2, 3, DEFAULT_TILE, DEFAULT_OVERLAP, "two temporal chunks with the 5-frame cross-fade"),
    ("tiles_2d_t3", 3, 6, 8, 12, 4, "3 x 4 spatial tiles, uneven overlaps (rows 8,4 px; columns 8,4,4 px), and "
     "3 latent frames: padded to one chunk, tail frames cut"),
    ("t6", 6, 2, 2, DEFAULT_TILE, DEFAULT_OVERLAP, "6 latent frames: padded to one chunk, tail frames cut"),
)


def tile_plan(vae, length_px: int, tile: int, overlap: int) -> dict:
    starts, lengths, overlaps = vae._split_tiles(length_px, tile, overlap)
    return {"starts": starts, "lengths": lengths, "overlaps": overlaps}


def run(out_root: pathlib.Path) -> list:
    root = out_root / "video_vae"
    root.mkdir(parents=True, exist_ok=True)
    failures = []
    vae = build_video_vae(VAE_SEED)
    tame_video_output(vae, randn((1, VIDEO_VAE_CONFIG["latent_channels"], 7, 2, 3), VAE_SEED + 50))
    ratio = vae.spatial_compression_ratio
    for index, (name, frames, height, width, tile, overlap, what) in enumerate(CASES):
        try:
            log(f"  video_vae/{name}: latents {frames}x{height}x{width}, tile {tile}/{overlap} px — {what}")
            case_dir = fresh_dir(root / name)
            vae.enable_tiling(tile, tile, overlap, overlap)
            latents = randn((1, VIDEO_VAE_CONFIG["latent_channels"], frames, height, width), VAE_SEED + 100 + index)
            video = pipeline_video_decode(vae, latents)
            manual = manual_video_decode(vae, latents)
            log(f"    pipeline block vs manual replica: max|d| {max_abs(video, manual):.3e}")
            require_finite(name, video)
            log(f"    video: {summary(video)}; clamped fraction "
                f"{((video == 0) | (video == 1)).double().mean().item():.3f}")
            vae.save_pretrained(str(case_dir / "vae"))
            save_tensors(case_dir / "case.safetensors",
                         {"latents": latents, "tile": scalar_i64(tile), "tile_overlap": scalar_i64(overlap)})
            save_tensors(case_dir / "expected.safetensors", {"video": video})
            write_json(case_dir / "case.json", {
                "what": what,
                "latent_shape": list(latents.shape),
                "video_shape": list(video.shape),
                "tile": tile,
                "tile_overlap": overlap,
                "height_tiles": tile_plan(vae, height * ratio, tile, overlap),
                "width_tiles": tile_plan(vae, width * ratio, tile, overlap),
                "decode": "MiniMaxH3VideoDecodeStep on CPU: latents * std + mean, vae.decode in float32 (no autocast), "
                "* ImageNet std + ImageNet mean, clamp [0, 1]; stored as (1, 3, frames, H, W)",
            })
        except Exception:
            import traceback

            traceback.print_exc()
            failures.append(name)
    return failures
