"""
End-to-end fl2va fixtures: the e2e family's tiny snapshot (same weights; its index asks for a small canvas so that a
canvas resolved from a keyframe stays tiny) run through the reference modular pipeline's fl2va workflow on the CPU
in float32, with first, last and both keyframes, at the canvas size, stretched, cover-cropped and with the canvas
resolved from the geometry anchor.

    tests/fixtures/e2e_fl2va/model/            the snapshot (tests/fixtures/e2e/model's files; index canvas 16 / 384)
    tests/fixtures/e2e_fl2va/<case>/request.json   the `h3 tool generate` request (paths relative to the case folder)
    tests/fixtures/e2e_fl2va/<case>/*.png          the keyframes as a user passes them (RGB PNG)
    tests/fixtures/e2e_fl2va/<case>/noise.safetensors     latents, audio_latents, condition_noise_<i>, encode_noise_<i>
    tests/fixtures/e2e_fl2va/<case>/expected.safetensors  video, audio and the stages (see README.md)

The noises: `latents` / `audio_latents` are injected; the augmentation noise of every keyframe is drawn by the
pipeline from the request's generator and the posterior draw of every keyframe from a generator seeded 42 — both are
recorded as they are drawn (the pipeline's randn_tensor calls) so that an engine without PyTorch's generator can be
given the same values.
"""

import json
import pathlib
import shutil

import numpy as np
import torch
from PIL import Image

from common import fresh_dir, log, randn, require_finite, save_tensors, summary, write_json
from fx_e2e import load_pipeline
from vae_common import AUDIO_VAE_HOP40_CONFIG, VIDEO_VAE_CONFIG

PROMPT = "The fox keeps walking through the snow."
NUM_FRAMES = 124
NUM_INFERENCE_STEPS = 4  # 3 transformer passes
SEED = 7000
CANVAS_SHORT_EDGE = 16  # the tiny snapshot's canvas rule (canvas multiple 8: VAE ratio 4 x patch 2)
CANVAS_MAX_PIXELS = 16 * 24

# case -> (first keyframe (W, H) or None, last keyframe (W, H) or None, explicit canvas (W, H) or None)
CASES = {
    "first_at_canvas": ((24, 16), None, (24, 16)),
    "last_stretched": (None, (30, 20), (24, 16)),
    "both_stretched_cropped": ((40, 24), (18, 20), (24, 16)),
    "both_resolved_canvas": ((36, 20), (20, 30), None),
}


def keyframe_picture(width: int, height: int, seed: int) -> Image.Image:
    """A picture with structure at every scale (gradients, a disc, noise), so resampling errors show."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    r = 255 * x / max(width - 1, 1)
    g = 255 * y / max(height - 1, 1)
    b = 255 * ((x - width / 2) ** 2 + (y - height / 2) ** 2 < (min(width, height) / 3) ** 2)
    rgb = np.stack([r, g, b], axis=-1) + rng.normal(0, 24, (height, width, 3))
    return Image.fromarray(np.clip(np.rint(rgb), 0, 255).astype(np.uint8), "RGB")


def copy_snapshot(src: pathlib.Path, dst: pathlib.Path) -> None:
    shutil.copytree(src, dst)
    for name in ("modular_model_index.json", "model_index.json"):
        index = json.loads((dst / name).read_text())
        index["canvas_short_edge"] = CANVAS_SHORT_EDGE
        index["canvas_max_pixels"] = CANVAS_MAX_PIXELS
        for key, entry in index.items():
            if isinstance(entry, list) and len(entry) == 3 and isinstance(entry[2], dict):
                entry[2]["pretrained_model_name_or_path"] = "tests/fixtures/e2e_fl2va/model"
        (dst / name).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


class DrawRecorder:
    """Wraps a module's randn_tensor and records every draw, in order."""

    def __init__(self, module):
        self.module, self.original, self.draws = module, module.randn_tensor, []

    def __enter__(self):
        def recording(*args, **kwargs):
            value = self.original(*args, **kwargs)
            self.draws.append(value.detach().clone().float())
            return value

        self.module.randn_tensor = recording
        return self

    def __exit__(self, *exc):
        self.module.randn_tensor = self.original


def run(out_root: pathlib.Path) -> list:
    import diffusers.models.autoencoders.vae as vae_module
    import diffusers.modular_pipelines.minimax_h3.before_denoise as before_denoise
    from diffusers.modular_pipelines.minimax_h3.modular_pipeline import (
        audio_latent_num_frames,
        video_latent_num_frames,
    )

    root = fresh_dir(out_root / "e2e_fl2va")
    e2e_model = out_root / "e2e" / "model"
    if not e2e_model.is_dir():
        raise FileNotFoundError(f"{e2e_model}: run the e2e family first (make_fixtures.py --only e2e,e2e_fl2va)")
    copy_snapshot(e2e_model, root / "model")
    pipe, loaded_via = load_pipeline(root / "model", workflow="fl2va")
    log(f"    pipeline loaded via {loaded_via}; canvas {pipe.config.canvas_short_edge} / {pipe.config.canvas_max_pixels}")
    ratio = pipe.vae.spatial_compression_ratio
    num_latent_frames = video_latent_num_frames(NUM_FRAMES, pipe.vae.config.clip_length, pipe.vae.tokens_chunk_size)
    num_audio_latents = audio_latent_num_frames(NUM_FRAMES)

    failed = []
    for index, (case, (first, last, canvas)) in enumerate(CASES.items()):
        folder = root / case
        folder.mkdir()
        request = {"prompt": PROMPT, "frames": NUM_FRAMES, "steps": NUM_INFERENCE_STEPS - 1}
        kwargs = {}
        for key, arg, size, seed in (("first_frame", "image", first, 10 * index), ("last_frame", "last_image", last,
                                                                                    10 * index + 1)):
            if size is None:
                continue
            keyframe_picture(*size, SEED + seed).save(folder / f"{key}.png")
            request[key] = f"{key}.png"
            kwargs[arg] = Image.open(folder / f"{key}.png").convert("RGB")
        if canvas is not None:
            request["width"], request["height"] = canvas
            kwargs["width"], kwargs["height"] = canvas
            height, width = canvas[1], canvas[0]
        else:
            from diffusers.modular_pipelines.minimax_h3.modular_pipeline import resolve_canvas_size

            anchor = kwargs["image"] if "image" in kwargs else kwargs["last_image"]
            height, width = resolve_canvas_size(*anchor.size, pipe.canvas_multiple, CANVAS_SHORT_EDGE,
                                                CANVAS_MAX_PIXELS)
        latents = randn((1, VIDEO_VAE_CONFIG["latent_channels"], num_latent_frames, height // ratio, width // ratio),
                        SEED + 100 + index)
        audio_latents = randn((2, AUDIO_VAE_HOP40_CONFIG["latent_channels"], num_audio_latents), SEED + 200 + index)
        with DrawRecorder(before_denoise) as condition_draws, DrawRecorder(vae_module) as encode_draws:
            state = pipe(
                prompt=PROMPT,
                num_frames=NUM_FRAMES,
                num_inference_steps=NUM_INFERENCE_STEPS,
                latents=latents.clone(),
                audio_latents=audio_latents.clone(),
                generator=torch.Generator("cpu").manual_seed(SEED + 300 + index),
                output_type="pt",
                **kwargs,
            )
        keyframes = state.get("keyframes")
        if len(condition_draws.draws) != len(keyframes) or len(encode_draws.draws) != len(keyframes):
            raise RuntimeError(f"{case}: recorded {len(condition_draws.draws)} condition and {len(encode_draws.draws)} "
                               f"encode draws for {len(keyframes)} keyframes")
        if (state.get("height"), state.get("width")) != (height, width):
            raise RuntimeError(f"{case}: the pipeline resolved {state.get('height')}x{state.get('width')}")
        noise = {"latents": latents, "audio_latents": audio_latents}
        for i, (c, e) in enumerate(zip(condition_draws.draws, encode_draws.draws)):
            noise[f"condition_noise_{i}"] = c
            noise[f"encode_noise_{i}"] = e
        video = state.get("videos").permute(0, 2, 1, 3, 4).contiguous().float()[0]  # (3, frames, H, W)
        expected = {
            "video": video,
            "audio": state.get("audio")[0].contiguous().float(),
            "prompt_embeds": state.get("prompt_embeds").float()[0],
            "text_token_tags": state.get("text_token_tags").to(torch.int64),
            "latents": state.get("latents").float(),
            "audio_latents": state.get("audio_latents").float(),
        }
        for i, (frame, latent) in enumerate(zip(keyframes, state.get("condition_latents"))):
            expected[f"keyframe_{i}"] = torch.from_numpy(np.array(frame)).to(torch.int64)  # (H, W, 3) uint8 values
            expected[f"condition_latents_{i}"] = latent.float()
        for key, value in expected.items():
            if value.is_floating_point():
                require_finite(f"{case}/{key}", value)
        log(f"    {case}: canvas {width}x{height}, {len(keyframes)} keyframe(s), Nt {expected['prompt_embeds'].shape[0]}, "
            f"video {summary(video)}")
        save_tensors(folder / "noise.safetensors", noise)
        save_tensors(folder / "expected.safetensors", expected)
        write_json(folder / "request.json", request)
        write_json(folder / "case.json", {
            "canvas": [width, height],
            "keyframe_anchors": list(state.get("keyframe_anchors")),
            "num_latent_frames": num_latent_frames,
            "num_audio_latents": num_audio_latents,
            "pipeline_loaded_via": loaded_via,
            "dtype": "float32 on the CPU",
        })
    return failed
