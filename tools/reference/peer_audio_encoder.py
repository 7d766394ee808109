"""Peer baseline for ref2va's reference-audio encode: diffusers' AutoencoderKLMiniMaxH3Audio at its released config
(the class defaults: encoder_dim 64, rates (2, 4, 4, 5, 5), latent_dim 2048, 32 latent channels, 8 heads), random
weights, one GPU, in float32 — the dtype the reference pipeline runs the audio VAE in: the class lists every module in
`_keep_in_fp32_modules` (the modular pipeline's `load_components(dtype=torch.bfloat16)` leaves it float32) and
MiniMaxH3Ref2VAReferenceEncoderStep calls it under no autocast. PyTorch's defaults stay as they are (cuDNN
convolutions in TF32, `torch.backends.cudnn.allow_tf32 = True`; matmuls in full float32); the JSON records them.

    OUT=DIR DIFFUSERS=DIR python3 tools/reference/peer_audio_encoder.py [--seconds 15] [--reps 10] [--warmup 2]

Times, with CUDA events, the median of --reps calls after --warmup ones of:
  encode    `audio_vae.encode(waveform[:, None])` + `posterior.mode()` on a stereo 32 kHz waveform already on the GPU
            (the acceptance's definition: what tools/reference/ref2va_ratios.py divides h3's time by);
  pipeline  the reference encoder step's whole audio path from a host waveform: `.to(device)[:, None]`, encode,
            `mode().float().cpu().transpose(1, 2)`, the latents_mean / latents_std normalization and the reshape to
            rows (what h3's encode_reference does: host check, upload, encode, rows on the host) — informational.
The waveform: a sine per channel plus N(0, 0.05) noise, |x| < 1 (never zeros). Weights: the conv weight_v and every
matrix N(0, 1/sqrt(fan_in)), weight_g U(0.5, 1), Snake alphas 1 + N(0, 0.3) (the DAC encoder's raw alphas), LayerNorm
weights 1 + N(0, 0.05), biases (q and v biases included) N(0, 0.02); the key bias stays the zero buffer it is — as
h3's AudioVaeEncoder::random and write_random_audio_vae draw them. Writes $OUT/peer_audio_encoder.json and prints one
`JSON {...}` line.
"""
import argparse
import json
import math
import os
import sys
import time

import torch


def init_weights(model, generator):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight_g"):
                p.uniform_(0.5, 1.0, generator=generator)
            elif name.endswith(".alpha") and p.ndim == 3:  # Snake1d (the encoder's), stored raw around 1
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=generator, device=p.device))
            elif name.endswith(".alpha") or name.endswith(".beta"):  # SnakeBeta (the decoder's), log space
                p.normal_(0.0, 0.3, generator=generator)
            elif p.ndim >= 2:
                fan_in = p[0].numel()
                p.normal_(0.0, 1.0 / math.sqrt(fan_in), generator=generator)
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.05 * torch.randn(p.shape, generator=generator, device=p.device))
            else:
                p.normal_(0.0, 0.02, generator=generator)
        for name, p in model.encoder.named_parameters():
            if not bool(p.ne(0).any()):
                raise SystemExit(f"peer_audio_encoder: encoder parameter {name} is all zeros after the initialization")


def waveform(channels, samples, rate, seed):
    g = torch.Generator().manual_seed(seed)
    f = 200 + 3000 * torch.rand(channels, 1, generator=g)
    ph = 6 * torch.rand(channels, 1, generator=g)
    t = torch.arange(samples, dtype=torch.float64)[None] / rate
    w = 0.5 * torch.sin(2 * math.pi * f.double() * t + ph.double()) + 0.05 * torch.randn(channels, samples, generator=g,
                                                                                         dtype=torch.float64)
    return w.float()


def timed(fn, warmup, reps):
    for _ in range(warmup):
        out = fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        out = fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return times, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--diffusers", default=os.environ.get("DIFFUSERS", os.path.join(os.getcwd(), ".ref")))
    args = ap.parse_args()
    if args.reps < 3 or args.warmup < 1:
        sys.exit("peer_audio_encoder: --reps must be >= 3 and --warmup >= 1")
    sys.path.insert(0, args.diffusers)
    import diffusers
    from diffusers import AutoencoderKLMiniMaxH3Audio

    t0 = time.time()
    torch.manual_seed(0)
    vae = AutoencoderKLMiniMaxH3Audio().to("cuda", torch.float32).eval()  # as ../shared/bench/peer_vae.py builds it
    init_weights(vae, torch.Generator("cuda").manual_seed(0))
    build_s = time.time() - t0
    cfg = vae.config
    rate = cfg.sampling_rate
    samples = int(round(args.seconds * rate))
    host = waveform(2, samples, rate, seed=8)
    device_wave = host.to("cuda")
    mean = torch.tensor(cfg.latents_mean if cfg.latents_mean is not None else [0.0] * cfg.latent_channels).view(1, 1, -1)
    std = torch.tensor(cfg.latents_std if cfg.latents_std is not None else [1.0] * cfg.latent_channels).view(1, 1, -1)

    def encode():
        with torch.no_grad():
            posterior = vae.encode(device_wave[:, None], return_dict=False)[0]
            return posterior.mode()

    def pipeline():
        with torch.no_grad():
            posterior = vae.encode(host.to("cuda")[:, None], return_dict=False)[0]
            latents = posterior.mode().float().cpu().transpose(1, 2)
            return ((latents - mean) / std).reshape(-1, cfg.latent_channels)

    torch.cuda.reset_peak_memory_stats()
    t_encode, z = timed(encode, args.warmup, args.reps)
    t_pipeline, rows = timed(pipeline, args.warmup, args.reps)
    z = z.float()
    ok = bool(torch.isfinite(z).all()) and float(z.max()) > float(z.min()) and bool(torch.isfinite(rows).all())
    enc_params = sum(p.numel() for n, p in vae.named_parameters() if not n.startswith(("decoder.", "dec_in_proj.")))
    result = {
        "bench": "peer_audio_encoder",
        "seconds": args.seconds,
        "sampling_rate": rate,
        "samples": samples,
        "channels": 2,
        "latent_shape": list(z.shape),
        "rows": list(rows.shape),
        "dtype": str(next(vae.encoder.parameters()).dtype).replace("torch.", ""),
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "encoder_params": enc_params,
        "build_s": build_s,
        "warmup": args.warmup,
        "reps": args.reps,
        "encode_s": t_encode,
        "median_s": sorted(t_encode)[len(t_encode) // 2],
        "pipeline_s": t_pipeline,
        "pipeline_median_s": sorted(t_pipeline)[len(t_pipeline) // 2],
        "peak_GB": torch.cuda.max_memory_allocated() / 1e9,
        "torch": torch.__version__,
        "diffusers": getattr(diffusers, "__version__", "?"),
        "device": torch.cuda.get_device_name(),
        "ok": ok,
    }
    with open(os.path.join(os.environ.get("OUT", "."), "peer_audio_encoder.json"), "w") as f:
        json.dump(result, f, indent=1)
    print("JSON " + json.dumps(result), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
