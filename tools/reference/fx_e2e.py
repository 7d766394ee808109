"""
End-to-end t2va fixture: a complete tiny snapshot in the release's diffusers root layout, run through the reference
modular pipeline on the CPU in float32. tests/fixtures/e2e/{model/, case.safetensors, expected.safetensors, case.json}.
"""

import json
import pathlib
import shutil
import tempfile

import torch

from common import fresh_dir, log, randn, require_finite, save_tensors, scalar_i64, summary, write_json
from dit_common import PIPELINE_CONFIG, build_transformer
import qwen_common
import tiny_tokenizer
from vae_common import (
    AUDIO_VAE_HOP40_CONFIG,
    VIDEO_VAE_CONFIG,
    build_audio_vae,
    build_video_vae,
    tame_audio_output,
    tame_video_output,
)

PROMPT = "a robot dancing in the rain"
HEIGHT, WIDTH = 8, 16  # canvas multiple = VAE spatial ratio 4 x patch 2 = 8
NUM_FRAMES = 124  # the shortest legal request (5.17 s at 24 fps)
NUM_INFERENCE_STEPS = 4  # 4 grid points, 3 transformer passes
SEED = 6000
# What the index's components point at: the fixture folder relative to the repository root (the release has its hub
# repository id here). Loading it with diffusers from elsewhere needs `pretrained_model_name_or_path=` overridden.
INDEX_PATH = "tests/fixtures/e2e/model"

COMPONENTS = {
    "text_encoder": ("transformers", "Qwen3VLForConditionalGeneration"),
    "tokenizer": ("transformers", "Qwen2TokenizerFast"),
    "processor": ("transformers", "Qwen3VLProcessor"),
    "vae": ("diffusers", "AutoencoderKLMiniMaxH3"),
    "audio_vae": ("diffusers", "AutoencoderKLMiniMaxH3Audio"),
    "transformer": ("diffusers", "MiniMaxH3Transformer3DModel"),
    "transformer_ref": ("diffusers", "MiniMaxH3Transformer3DModel"),
    "scheduler": ("diffusers", "MiniMaxH3Scheduler"),
    "audio_scheduler": ("diffusers", "MiniMaxH3Scheduler"),
}


def build_components(tokenizer_dir: pathlib.Path, tmp: pathlib.Path) -> dict:
    from diffusers import MiniMaxH3Scheduler

    text_encoder, tokenizer, _ = qwen_common.build_text_encoder(tokenizer_dir, tmp / "text_encoder")
    vae = build_video_vae(8000)  # the video_vae fixture's model
    tame_video_output(vae, randn((1, VIDEO_VAE_CONFIG["latent_channels"], 7, 2, 3), 8000 + 50))
    audio_vae = build_audio_vae(AUDIO_VAE_HOP40_CONFIG, 9500)  # the audio_vae/hop40 fixture's model
    tame_audio_output(audio_vae, randn((2, AUDIO_VAE_HOP40_CONFIG["latent_channels"], 16), 9500 + 50))
    return {
        "text_encoder": text_encoder,
        "tokenizer": tokenizer,
        "processor": qwen_common.build_processor(tokenizer),
        "vae": vae,
        "audio_vae": audio_vae,
        "transformer": build_transformer(PIPELINE_CONFIG, 5000),  # the denoise fixtures' transformer
        "transformer_ref": build_transformer(PIPELINE_CONFIG, 5500),  # a different partition, never used by t2va
        "scheduler": MiniMaxH3Scheduler(shift=12.0),
        "audio_scheduler": MiniMaxH3Scheduler(shift=3.0),
    }


def save_snapshot(components: dict, model_dir: pathlib.Path, tokenizer_dir: pathlib.Path) -> str:
    """Save with the modular pipeline's own save_pretrained; fill in by hand whatever it did not write."""
    import diffusers
    from diffusers.modular_pipelines import MiniMaxH3Blocks

    how = "MiniMaxH3ModularPipeline.save_pretrained"
    try:
        pipe = MiniMaxH3Blocks().init_pipeline()
        pipe.update_components(**components)
        pipe.save_pretrained(str(model_dir))
    except Exception:
        import traceback

        traceback.print_exc()
        how = "per-component save_pretrained (the pipeline save failed, see the traceback)"
    index_file = model_dir / "modular_model_index.json"
    index = json.loads(index_file.read_text()) if index_file.is_file() else {}
    index.setdefault("_class_name", "MiniMaxH3ModularPipeline")
    index.setdefault("_blocks_class_name", "MiniMaxH3Blocks")
    index.setdefault("_diffusers_version", diffusers.__version__)
    for name, (library, class_name) in COMPONENTS.items():
        if not (model_dir / name).is_dir():
            log(f"    {name}: not written by the pipeline, saving it directly")
            components[name].save_pretrained(str(model_dir / name))
            how += f"; {name} saved directly"
        entry = index.get(name)
        if not (isinstance(entry, list) and len(entry) == 3 and entry[0] and isinstance(entry[2], dict)):
            entry = [library, class_name, {"type_hint": [library, class_name]}]
        spec = dict(entry[2])
        spec.update({"pretrained_model_name_or_path": INDEX_PATH, "subfolder": name, "variant": None, "revision": None})
        spec.setdefault("type_hint", [entry[0], entry[1]])
        index[name] = [entry[0], entry[1], spec]
    # The tokenizer folder holds the tiny tokenizer's two files, byte-identical to tests/fixtures/tiny_tokenizer, and
    # the processor folder the same two files next to its processor_config.json (the release keeps identical copies;
    # transformers' own save would add load-time keys such as `is_local` to the config).
    shutil.rmtree(model_dir / "tokenizer")
    tiny_tokenizer.copy_to(tokenizer_dir, model_dir / "tokenizer")
    tiny_tokenizer.copy_to(tokenizer_dir, model_dir / "processor")
    text = json.dumps(index, indent=2, sort_keys=True) + "\n"
    index_file.write_text(text)
    (model_dir / "model_index.json").write_text(text)
    return how


# The transformer partition a workflow never loads: t2va and fl2va denoise with `transformer/`, ref2va with
# `transformer_ref/` (ModularPipeline.from_pretrained(..., workflow=...) loads only its own).
UNUSED_PARTITION = {"t2va": "transformer_ref", "fl2va": "transformer_ref", "ref2va": "transformer"}


def load_pipeline(model_dir: pathlib.Path, workflow: str = "t2va"):
    """The way a user loads the snapshot; falls back to components loaded one by one if that fails."""
    unused = UNUSED_PARTITION[workflow]
    try:
        from diffusers import ModularPipeline

        pipe = ModularPipeline.from_pretrained(str(model_dir), workflow=workflow)
        pipe.load_components(pretrained_model_name_or_path=str(model_dir), dtype=torch.float32)
        missing = [name for name in COMPONENTS if name != unused and getattr(pipe, name, None) is None]
        if missing:
            raise ValueError(f"components not loaded: {missing}")
        return pipe, f"ModularPipeline.from_pretrained(model, workflow='{workflow}') + load_components(dtype=float32)"
    except Exception:
        import traceback

        traceback.print_exc()
    import diffusers
    import transformers
    from diffusers.modular_pipelines import MiniMaxH3Blocks

    loaded = {}
    for name, (library, class_name) in COMPONENTS.items():
        module = transformers if library == "transformers" else diffusers
        cls = getattr(module, class_name)
        kwargs = ({"dtype": torch.float32}
                  if name in ("text_encoder", "vae", "audio_vae", "transformer", "transformer_ref") else {})
        if name != unused:
            loaded[name] = cls.from_pretrained(str(model_dir / name), **kwargs)
    pipe = MiniMaxH3Blocks().init_pipeline()
    pipe.update_components(**loaded)
    return pipe, "MiniMaxH3Blocks().init_pipeline() + update_components(each component from_pretrained)"


def run(out_root: pathlib.Path) -> list:
    root = fresh_dir(out_root / "e2e")
    model_dir = root / "model"
    model_dir.mkdir()
    tokenizer_dir = out_root / "tiny_tokenizer"
    with tempfile.TemporaryDirectory() as tmp:
        components = build_components(tokenizer_dir, pathlib.Path(tmp))
        saved_via = save_snapshot(components, model_dir, tokenizer_dir)
    log(f"    snapshot written via {saved_via}")
    pipe, loaded_via = load_pipeline(model_dir)
    log(f"    pipeline loaded via {loaded_via}")

    ratio = pipe.vae.spatial_compression_ratio
    from diffusers.modular_pipelines.minimax_h3.modular_pipeline import (
        audio_latent_num_frames,
        video_latent_num_frames,
    )

    num_latent_frames = video_latent_num_frames(NUM_FRAMES, pipe.vae.config.clip_length, pipe.vae.tokens_chunk_size)
    num_audio_latents = audio_latent_num_frames(NUM_FRAMES)
    latents = randn((1, VIDEO_VAE_CONFIG["latent_channels"], num_latent_frames, HEIGHT // ratio, WIDTH // ratio), SEED)
    audio_latents = randn((2, AUDIO_VAE_HOP40_CONFIG["latent_channels"], num_audio_latents), SEED + 1)
    input_ids = pipe.tokenizer(PROMPT, add_special_tokens=False)["input_ids"]

    state = pipe(
        prompt=PROMPT,
        height=HEIGHT,
        width=WIDTH,
        num_frames=NUM_FRAMES,
        num_inference_steps=NUM_INFERENCE_STEPS,
        latents=latents.clone(),
        audio_latents=audio_latents.clone(),
        generator=torch.Generator("cpu").manual_seed(SEED + 2),
        output_type="pt",
    )
    videos = state.get("videos")  # (1, frames, 3, H, W) for output_type "pt"
    video = videos.permute(0, 2, 1, 3, 4).contiguous().float()
    audio = state.get("audio")[0].contiguous().float()  # (1, 2, samples) -> (2, samples)
    expected = {
        "video": video,
        "audio": audio,
        "input_ids": torch.tensor(input_ids, dtype=torch.int64),
        "prompt_embeds": state.get("prompt_embeds").float(),
        "latents": state.get("latents").float(),
        "audio_latents": state.get("audio_latents").float(),
    }
    for key, value in expected.items():
        if value.is_floating_point():
            require_finite(key, value)
            log(f"    {key}: {summary(value)}")
    save_tensors(root / "case.safetensors", {
        "latents": latents,
        "audio_latents": audio_latents,
        "height": scalar_i64(HEIGHT),
        "width": scalar_i64(WIDTH),
        "num_frames": scalar_i64(NUM_FRAMES),
        "num_inference_steps": scalar_i64(NUM_INFERENCE_STEPS),
    })
    save_tensors(root / "expected.safetensors", expected)
    write_json(root / "case.json", {
        "prompt": PROMPT,
        "height": HEIGHT,
        "width": WIDTH,
        "num_frames": NUM_FRAMES,
        "num_inference_steps": NUM_INFERENCE_STEPS,
        "num_transformer_passes": NUM_INFERENCE_STEPS - 1,
        "num_latent_frames": num_latent_frames,
        "num_audio_latents": num_audio_latents,
        "input_ids": input_ids,
        "sampling_rate": int(state.get("sampling_rate")),
        "video_layout": "(1, 3, frames, H, W) float32 in [0, 1] (the pipeline's 'pt' output is (1, frames, 3, H, W))",
        "audio_layout": "(2 channels, samples) float32, untrimmed (hop * num_audio_latents samples per channel)",
        "dtype": "float32 on the CPU; the reference enables fp16 autocast for the video decode only on CUDA",
        "snapshot_written_via": saved_via,
        "pipeline_loaded_via": loaded_via,
        "generator": "torch.Generator('cpu').manual_seed(6002); unused: both noises are injected",
    })
    return []
