"""
Audio VAE encoder fixtures (the reference-audio conditioning encode of spec/audio_vae.md sections 4 and 6.2):
tests/fixtures/audio_vae_encoder/{models/<model>/, <case>/case.safetensors, <case>/expected.safetensors,
<case>/case.json}.

Every case runs the reference's own recipe on a float32 model: the setup step's audio normalization
(`MiniMaxH3Ref2VASetupStep._normalize_audio_condition`, at the VAE's own rate: a mono source is upmixed by repeating
its channel) and then the real `MiniMaxH3Ref2VAReferenceEncoderStep` on one `MiniMaxH3AudioReference` (encode the two
channels as two batch items, posterior mean, normalize, channel-major rows). The same encode is replayed module by
module (pad to a multiple of the hop, `encoder`, `pre_block`, `mean_proj`) in float32 and on a float64 copy of the
model (`AutoencoderKLMiniMaxH3Audio.encode` itself casts a non-float32 posterior to float32, so the float64 values come
from the replay). A third replay rounds every Conv1d's input and weight to TF32 (10 explicit mantissa bits, round to
nearest even) to measure what the reference's default GPU numerics cost: PyTorch runs float32 convolutions through
cuDNN with `torch.backends.cudnn.allow_tf32` (True by default), its matmuls with `torch.backends.cuda.matmul.allow_tf32`
(False by default); on this CPU fixture machine everything is plain float32.
"""

import contextlib
import copy
import math
import pathlib

import torch
import torch.nn.functional as F

from common import fresh_dir, generator, log, max_abs, randn, rel_l2, require_finite, save_tensors, summary, write_json
from vae_common import AUDIO_VAE_HOP40_CONFIG, AUDIO_VAE_UNIT_CONFIG, build_audio_vae, tame_audio_output

# Head width 40 / 4 = 10 pooled onto 8 latent channels: adaptive pooling with overlapping bins of unequal start
# spacing (the release's 256 -> 32 and the other configs' 16 -> 8 have equal bins); odd encoder width 3, rates 3, 2
# (an odd stride: kernel 6, padding 2).
AUDIO_VAE_POOL_CONFIG = {
    "encoder_dim": 3,
    "encoder_rates": (3, 2),
    "latent_dim": 40,
    "latent_channels": 8,
    "num_attention_heads": 4,
    "decoder_dim": 8,
    "decoder_rates": (3, 2),
    "decoder_kernel_sizes": (5, 4),
    "resblock_kernel_sizes": (3,),
    "resblock_dilation_sizes": ((1,),),
    "sampling_rate": 32000,
}

# (name, config, model seed). The unit and hop40 models are the audio_vae decoder fixtures' (same seeds, same taming),
# so git stores their files once.
MODELS = (
    ("unit", "diffusers unit test (hop 4)", AUDIO_VAE_UNIT_CONFIG, 9000),
    ("hop40", "release-shaped (hop 40, encoder rates 5, 8)", AUDIO_VAE_HOP40_CONFIG, 9500),
    ("pool", "head 10 pooled to 8 (hop 6, rates 3, 2)", AUDIO_VAE_POOL_CONFIG, 9700),
)

# (name, model, source channels, samples, what it covers)
CASES = (
    ("unit_stereo_s32", "unit", 2, 32, "the unit test's length, a multiple of the hop"),
    ("unit_mono_s33", "unit", 1, 33, "mono upmixed; 33 samples padded to 36 (9 latents)"),
    ("hop40_stereo_s1", "hop40", 2, 1, "one sample: padded to one hop, one latent (attention over one row)"),
    ("hop40_stereo_s1000", "hop40", 2, 1000, "a multiple of the hop (25 latents)"),
    ("hop40_stereo_s1234", "hop40", 2, 1234, "padded by 6 samples (31 latents)"),
    ("hop40_mono_s401", "hop40", 1, 401, "mono upmixed; padded by 39 samples (11 latents)"),
    ("hop40_stereo_s6007", "hop40", 2, 6007, "151 latents: the causal attention spans more than 128 rows"),
    ("pool_stereo_s100", "pool", 2, 100, "uneven adaptive pooling 10 -> 8; padded to 102 (17 latents)"),
)

MAX_SECONDS = 15.0  # the reference's max_duration: the truncation the setup step applies (a no-op here)


def waveform_source(channels: int, samples: int, seed: int) -> torch.Tensor:
    """(channels, samples) float32 audio-like signal: three sines per channel plus noise, peak below 1."""
    gen = generator(seed)
    t = torch.arange(samples, dtype=torch.float64) / 32000.0
    rows = []
    for _ in range(channels):
        freqs = 100.0 + 4000.0 * torch.rand(3, generator=gen, dtype=torch.float64)
        phases = 2 * math.pi * torch.rand(3, generator=gen, dtype=torch.float64)
        amps = 0.1 + 0.2 * torch.rand(3, generator=gen, dtype=torch.float64)
        x = sum(a * torch.sin(2 * math.pi * f * t + p) for a, f, p in zip(amps, freqs, phases))
        x = x + 0.05 * torch.randn(samples, generator=gen, dtype=torch.float64)
        rows.append(x.clamp(-0.95, 0.95))
    return torch.stack(rows).to(torch.float32)


def to_tf32(t: torch.Tensor) -> torch.Tensor:
    """float32 rounded to TF32 (10 explicit mantissa bits), round to nearest, ties to even."""
    bits = t.contiguous().view(torch.int32)
    rounded = (bits + 0x0FFF + ((bits >> 13) & 1)) & ~0x1FFF
    return rounded.view(torch.float32)


@contextlib.contextmanager
def tf32_convolutions():
    """F.conv1d with its input and weight rounded to TF32 (the bias and the accumulation stay float32)."""
    original = torch.nn.functional.conv1d

    def conv1d(input, weight, bias=None, *args, **kwargs):
        return original(to_tf32(input), to_tf32(weight), bias, *args, **kwargs)

    torch.nn.functional.conv1d = conv1d
    try:
        yield
    finally:
        torch.nn.functional.conv1d = original


def replay(vae, waveform: torch.Tensor) -> dict:
    """AutoencoderKLMiniMaxH3Audio.encode module by module, in the model's dtype: right pad to a multiple of the hop,
    encoder, pre_block (on [B, T, C]), mean_proj."""
    dtype = next(vae.parameters()).dtype
    x = waveform.to(dtype)[:, None]
    hop = vae.hop_length
    x = F.pad(x, (0, math.ceil(x.shape[-1] / hop) * hop - x.shape[-1]))
    trunk = vae.encoder(x)
    pre = vae.pre_block(trunk.transpose(1, 2))
    mean = vae.mean_proj(pre.transpose(1, 2))
    return {"trunk": trunk, "pre_block": pre, "mean": mean}


def normalize_rows(vae, mean: torch.Tensor) -> torch.Tensor:
    """The encoder step's normalization and channel-major rows, in mean's dtype (float32 statistics, as the step
    builds them with torch.tensor(list))."""
    latents_mean = torch.tensor(vae.config.latents_mean).view(1, 1, -1).to(mean.dtype)
    latents_std = torch.tensor(vae.config.latents_std).view(1, 1, -1).to(mean.dtype)
    latents = mean.transpose(1, 2)
    return ((latents - latents_mean) / latents_std).reshape(-1, vae.config.latent_channels)


def setup_waveform(vae, source: torch.Tensor) -> torch.Tensor:
    """The setup step's audio normalization at the VAE's own rate: truncate to MAX_SECONDS, mono -> 2 channels."""
    from diffusers.modular_pipelines.minimax_h3.before_encoder import MiniMaxH3Ref2VASetupStep

    rate = vae.config.sampling_rate
    return MiniMaxH3Ref2VASetupStep._normalize_audio_condition(source.clone(), rate, rate, MAX_SECONDS).contiguous()


def pipeline_rows(vae, waveform: torch.Tensor) -> torch.Tensor:
    """The real reference encoder step on one audio reference (the setup step's output)."""
    from diffusers.modular_pipelines.minimax_h3.encoders import MiniMaxH3Ref2VAReferenceEncoderStep
    from diffusers.modular_pipelines.minimax_h3.references import MiniMaxH3AudioReference

    pipe = MiniMaxH3Ref2VAReferenceEncoderStep().init_pipeline()
    pipe.update_components(audio_vae=vae)
    rows = pipe(
        normalized_references=[MiniMaxH3AudioReference(audio=waveform.clone(), sample_rate=vae.config.sampling_rate)],
        output="audio_condition_latents",
    )
    assert len(rows) == 1, f"expected one entry of audio rows, got {len(rows)}"
    return rows[0].contiguous()


def run(out_root: pathlib.Path) -> list:
    root = out_root / "audio_vae_encoder"
    root.mkdir(parents=True, exist_ok=True)
    failures, models = [], {}
    for name, config_name, config, seed in MODELS:
        try:
            log(f"  audio_vae_encoder model {name}: {config_name}")
            vae = build_audio_vae(config, seed)
            tame_audio_output(vae, randn((2, config["latent_channels"], 16), seed + 50))
            vae.save_pretrained(str(fresh_dir(root / "models" / name)))
            models[name] = (vae, copy.deepcopy(vae).double(), config_name)
        except Exception:
            import traceback

            traceback.print_exc()
            failures.append(f"model {name}")
    tf32_defaults = {
        "torch.backends.cudnn.allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "torch.backends.cuda.matmul.allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
    }
    for index, (name, model, channels, samples, what) in enumerate(CASES):
        try:
            if model not in models:
                raise ValueError(f"model {model} was not built")
            vae, vae64, config_name = models[model]
            log(f"  audio_vae_encoder/{name}: {what}")
            case_dir = fresh_dir(root / name)
            source = waveform_source(channels, samples, 7000 + index)
            waveform = setup_waveform(vae, source)
            assert torch.equal(waveform, source.expand(2, -1)), waveform.shape
            try:
                rows_pipeline, pipeline_error = pipeline_rows(vae, waveform), None
            except Exception as error:  # keep the replayed fixture; the test then has no pipeline rows to compare
                import traceback

                traceback.print_exc()
                rows_pipeline, pipeline_error = None, f"{type(error).__name__}: {error}"
            f32 = replay(vae, waveform)
            f64 = replay(vae64, waveform.double())
            with tf32_convolutions():
                tf32 = replay(vae, waveform)
            encoded = vae.encode(waveform[:, None], return_dict=False)[0].mode()
            rows_f32 = normalize_rows(vae, f32["mean"])
            rows_f64 = normalize_rows(vae, f64["mean"])
            for label, tensor in (("mean_f32", f32["mean"]), ("mean_f64", f64["mean"]), ("rows_f32", rows_f32)):
                require_finite(f"{name} {label}", tensor)
            num_latents = f32["mean"].shape[-1]
            assert rows_f32.shape == (2 * num_latents, config["latent_channels"]), rows_f32.shape
            stats = {
                "encode_vs_replay_max_abs": max_abs(encoded, f32["mean"]),
                "mean_f32_vs_f64_rel_l2": rel_l2(f32["mean"], f64["mean"]),
                "rows_f32_vs_f64_rel_l2": rel_l2(rows_f32, rows_f64),
                "mean_tf32_emulated_vs_f64_rel_l2": rel_l2(tf32["mean"], f64["mean"]),
                "trunk_tf32_emulated_vs_f64_rel_l2": rel_l2(tf32["trunk"], f64["trunk"]),
            }
            if rows_pipeline is not None:
                stats["pipeline_vs_replay_rows_max_abs"] = max_abs(rows_pipeline, rows_f32)
            log(f"    mean {summary(f32['mean'])}")
            log("    " + ", ".join(f"{k} {v:.3e}" for k, v in stats.items()))
            save_tensors(case_dir / "case.safetensors", {"source": source, "waveform": waveform})
            expected = {} if rows_pipeline is None else {"rows_pipeline": rows_pipeline}
            save_tensors(case_dir / "expected.safetensors", {
                **expected,
                "mean_f32": f32["mean"],
                "rows_f32": rows_f32,
                "mean_f64": f64["mean"],
                "rows_f64": rows_f64,
                "trunk_f64": f64["trunk"],
                "pre_block_f64": f64["pre_block"],
                "mean_tf32_emulated": tf32["mean"],
            })
            write_json(case_dir / "case.json", {
                "model": f"models/{model}",
                "config": config_name,
                "what": what,
                "hop": vae.hop_length,
                "source_shape": list(source.shape),
                "waveform_shape": list(waveform.shape),
                "padded_samples": math.ceil(samples / vae.hop_length) * vae.hop_length,
                "latents_per_channel": num_latents,
                "rows_shape": list(rows_f32.shape),
                "recipe": "MiniMaxH3Ref2VASetupStep._normalize_audio_condition (same rate: truncate to 15 s, mono "
                "-> 2 channels) then MiniMaxH3Ref2VAReferenceEncoderStep: audio_vae.encode(waveform[:, None]) "
                "posterior mode (= mean), transpose to (2, A, C), (x - latents_mean) / latents_std in float32, "
                "reshape to (2A, C) channel-major",
                "pipeline_block": pipeline_error or "ok",
                "tf32_defaults_of_this_torch": tf32_defaults,
                "tf32_emulation": "every F.conv1d input and weight rounded to TF32 (round to nearest even), float32 "
                "accumulation; linears, LayerNorms, attention and Snake untouched (allow_tf32 is False for matmuls)",
                "stats": stats,
            })
        except Exception:
            import traceback

            traceback.print_exc()
            failures.append(name)
    return failures
