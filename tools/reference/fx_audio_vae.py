"""Audio VAE decode fixtures: tests/fixtures/audio_vae/<case>/{audio_vae/, case.safetensors, expected.safetensors}."""

import pathlib

from common import fresh_dir, log, max_abs, randn, require_finite, save_tensors, summary, write_json
from vae_common import (
    AUDIO_VAE_HOP40_CONFIG,
    AUDIO_VAE_UNIT_CONFIG,
    build_audio_vae,
    manual_audio_decode,
    pipeline_audio_decode,
    tame_audio_output,
)

# (name, config name, config, model seed, audio latents per channel)
CASES = (
    ("unit_a9", "unit-test (hop 4)", AUDIO_VAE_UNIT_CONFIG, 9000, 9),
    ("unit_a37", "unit-test (hop 4)", AUDIO_VAE_UNIT_CONFIG, 9000, 37),
    ("hop40_a13", "release-shaped (hop 40, rates 5,4,2)", AUDIO_VAE_HOP40_CONFIG, 9500, 13),
)


def run(out_root: pathlib.Path) -> list:
    root = out_root / "audio_vae"
    root.mkdir(parents=True, exist_ok=True)
    failures, models = [], {}
    for index, (name, config_name, config, seed, num_latents) in enumerate(CASES):
        try:
            log(f"  audio_vae/{name}: {config_name}, A = {num_latents}")
            if seed not in models:
                vae = build_audio_vae(config, seed)
                tame_audio_output(vae, randn((2, config["latent_channels"], 16), seed + 50))
                models[seed] = vae
            vae = models[seed]
            case_dir = fresh_dir(root / name)
            latents = randn((2, config["latent_channels"], num_latents), seed + 100 + index)
            audio = pipeline_audio_decode(vae, latents)
            manual = manual_audio_decode(vae, latents)
            log(f"    pipeline block vs manual replica: max|d| {max_abs(audio, manual):.3e}")
            require_finite(name, audio)
            log(f"    audio: {summary(audio)}; clamped fraction {(audio.abs() >= 1).double().mean().item():.3f}")
            vae.save_pretrained(str(case_dir / "audio_vae"))
            save_tensors(case_dir / "case.safetensors", {"audio_latents": latents})
            save_tensors(case_dir / "expected.safetensors", {"audio": audio})
            write_json(case_dir / "case.json", {
                "config": config_name,
                "hop": vae.hop_length,
                "latent_shape": list(latents.shape),
                "audio_shape": list(audio.shape),
                "decode": "MiniMaxH3AudioDecodeStep: latents * std + mean, audio_vae.decode (float32, clamp [-1, 1] "
                "inside the decoder); stored as (2 channels, hop * A samples)",
            })
        except Exception:
            import traceback

            traceback.print_exc()
            failures.append(name)
    return failures
