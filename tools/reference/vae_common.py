"""Tiny video and audio VAEs and the pipeline's own decode blocks run on them."""

import torch

from common import generator, log, randomize_params

# diffusers unit-test config (spec/video_vae.md section 14) with random-ish latent statistics and a narrower encoder
# (4, 8 channels, 4 groups; the decode fixtures never run it): spatial ratio 4, temporal ratio 4, clip 17 -> 5
# latents, token drop 3, decoder 2 layers x 2 heads x 8, 2 registers, rotary dim 6 (one frequency per axis).
VIDEO_VAE_CONFIG = {
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 4,
    "block_out_channels": (4, 8),
    "layers_per_block": 1,
    "spatial_downsample_factors": (2, 2),
    "temporal_downsample_factors": (2, 2),
    "norm_num_groups": 4,
    "decoder_num_layers": 2,
    "decoder_num_attention_heads": 2,
    "decoder_attention_head_dim": 8,
    "decoder_num_register_tokens": 2,
    "decoder_ffn_mult": 2,
    "clip_length": 17,
    "token_drop": 3,
}

# The encoder fixtures' VAE: VIDEO_VAE_CONFIG's decoder with an encoder of the release's four kinds of levels
# (spec/video_vae.md section 6.2): temporal 1 / spatial 2, temporal 2 / spatial 2 (twice), and no downsampler; 1x1x1
# shortcuts where the width changes (4 -> 8, 8 -> 16), two ResNets per level, 2 groups (2 to 8 channels per group).
# Spatial ratio 8, temporal ratio 4 (clip 17 -> 5 latents, as released).
ENCODER_VAE_CONFIG = dict(
    VIDEO_VAE_CONFIG,
    block_out_channels=(4, 8, 8, 16),
    layers_per_block=2,
    spatial_downsample_factors=(2, 2, 2, 1),
    temporal_downsample_factors=(1, 2, 2, 1),
    norm_num_groups=2,
)

# diffusers unit-test config of the audio VAE (spec/audio_vae.md section 9): hop 4, rates 2 x 2.
AUDIO_VAE_UNIT_CONFIG = {
    "encoder_dim": 4,
    "encoder_rates": (2, 2),
    "latent_dim": 32,
    "latent_channels": 8,
    "num_attention_heads": 2,
    "decoder_dim": 16,
    "decoder_rates": (2, 2),
    "decoder_kernel_sizes": (4, 4),
    "resblock_kernel_sizes": (3, 7),
    "resblock_dilation_sizes": ((1, 3), (1, 3)),
    "sampling_rate": 32000,
}

# Release-shaped tiny audio VAE: an odd rate 5 with kernel 9 like the release, rates 4 (kernel 8) and 2 (kernel 4),
# three AMP kernels (3, 7, 11) with dilations (1, 3, 5); hop 40.
AUDIO_VAE_HOP40_CONFIG = {
    "encoder_dim": 4,
    "encoder_rates": (5, 8),
    "latent_dim": 32,
    "latent_channels": 8,
    "num_attention_heads": 2,
    "decoder_dim": 16,
    "decoder_rates": (5, 4, 2),
    "decoder_kernel_sizes": (9, 8, 4),
    "resblock_kernel_sizes": (3, 7, 11),
    "resblock_dilation_sizes": ((1, 3, 5), (1, 3, 5), (1, 3, 5)),
    "sampling_rate": 32000,
}

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def latent_statistics(channels: int, seed: int) -> tuple:
    """Per-channel latents_mean ~ 0.3 N(0,1) and latents_std in [0.5, 1.5), rounded to 4 decimals for a clean config."""
    gen = generator(seed)
    mean = (0.3 * torch.randn(channels, generator=gen, dtype=torch.float64)).tolist()
    std = (0.5 + torch.rand(channels, generator=gen, dtype=torch.float64)).tolist()
    return [round(v, 4) for v in mean], [round(v, 4) for v in std]


def build_video_vae(seed: int):
    from diffusers import AutoencoderKLMiniMaxH3

    mean, std = latent_statistics(VIDEO_VAE_CONFIG["latent_channels"], seed + 7)
    torch.manual_seed(seed)
    vae = AutoencoderKLMiniMaxH3(**VIDEO_VAE_CONFIG, latents_mean=mean, latents_std=std).float().eval()
    randomize_params(vae, seed + 1, one_scale=0.1, zero_scale=0.3)
    return vae


def build_encoder_vae(seed: int):
    """ENCODER_VAE_CONFIG with random latent statistics, randomized like build_video_vae (float32)."""
    from diffusers import AutoencoderKLMiniMaxH3

    mean, std = latent_statistics(ENCODER_VAE_CONFIG["latent_channels"], seed + 7)
    torch.manual_seed(seed)
    vae = AutoencoderKLMiniMaxH3(**ENCODER_VAE_CONFIG, latents_mean=mean, latents_std=std).float().eval()
    randomize_params(vae, seed + 1, one_scale=0.1, zero_scale=0.3)
    return vae


def build_standin_video_vae():
    """A video VAE with the release's spatial ratio 16 and 4 latent channels, for its geometry only (never run)."""
    from diffusers import AutoencoderKLMiniMaxH3

    torch.manual_seed(8800)
    config = dict(VIDEO_VAE_CONFIG)
    config.update(
        block_out_channels=(8, 8, 8, 8),
        spatial_downsample_factors=(2, 2, 2, 2),
        temporal_downsample_factors=(1, 2, 2, 1),
    )
    return AutoencoderKLMiniMaxH3(**config).float().eval()


def build_audio_vae(config: dict, seed: int):
    from diffusers import AutoencoderKLMiniMaxH3Audio

    mean, std = latent_statistics(config["latent_channels"], seed + 7)
    torch.manual_seed(seed)
    vae = AutoencoderKLMiniMaxH3Audio(**config, latents_mean=mean, latents_std=std).float().eval()
    randomize_params(vae, seed + 1, one_scale=0.1, zero_scale=0.1, weight_g_scale=0.2)
    return vae


def manual_video_decode(vae, latents: torch.Tensor) -> torch.Tensor:
    """MiniMaxH3VideoDecodeStep without autocast: denormalize, decode (float32), ImageNet de-normalize, clamp."""
    mean = torch.tensor(vae.config.latents_mean).view(1, -1, 1, 1, 1)
    std = torch.tensor(vae.config.latents_std).view(1, -1, 1, 1, 1)
    video = vae.decode(latents * std + mean, return_dict=False)[0]
    pixel_mean = torch.tensor(IMAGENET_MEAN).view(1, -1, 1, 1, 1)
    pixel_std = torch.tensor(IMAGENET_STD).view(1, -1, 1, 1, 1)
    return (video.float() * pixel_std + pixel_mean).clamp(0, 1)


def manual_audio_decode(vae, audio_latents: torch.Tensor) -> torch.Tensor:
    """MiniMaxH3AudioDecodeStep: denormalize, decode; returns (2, samples)."""
    mean = torch.tensor(vae.config.latents_mean).view(1, -1, 1)
    std = torch.tensor(vae.config.latents_std).view(1, -1, 1)
    audio = vae.decode(audio_latents * std + mean, return_dict=False)[0]
    return audio.float()[:, 0, :]


def tame_video_output(vae, probe_latents: torch.Tensor, max_clamped: float = 0.1) -> None:
    """Halve `decoder.proj_out` until at most `max_clamped` of the probe decode's pixels hit the [0, 1] clamp."""
    for _ in range(8):
        mean = torch.tensor(vae.config.latents_mean).view(1, -1, 1, 1, 1)
        std = torch.tensor(vae.config.latents_std).view(1, -1, 1, 1, 1)
        raw = vae.decode(probe_latents * std + mean, return_dict=False)[0].float()
        pixel = raw * torch.tensor(IMAGENET_STD).view(1, -1, 1, 1, 1) + torch.tensor(IMAGENET_MEAN).view(1, -1, 1, 1, 1)
        clamped = ((pixel < 0) | (pixel > 1)).double().mean().item()
        log(f"    video probe: {clamped:.3f} of the pixels clamped")
        if clamped <= max_clamped:
            return
        vae.decoder.proj_out.weight.mul_(0.5)
        vae.decoder.proj_out.bias.mul_(0.5)
    raise ValueError("could not bring the video VAE output into range")


def tame_audio_output(vae, probe_latents: torch.Tensor, max_clamped: float = 0.05) -> None:
    """Halve `decoder.conv_post.weight_g` until at most `max_clamped` of the probe decode's samples hit +-1."""
    for _ in range(10):
        audio = manual_audio_decode(vae, probe_latents)
        clamped = (audio.abs() >= 1.0).double().mean().item()
        log(f"    audio probe: {clamped:.3f} of the samples clamped")
        if clamped <= max_clamped:
            return
        vae.decoder.conv_post.weight_g.mul_(0.5)
    raise ValueError("could not bring the audio VAE output into range")


def pipeline_video_decode(vae, latents: torch.Tensor) -> torch.Tensor:
    """The reference MiniMaxH3VideoDecodeStep (output_type 'pt'), returned as (1, 3, frames, H, W)."""
    from diffusers.modular_pipelines.minimax_h3.decoders import MiniMaxH3VideoDecodeStep

    pipe = MiniMaxH3VideoDecodeStep().init_pipeline()
    pipe.update_components(vae=vae)
    videos = pipe(latents=latents.clone(), output_type="pt", output="videos")
    return videos.permute(0, 2, 1, 3, 4).contiguous().float()


def pipeline_audio_decode(vae, audio_latents: torch.Tensor) -> torch.Tensor:
    """The reference MiniMaxH3AudioDecodeStep, returned as (2, samples)."""
    from diffusers.modular_pipelines.minimax_h3.decoders import MiniMaxH3AudioDecodeStep

    pipe = MiniMaxH3AudioDecodeStep().init_pipeline()
    pipe.update_components(audio_vae=vae)
    audio = pipe(audio_latents=audio_latents.clone(), output="audio")
    return audio[0].contiguous().float()
