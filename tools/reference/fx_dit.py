"""DiT forward fixtures: tests/fixtures/dit/<case>/{transformer/, case.safetensors, expected.safetensors, case.json}."""

import copy
import pathlib
import tempfile

import torch

from common import (
    drop_name_or_path,
    fresh_dir,
    log,
    max_abs,
    randn,
    rel_l2,
    require_finite,
    save_tensors,
    summary,
    write_json,
)
from dit_common import (
    CONFIG_B,
    CONFIG_C,
    UNIT_TEST_CONFIG,
    build_transformer,
    check_partition,
    forward,
    permute_layout,
    pipeline_layout,
    unit_test_layout,
)

FP32_MODULE_PREFIXES = ("proj_in.", "audio_proj_in.", "time_embedder.", "proj_out.", "audio_proj_out.")


def draw_inputs(config: dict, layout: dict, seed: int) -> dict:
    patch = config["patch_size"]
    video_dim = config["in_channels"] * patch[0] * patch[1] * patch[2]
    return {
        "hidden_states": randn((1, layout["video_indices"].numel(), video_dim), seed),
        "audio_hidden_states": randn((1, layout["audio_indices"].numel(), config["audio_in_channels"]), seed + 1),
        "encoder_hidden_states": randn((1, layout["text_indices"].numel(), config["text_dim"]), seed + 2),
        **layout,
    }


def case_tensors(inputs: dict) -> dict:
    names = (
        "hidden_states",
        "audio_hidden_states",
        "encoder_hidden_states",
        "timestep",
        "timestep_indices",
        "token_tags",
        "position_ids",
        "video_indices",
        "audio_indices",
        "text_indices",
    )
    out = {name: inputs[name] for name in names}
    out["timestep"] = out["timestep"].to(torch.float32)
    out["position_ids"] = out["position_ids"].to(torch.float64)
    for name in ("timestep_indices", "token_tags", "video_indices", "audio_indices", "text_indices"):
        out[name] = out[name].to(torch.int64)
    return out


def run_f32_f64(model, inputs: dict) -> dict:
    video32, audio32 = forward(model, inputs, torch.float32)
    model64 = copy.deepcopy(model).double()
    video64, audio64 = forward(model64, inputs, torch.float64)
    expected = {
        "sample_f32": video32.float(),
        "audio_sample_f32": audio32.float(),
        "sample_f64": video64.double(),
        "audio_sample_f64": audio64.double(),
    }
    log(f"    f32 vs f64: video rel_l2 {rel_l2(video32, video64):.3e}, audio rel_l2 {rel_l2(audio32, audio64):.3e}")
    return expected


def write_case(root: pathlib.Path, name: str, config: dict, model, inputs: dict, expected: dict, notes: dict) -> None:
    case_dir = fresh_dir(root / name)
    model.save_pretrained(str(case_dir / "transformer"))
    drop_name_or_path(case_dir / "transformer" / "config.json")
    for key, value in expected.items():
        require_finite(f"{name}/{key}", value)
        log(f"    {key}: {summary(value)}")
    save_tensors(case_dir / "case.safetensors", case_tensors(inputs))
    save_tensors(case_dir / "expected.safetensors", expected)
    layout_info = {
        "L": int(inputs["position_ids"].shape[0]),
        "num_text": int(inputs["text_indices"].numel()),
        "num_audio": int(inputs["audio_indices"].numel()),
        "num_video": int(inputs["video_indices"].numel()),
        "timestep": [float(v) for v in inputs["timestep"]],
    }
    write_json(case_dir / "case.json", {"config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in config.items()}, **layout_info, **notes})


def case_unit_test(root):
    log("  dit/unit_test: diffusers unit-test config and layout, 2 timesteps (unsorted, one is 0)")
    model = build_transformer(UNIT_TEST_CONFIG, seed=1000)
    layout = unit_test_layout()
    layout["timestep"] = torch.tensor([0.7, 0.0], dtype=torch.float32)
    check_partition(layout)
    inputs = draw_inputs(UNIT_TEST_CONFIG, layout, seed=1100)
    expected = run_f32_f64(model, inputs)
    write_case(root, "unit_test", UNIT_TEST_CONFIG, model, inputs, expected, {"layout": "diffusers unit test"})


def case_one_timestep(root):
    log("  dit/one_timestep: config B, t2va layout (7 text, 9x2 audio, 3 frames x 2x3 patches), one timestep t=0")
    model = build_transformer(CONFIG_B, seed=2000)
    layout = pipeline_layout([1] * 7, 3, 4, 6, 9, video_timestep=0.0, audio_timestep=0.0)
    check_partition(layout)
    inputs = draw_inputs(CONFIG_B, layout, seed=2100)
    expected = run_f32_f64(model, inputs)
    write_case(root, "one_timestep", CONFIG_B, model, inputs, expected, {"layout": "t2va step 0"})


def case_three_timesteps_permuted(root):
    log("  dit/three_timesteps_permuted: config C, fl2va layout (both keyframes, a vision block in the text), "
        "3 timesteps, rows moved to a random permutation of the sequence")
    model = build_transformer(CONFIG_C, seed=3000)
    text_tags = [1, 1, 1, 0, 0, 0, 0, 1, 1]
    base = pipeline_layout(
        text_tags, 7, 4, 4, 12, video_timestep=0.25, audio_timestep=0.5, keyframe_anchors=("first", "last")
    )
    layout = permute_layout(base, seed=3050)
    check_partition(layout)
    if len(layout["timestep"]) != 3:
        raise ValueError(f"expected 3 distinct timesteps, got {layout['timestep'].tolist()}")
    inputs = draw_inputs(CONFIG_C, layout, seed=3100)
    expected = run_f32_f64(model, inputs)
    # The same rows in the contiguous order must give the same per-row outputs.
    base_inputs = {**inputs, **base}
    video_base, audio_base = forward(copy.deepcopy(model).double(), base_inputs, torch.float64)
    log(f"    permutation check (f64): video max|d| {max_abs(video_base, expected['sample_f64']):.3e}, "
        f"audio max|d| {max_abs(audio_base, expected['audio_sample_f64']):.3e}")
    write_case(
        root,
        "three_timesteps_permuted",
        CONFIG_C,
        model,
        inputs,
        expected,
        {"layout": "fl2va (first+last keyframe) rows permuted", "num_condition_video_rows": 2 * 4},
    )


def case_bf16(root):
    log("  dit/bf16: config B weights loaded as the release loads them (bf16 + the fp32 modules)")
    from diffusers import MiniMaxH3Transformer3DModel

    base = build_transformer(CONFIG_B, seed=2000)
    with tempfile.TemporaryDirectory() as tmp:
        base.save_pretrained(tmp)
        model16 = MiniMaxH3Transformer3DModel.from_pretrained(tmp, dtype=torch.bfloat16).eval()
    dtypes = {}
    for name, param in model16.named_parameters():
        want = torch.float32 if name.startswith(FP32_MODULE_PREFIXES) else torch.bfloat16
        if param.dtype != want:
            raise ValueError(f"{name} is {param.dtype}, expected {want}")
        dtypes[str(param.dtype)] = dtypes.get(str(param.dtype), 0) + 1
    log(f"    parameter dtypes: {dtypes}; rope.inv_freq {model16.rope.inv_freq.dtype}")
    layout = pipeline_layout([1] * 5, 3, 2, 4, 5, video_timestep=0.02702701, audio_timestep=0.1)
    check_partition(layout)
    inputs = draw_inputs(CONFIG_B, layout, seed=4100)
    video16, audio16 = forward(model16, inputs, torch.float32)

    # The same bf16-valued weights, upcast exactly.
    state = {k: v.to(torch.float64) for k, v in model16.state_dict().items()}
    model64 = MiniMaxH3Transformer3DModel(**CONFIG_B).double().eval()
    model64.load_state_dict(state)
    video64, audio64 = forward(model64, inputs, torch.float64)
    model32 = MiniMaxH3Transformer3DModel(**CONFIG_B).float().eval()
    model32.load_state_dict({k: v.to(torch.float32) for k, v in model16.state_dict().items()})
    video32, audio32 = forward(model32, inputs, torch.float32)
    log(f"    bf16 vs f64: video rel_l2 {rel_l2(video16, video64):.3e}, audio rel_l2 {rel_l2(audio16, audio64):.3e}")
    expected = {
        "sample_bf16": video16.float(),
        "audio_sample_bf16": audio16.float(),
        "sample_f64": video64,
        "audio_sample_f64": audio64,
        "sample_f32": video32.float(),
        "audio_sample_f32": audio32.float(),
    }
    write_case(root, "bf16", CONFIG_B, model16, inputs, expected,
               {"layout": "t2va step 1 (5-point grid)", "weights": "bf16 + fp32 modules, as the release"})


CASES = (case_unit_test, case_one_timestep, case_three_timesteps_permuted, case_bf16)


def run(out_root: pathlib.Path) -> list:
    root = out_root / "dit"
    root.mkdir(parents=True, exist_ok=True)
    failures = []
    for case in CASES:
        try:
            case(root)
        except Exception:  # one case failing must not hide the others
            import traceback

            traceback.print_exc()
            failures.append(case.__name__)
    return failures
