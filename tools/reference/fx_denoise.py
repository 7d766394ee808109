"""
Sampler fixtures: the reference t2va denoising blocks (`MiniMaxH3CoreDenoiseStep`: layout, injected noise, both
schedules, the loop, unpacking) on a tiny transformer.
tests/fixtures/denoise/<case>/{transformer/, case.safetensors, expected.safetensors, case.json}.
"""

import pathlib

import torch

from common import fresh_dir, log, randn, require_finite, save_tensors, scalar_i64, summary, write_json
from dit_common import PIPELINE_CONFIG, build_transformer
from vae_common import AUDIO_VAE_UNIT_CONFIG, build_audio_vae, build_standin_video_vae

NUM_FRAMES = 124  # the shortest request the pipeline accepts (5 s at 24 fps, 17 * 7 + 5)
NUM_TEXT_TOKENS = 5
TRANSFORMER_SEED = 5000

# (name, width, height, num_inference_steps = grid points)
CASES = (
    ("w64_h32_steps3", 64, 32, 3),
    ("w64_h32_steps5", 64, 32, 5),
    ("w32_h96_steps3", 32, 96, 3),
    ("w32_h96_steps5", 32, 96, 5),
)


def run_case(root: pathlib.Path, name: str, width: int, height: int, steps: int, seed: int) -> None:
    from diffusers import MiniMaxH3Scheduler, MiniMaxH3Transformer3DModel
    from diffusers.modular_pipelines.minimax_h3.modular_blocks_minimax_h3 import MiniMaxH3CoreDenoiseStep
    from diffusers.modular_pipelines.minimax_h3.modular_pipeline import (
        audio_latent_num_frames,
        video_latent_num_frames,
    )

    log(f"  denoise/{name}: {width}x{height} (WxH), {NUM_FRAMES} frames, {steps} grid points")
    case_dir = fresh_dir(root / name)
    build_transformer(PIPELINE_CONFIG, TRANSFORMER_SEED).save_pretrained(str(case_dir / "transformer"))
    transformer = MiniMaxH3Transformer3DModel.from_pretrained(str(case_dir / "transformer"), dtype=torch.float32)
    transformer.eval()

    num_latent_frames = video_latent_num_frames(NUM_FRAMES, 17, 5)
    num_audio_latents = audio_latent_num_frames(NUM_FRAMES)
    channels = PIPELINE_CONFIG["in_channels"]
    audio_channels = PIPELINE_CONFIG["audio_in_channels"]
    latents = randn((1, channels, num_latent_frames, height // 16, width // 16), seed)
    audio_latents = randn((2, audio_channels, num_audio_latents), seed + 1)
    prompt_embeds = randn((1, NUM_TEXT_TOKENS, PIPELINE_CONFIG["text_dim"]), seed + 2)
    text_token_tags = torch.ones(NUM_TEXT_TOKENS, dtype=torch.long)

    pipe = MiniMaxH3CoreDenoiseStep().init_pipeline()
    pipe.update_components(
        transformer=transformer,
        scheduler=MiniMaxH3Scheduler(shift=12.0),
        audio_scheduler=MiniMaxH3Scheduler(shift=3.0),
    )
    # The blocks read the latent channel counts and the spatial ratio off the pipeline's `vae` / `audio_vae`
    # (falling back to the release's 24 / 32 channels without them). These stand-ins, never run, carry the tiny
    # transformer's 4 / 8 channels and the release's spatial ratio 16.
    pipe.vae = build_standin_video_vae()
    pipe.audio_vae = build_audio_vae(AUDIO_VAE_UNIT_CONFIG, 9000)
    geometry = (pipe.vae_latent_channels, pipe.audio_latent_channels, pipe.vae_spatial_compression_ratio,
                pipe.vae_frames_per_chunk, pipe.vae_latents_per_chunk)
    if geometry != (channels, audio_channels, 16, 17, 5):
        raise ValueError(f"pipeline geometry {geometry} does not match the transformer")

    state = pipe(
        prompt_embeds=prompt_embeds.clone(),
        text_token_tags=text_token_tags,
        height=height,
        width=width,
        num_frames=NUM_FRAMES,
        num_inference_steps=steps,
        latents=latents.clone(),
        audio_latents=audio_latents.clone(),
        generator=torch.Generator("cpu").manual_seed(seed + 3),
    )

    final_latents = state.get("latents").float()
    final_audio = state.get("audio_latents").float()
    if tuple(final_latents.shape) != tuple(latents.shape) or tuple(final_audio.shape) != tuple(audio_latents.shape):
        raise ValueError(f"unexpected output shapes {final_latents.shape} {final_audio.shape}")
    plan = state.get("row_timestep_plan")
    scheduler, audio_scheduler = pipe.scheduler, pipe.audio_scheduler
    expected = {
        "latents": final_latents,
        "audio_latents": final_audio,
        "video_sigmas": scheduler.sigmas.float(),
        "video_timesteps": scheduler.timesteps.float(),
        "audio_sigmas": audio_scheduler.sigmas.float(),
        "audio_timesteps": audio_scheduler.timesteps.float(),
        "position_ids": state.get("position_ids").double(),
        "token_tags": state.get("token_tags").long(),
        "video_indices": state.get("video_indices").long(),
        "audio_indices": state.get("audio_indices").long(),
        "text_indices": state.get("text_indices").long(),
        "timestep_0": plan[0][0].float(),
        "timestep_indices_0": plan[0][1].long(),
        "timestep_1": plan[1][0].float(),
        "timestep_indices_1": plan[1][1].long(),
    }
    for key in ("latents", "audio_latents"):
        require_finite(key, expected[key])
        log(f"    {key}: {summary(expected[key])}")
    log(f"    video sigmas {expected['video_sigmas'].tolist()}")
    log(f"    audio sigmas {expected['audio_sigmas'].tolist()}")
    save_tensors(
        case_dir / "case.safetensors",
        {
            "prompt_embeds": prompt_embeds,
            "latents": latents,
            "audio_latents": audio_latents,
            "height": scalar_i64(height),
            "width": scalar_i64(width),
            "num_frames": scalar_i64(NUM_FRAMES),
            "num_inference_steps": scalar_i64(steps),
        },
    )
    save_tensors(case_dir / "expected.safetensors", expected)
    write_json(
        case_dir / "case.json",
        {
            "width": width,
            "height": height,
            "num_frames": NUM_FRAMES,
            "num_inference_steps": steps,
            "num_forwards": steps - 1,
            "num_latent_frames": num_latent_frames,
            "num_audio_latents": num_audio_latents,
            "L": int(expected["position_ids"].shape[0]),
            "blocks": "MiniMaxH3CoreDenoiseStep (no_keyframe_anchors, prepare_layout, prepare_latents, "
            "set_timesteps, denoise, after_denoise)",
            "shifts": {"video": 12.0, "audio": 3.0},
        },
    )


def run(out_root: pathlib.Path) -> list:
    root = out_root / "denoise"
    root.mkdir(parents=True, exist_ok=True)
    failures = []
    for index, (name, width, height, steps) in enumerate(CASES):
        try:
            run_case(root, name, width, height, steps, seed=5100 + 10 * index)
        except Exception:
            import traceback

            traceback.print_exc()
            failures.append(name)
    return failures
