#!/usr/bin/env python3
"""
Full-width DiT comparison data for a GPU run (not part of make_fixtures.py).

Builds MiniMaxH3Transformer3DModel with the released widths (hidden 5376, 56 x 128 heads, ffn 14336, text_dim 5120,
everything else as released) but only `--layers` blocks, with seeded random weights (matrices N(0, 0.02), norm weights
1 + 0.02 N, biases 0.002 N), casts it the way the release stores it (bfloat16, with proj_in, audio_proj_in,
time_embedder, proj_out, audio_proj_out in float32) and writes

    OUT/transformer/          save_pretrained of that model (release dtypes)
    OUT/case.safetensors      inputs, same names and dtypes as the dit fixtures (tools/reference/README.md section 1)
    OUT/reference.safetensors sample_bf16, audio_sample_bf16 (the bf16 model, SDPA default backend) and
                              sample_f32, audio_sample_f32 (the same weights upcast to float32, TF32 off)

The layout is a realistic t2va one: 36 text rows, then the audio and video rows of a 39-frame 512 x 480 (H x W)
request (12 latent frames x 16 x 15 patches, 65 audio latents per channel): L = 36 + 130 + 2880 = 3046, two distinct
timesteps (video 0.2702703, audio 0.597015: step 40 of the default 50-point grids). Deterministic for a given seed
and GPU; prints rel-L2 and cosine of bf16 against f32. No timing.

    PYTHONPATH=.ref python3 tools/reference/dit_fullwidth.py --layers 2 --out dit_full

`--tiny` swaps the widths for the diffusers unit-test config (a smoke test of this script, e.g. on a CPU with
`--device cpu`); the layout and everything else stay the same.
"""

import argparse
import pathlib
import sys

import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

TEXT_ROWS = 36
NUM_FRAMES = 39  # 17 * 2 + 5 -> 12 latent frames
LATENT_HEIGHT, LATENT_WIDTH = 32, 30  # 512 x 480 pixels
VIDEO_T, AUDIO_T = 0.2702703, 0.597015
FP32_MODULES = ("proj_in", "audio_proj_in", "time_embedder", "proj_out", "audio_proj_out")


def init_weights(model: torch.nn.Module, seed: int, device: str) -> None:
    gen = torch.Generator(device).manual_seed(seed)
    for name, param in model.named_parameters():
        noise = torch.randn(tuple(param.shape), generator=gen, device=device, dtype=torch.float32)
        if param.ndim == 1 and "norm" in name:
            param.copy_(1.0 + 0.02 * noise)
        elif name.endswith(".bias"):
            param.copy_(0.002 * noise)
        else:
            param.copy_(0.02 * noise)


def to_release_dtypes(model) -> None:
    """bfloat16 everywhere except the modules the release keeps in float32 (and the rope buffer)."""
    model.to(torch.bfloat16)
    for name in FP32_MODULES:
        getattr(model, name).to(torch.float32)
    model.rope.to(torch.float32)


def rel_l2(a, b) -> float:
    a, b = a.double(), b.double()
    return (torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b)).item()


def cosine(a, b) -> float:
    return torch.nn.functional.cosine_similarity(a.double().flatten(), b.double().flatten(), dim=0).item()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=2, choices=(2, 3, 4))
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="unit-test widths (smoke test of the script)")
    args = parser.parse_args()

    from diffusers import MiniMaxH3Transformer3DModel
    from diffusers.modular_pipelines.minimax_h3.modular_pipeline import audio_latent_num_frames
    from dit_common import UNIT_TEST_CONFIG, check_partition, pipeline_layout

    widths = dict(UNIT_TEST_CONFIG) if args.tiny else {}
    widths["num_layers"] = args.layers

    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = args.device

    with torch.device(device):
        model = MiniMaxH3Transformer3DModel(**widths).float().eval()
    init_weights(model, args.seed, device)
    to_release_dtypes(model)
    dtypes = {}
    for _, param in model.named_parameters():
        dtypes[str(param.dtype)] = dtypes.get(str(param.dtype), 0) + param.numel()
    print(f"parameters by dtype: {dtypes}", flush=True)
    model.save_pretrained(str(out / "transformer"))

    num_audio = audio_latent_num_frames(NUM_FRAMES)
    layout = pipeline_layout(
        [1] * TEXT_ROWS, 12, LATENT_HEIGHT, LATENT_WIDTH, num_audio, video_timestep=VIDEO_T, audio_timestep=AUDIO_T
    )
    check_partition(layout)
    gen = torch.Generator("cpu").manual_seed(args.seed + 1)
    config = model.config
    inputs = {
        "hidden_states": torch.randn(1, layout["video_indices"].numel(), config.in_channels * 4, generator=gen),
        "audio_hidden_states": torch.randn(1, layout["audio_indices"].numel(), config.audio_in_channels, generator=gen),
        # bf16-representable, so the bf16 and f32 runs see the same text rows
        "encoder_hidden_states": torch.randn(1, TEXT_ROWS, config.text_dim, generator=gen).to(torch.bfloat16).float(),
        **layout,
    }
    print(f"L = {layout['position_ids'].shape[0]}, timesteps {layout['timestep'].tolist()}", flush=True)

    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in inputs.items()}, str(out / "case.safetensors"))

    def run(dtype_of_text):
        kwargs = {k: v.to(device) for k, v in inputs.items()}
        kwargs["encoder_hidden_states"] = kwargs["encoder_hidden_states"].to(dtype_of_text)
        video, audio = model(**kwargs, return_dict=False)
        return video.float().cpu(), audio.float().cpu()

    video16, audio16 = run(torch.bfloat16)  # the pipeline hands the conditioner's bf16 output over
    model.float()  # the same bf16 values, exactly
    video32, audio32 = run(torch.float32)
    save_file(
        {
            "sample_bf16": video16.contiguous(),
            "audio_sample_bf16": audio16.contiguous(),
            "sample_f32": video32.contiguous(),
            "audio_sample_f32": audio32.contiguous(),
        },
        str(out / "reference.safetensors"),
    )
    print(f"video bf16 vs f32: rel_l2 {rel_l2(video16, video32):.4e}, cosine {cosine(video16, video32):.6f}")
    print(f"audio bf16 vs f32: rel_l2 {rel_l2(audio16, audio32):.4e}, cosine {cosine(audio16, audio32):.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
