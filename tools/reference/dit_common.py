"""Tiny MiniMax-H3 transformers and packed layouts built with the reference's own layout code."""

import torch

# No `common` import at module level: dit_fullwidth.py uses this module on the GPU, and `common` hides the GPUs.

# The diffusers unit-test config (tests/models/transformers/test_models_transformer_minimax_h3.py): heads x head_dim =
# 32 != hidden 24, and 2 * 3 * rope_freq_dim = 12 rotated channels of 16.
UNIT_TEST_CONFIG = {
    "num_attention_heads": 2,
    "attention_head_dim": 16,
    "hidden_size": 24,
    "num_layers": 2,
    "num_refiner_layers": 2,
    "ffn_dim": 32,
    "in_channels": 4,
    "audio_in_channels": 6,
    "patch_size": (1, 2, 2),
    "text_dim": 8,
    "freq_dim": 8,
    "time_embed_hidden_dim": 24,
    "time_embed_dim": 16,
    "rope_freq_dim": 2,
}

# Second shape family: 4 x 8 = 32 != hidden 28, 6 of 8 channels rotated, one refiner block.
CONFIG_B = {
    "num_attention_heads": 4,
    "attention_head_dim": 8,
    "hidden_size": 28,
    "num_layers": 2,
    "num_refiner_layers": 1,
    "ffn_dim": 40,
    "in_channels": 6,
    "audio_in_channels": 5,
    "patch_size": (1, 2, 2),
    "text_dim": 12,
    "freq_dim": 16,
    "time_embed_hidden_dim": 20,
    "time_embed_dim": 8,
    "rope_freq_dim": 1,
}

# Third: 2 x 24 = 48 != hidden 32, 18 of 24 channels rotated, non-default rope theta and norm epsilons.
CONFIG_C = {
    "num_attention_heads": 2,
    "attention_head_dim": 24,
    "hidden_size": 32,
    "num_layers": 2,
    "num_refiner_layers": 1,
    "ffn_dim": 40,
    "in_channels": 4,
    "audio_in_channels": 6,
    "patch_size": (1, 2, 2),
    "text_dim": 10,
    "freq_dim": 12,
    "time_embed_hidden_dim": 28,
    "time_embed_dim": 8,
    "rope_freq_dim": 3,
    "rope_theta": 1000.0,
    "norm_eps": 1e-6,
    "qk_norm_eps": 1e-5,
    "final_norm_eps": 1e-6,
}

# The transformer of the denoise and end-to-end fixtures: 2 x 16 = 32 != hidden 16, 12 of 16 channels rotated,
# text_dim 16 = the tiny Qwen3-VL hidden size, 4 video / 8 audio latent channels = the tiny VAEs.
PIPELINE_CONFIG = {
    "num_attention_heads": 2,
    "attention_head_dim": 16,
    "hidden_size": 16,
    "num_layers": 2,
    "num_refiner_layers": 1,
    "ffn_dim": 24,
    "in_channels": 4,
    "audio_in_channels": 8,
    "patch_size": (1, 2, 2),
    "text_dim": 16,
    "freq_dim": 8,
    "time_embed_hidden_dim": 16,
    "time_embed_dim": 8,
    "rope_freq_dim": 2,
}


def build_transformer(config: dict, seed: int):
    """Random-init transformer (reference init under a fixed global seed) with norms perturbed away from 1."""
    from common import randomize_params
    from diffusers import MiniMaxH3Transformer3DModel

    torch.manual_seed(seed)
    model = MiniMaxH3Transformer3DModel(**config).float().eval()
    randomize_params(model, seed + 1, one_scale=0.1, zero_scale=0.1)
    return model


def unit_test_layout():
    """The packed layout of the diffusers unit test: 4 text rows, 6 audio rows, 8 video rows, two timesteps."""
    num_text, num_audio, num_video = 4, 6, 8
    length = num_text + num_audio + num_video
    text_indices = torch.arange(num_text)
    audio_indices = torch.arange(num_text, num_text + num_audio)
    video_indices = torch.arange(num_text + num_audio, length)
    token_tags = torch.empty(length, dtype=torch.long)
    token_tags[text_indices] = 1
    token_tags[audio_indices] = 2
    token_tags[video_indices] = 0
    timestep_indices = torch.zeros(length, dtype=torch.long)
    timestep_indices[audio_indices] = 1
    position_ids = torch.zeros(length, 3, dtype=torch.float64)
    position_ids[:, 0] = torch.arange(length, dtype=torch.float64)
    position_ids[video_indices, 1] = torch.arange(num_video, dtype=torch.float64) % 4
    position_ids[video_indices, 2] = torch.arange(num_video, dtype=torch.float64) % 2
    return {
        "timestep_indices": timestep_indices,
        "token_tags": token_tags,
        "position_ids": position_ids,
        "video_indices": video_indices,
        "audio_indices": audio_indices,
        "text_indices": text_indices,
    }


def pipeline_layout(
    text_token_tags,
    num_latent_frames,
    latent_height,
    latent_width,
    num_audio_latents,
    video_timestep,
    audio_timestep,
    keyframe_anchors=(),
    patch_size=(1, 2, 2),
):
    """A t2va / fl2va packed layout exactly as `MiniMaxH3PrepareLayoutStep` and `MiniMaxH3SetTimestepsStep` build it."""
    from diffusers.modular_pipelines.minimax_h3.before_denoise import (
        MiniMaxH3PrepareLayoutStep,
        MiniMaxH3SetTimestepsStep,
    )

    text_token_tags = torch.as_tensor(text_token_tags, dtype=torch.long)
    (
        position_ids,
        token_tags,
        video_indices,
        audio_indices,
        text_indices,
        num_condition_video_rows,
        num_condition_audio_rows,
    ) = MiniMaxH3PrepareLayoutStep.build_packed_sequence(
        text_token_tags,
        num_latent_frames,
        latent_height,
        latent_width,
        num_audio_latents,
        tuple(patch_size),
        2,  # audio channels
        2,  # audio tag
        0,  # video tag
        tuple(keyframe_anchors),
    )
    timestep, timestep_indices = MiniMaxH3SetTimestepsStep.build_row_timesteps(
        video_indices,
        audio_indices,
        num_condition_video_rows,
        num_condition_audio_rows,
        text_indices.numel(),
        float(video_timestep),
        float(audio_timestep),
        max(float(video_timestep), 0.999),
        1.0,
    )
    return {
        "timestep": timestep.to(torch.float32),
        "timestep_indices": timestep_indices.to(torch.long),
        "token_tags": token_tags.to(torch.long),
        "position_ids": position_ids.to(torch.float64),
        "video_indices": video_indices.to(torch.long),
        "audio_indices": audio_indices.to(torch.long),
        "text_indices": text_indices.to(torch.long),
    }


def permute_layout(layout: dict, seed: int) -> dict:
    """
    Move every row of the packed sequence to a new position (a seeded permutation of [0, L)), keeping the row order of
    the three modality inputs. The index sets become interleaved; the attention is permutation-equivariant, so the
    outputs must not change beyond summation order.
    """
    length = layout["position_ids"].shape[0]
    perm = torch.randperm(length, generator=torch.Generator("cpu").manual_seed(seed))
    out = dict(layout)
    for key in ("position_ids", "token_tags", "timestep_indices"):
        moved = torch.empty_like(layout[key])
        moved[perm] = layout[key]
        out[key] = moved
    for key in ("video_indices", "audio_indices", "text_indices"):
        out[key] = perm[layout[key]]
    return out


def check_partition(layout: dict) -> None:
    length = layout["position_ids"].shape[0]
    every = torch.cat([layout["video_indices"], layout["audio_indices"], layout["text_indices"]]).sort().values
    if not torch.equal(every, torch.arange(length)):
        raise ValueError("video/audio/text indices are not a partition of [0, L)")


def forward(model, inputs: dict, dtype: torch.dtype):
    """Run the reference forward with float inputs cast to `dtype` (position_ids stay float64, cast inside)."""
    kwargs = {}
    for name, value in inputs.items():
        if name in ("hidden_states", "audio_hidden_states", "encoder_hidden_states", "timestep"):
            value = value.to(dtype)
        kwargs[name] = value
    video, audio = model(**kwargs, return_dict=False)
    return video, audio
