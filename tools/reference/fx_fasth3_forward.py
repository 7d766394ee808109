"""FastH3 student DiT forward fixtures: tests/fixtures/fasth3_forward/<case>/{transformer/, case.safetensors,
expected.safetensors, case.json}.

Made by FastVideo's own MiniMax-H3 transformer (fastvideo/models/dits/minimax_h3.py, MiniMaxH3Transformer3DModel: a
to_gate_compress per main block, skipped while all zero, _gate_active) with its VSA-H3 attention
(fastvideo/attention/layer.py DistributedAttention_VSA over backends/video_sparse_attn_h3.py, whose Triton kernel is
FastVideo's torch oracle, as in fx_fasth3.py), loaded by FastVideo's loader rules (models/loader/utils.py name mapping;
fsdp_load.py's zero init of a missing gate), on a packed layout from FastVideo's packing.py and the VSA metadata its
denoising stage builds (pipelines/basic/minimax_h3/stages/minimax_h3_denoising.py). FASTVIDEO_SRC names the FastVideo
source tree, as for fx_fasth3.py:

    FASTVIDEO_SRC=/path/to/FastVideo PYTHONPATH=.ref python3 tools/reference/make_fixtures.py --only fasth3_forward

Only what a one-process CPU forward never exercises is stubbed: sequence/tensor parallelism (a world of 1: the
all-to-all is the identity, as FastVideo's group coordinator returns its input at world size 1; the rest refuses to
run), the attention selector (VSA-H3 for the layers that list it, i.e. the main blocks, as attention_backend =
VIDEO_SPARSE_ATTN_H3 resolves; SDPA for the token refiner, FastVideo's fallback there), envs (the Triton fusions off:
the eager path, which is FastVideo's own CPU path), nvtx_range (a no-op), get_compute_dtype, and the platform (the real
AttentionBackendEnum; not a TPU). The heads are 8 wide: FastVideo's selector lists 64/128 for VSA-H3, the math is the
same at any width.

Cases (the transformer of each is a tiny random model; see README §17):
  student_t64_s0     FastVideo's FastH3 export (diffusers names + to_gate_compress, model.safetensors), tile 64,
                     sparsity 0: the student's defaults (basic_fasth3.py)
  student_t64_s05    the same export with routing: sparsity 0.5, exempt
  pure_t256_s05      the base layout (no gates: FastVideo zero-inits them and skips the branch), tile 256, sparsity 0.5
"""

import contextlib
import copy
import importlib
import json
import math
import os
import pathlib
import shutil
import sys
import tempfile
import types

from common import drop_name_or_path, fresh_dir, log, randn, rel_l2, require_finite, save_tensors, summary, write_json

import torch  # noqa: E402

import fastvideo_source  # noqa: E402
import fx_fasth3  # noqa: E402
from dit_common import CONFIG_B, build_transformer, check_partition, forward as diffusers_forward  # noqa: E402
from fx_dit import case_tensors  # noqa: E402

# CONFIG_B (4 x 8 heads != hidden 28, 6 of 8 channels rotated) with a third main block.
FASTH3_CONFIG = {**CONFIG_B, "num_layers": 3}
GATE_SCALE = 0.5  # to_gate_compress ~ N(0, GATE_SCALE^2 / hidden): the gated pooled term is O(the attention output)
# A routed row's last kept and first dropped video scores must differ by this (relative to 1 + |score|), so that the
# float32 engine, whose scores sit ~1e-7 away, selects the same tiles.
MIN_ROUTING_GAP = 1e-5
INPUT_SEED_TRIES = 8

CASES = (
    # name, gates, tile_elems, sparsity, latent (frames, height, width), audio latents, pass of the student grid, seed
    ("student_t64_s0", True, 64, 0.0, (5, 10, 12), 20, 2, 7000),
    ("student_t64_s05", True, 64, 0.5, (5, 10, 12), 20, 1, 7100),
    ("pure_t256_s05", False, 256, 0.5, (5, 20, 18), 20, 1, 7200),
)
TEXT_ROWS = 7


# ----------------------------------------------------------------------------------------------------------------
# FastVideo's transformer with stubbed surroundings


def _stub(name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], child, module)
    return module


def _refuse(what: str):
    def refuse(*args, **kwargs):
        raise RuntimeError(f"fx_fasth3_forward runs in one process: {what} is not available")

    return refuse


def load_fastvideo_dit(src: str) -> dict:
    """FastVideo's MiniMax-H3 transformer, loader helpers, packing and forward context, on the CPU."""
    fv = fx_fasth3.load_fastvideo(src)  # the VSA-H3 backend with the oracle kernels, logger and distributed stubs
    package = pathlib.Path(src).resolve() / "fastvideo"
    backend = fv["backend"]
    for name, sub in (("fastvideo.layers", "layers"), ("fastvideo.models.dits", "models/dits"),
                      ("fastvideo.models.loader", "models/loader"), ("fastvideo.configs", "configs"),
                      ("fastvideo.configs.models", "configs/models"),
                      ("fastvideo.configs.models.dits", "configs/models/dits"), ("fastvideo.platforms", "platforms"),
                      ("fastvideo.pipelines", "pipelines"), ("fastvideo.pipelines.basic", "pipelines/basic"),
                      ("fastvideo.pipelines.basic.minimax_h3", "pipelines/basic/minimax_h3")):
        fastvideo_source.namespace_package(name, package / sub)

    # Parallelism: a world of one.
    distributed = sys.modules["fastvideo.distributed"]
    distributed.get_tp_rank = lambda: 0
    distributed.get_tp_world_size = lambda: 1
    for name in ("divide", "split_tensor_along_last_dim", "tensor_model_parallel_all_gather",
                 "tensor_model_parallel_all_reduce"):
        setattr(distributed, name, _refuse(f"tensor parallelism ({name})"))
    _stub("fastvideo.distributed.communication_op",
          sequence_model_parallel_all_to_all_4D=lambda input_, scatter_dim=2, gather_dim=1: input_,
          sequence_model_parallel_all_gather=_refuse("sequence parallelism"),
          sequence_model_parallel_all_gather_with_unpad=_refuse("sequence parallelism"),
          sequence_model_parallel_shard=_refuse("sequence parallelism"))
    _stub("fastvideo.distributed.parallel_state", get_sp_parallel_rank=lambda: 0, get_sp_world_size=lambda: 1,
          model_parallel_is_initialized=lambda: False)

    # Environment, profiling, platform.
    _stub("fastvideo.envs", FASTVIDEO_MINIMAX_H3_FUSIONS="")
    _stub("fastvideo.profiler", nvtx_range=lambda name: contextlib.nullcontext())
    _stub("fastvideo.utils", get_compute_dtype=lambda: torch.float32)
    _stub("fastvideo.models.dits.minimax_h3_fusions", HAVE_TRITON=False,
          fused_qknorm_rope=_refuse("the Triton fusions"),
          fused_residual_gate_rmsnorm_modulate=_refuse("the Triton fusions"),
          fused_rmsnorm_modulate=_refuse("the Triton fusions"), minimax_h3_swiglu=_refuse("the Triton fusions"))
    _stub("fastvideo.layers.rotary_embedding", _apply_rotary_emb=_refuse("freqs_cis RoPE (H3 rotates itself)"))
    interface = importlib.import_module("fastvideo.platforms.interface")
    platforms = sys.modules["fastvideo.platforms"]
    platforms.AttentionBackendEnum = interface.AttentionBackendEnum
    platforms.current_platform = types.SimpleNamespace(is_tpu=lambda: False)

    # The selector: VSA-H3 where a layer lists it (the main blocks), SDPA elsewhere (the token refiner).
    enum = interface.AttentionBackendEnum
    sdpa = importlib.import_module("fastvideo.attention.backends.sdpa")

    def get_attn_backend(head_size, dtype, supported_attention_backends=None, **kwargs):
        if supported_attention_backends and enum.VIDEO_SPARSE_ATTN_H3 in supported_attention_backends:
            return backend.MiniMaxH3VSABackend
        return sdpa.SDPABackend

    _stub("fastvideo.attention.selector", get_attn_backend=get_attn_backend,
          backend_name_to_enum=lambda name: enum[name] if name else None)

    layer = importlib.import_module("fastvideo.attention.layer")
    attention = sys.modules["fastvideo.attention"]
    attention.DistributedAttention = layer.DistributedAttention
    attention.DistributedAttention_VSA = layer.DistributedAttention_VSA
    dit_config_base = importlib.import_module("fastvideo.configs.models.dits.base")
    sys.modules["fastvideo.configs.models"].DiTConfig = dit_config_base.DiTConfig
    model = importlib.import_module("fastvideo.models.dits.minimax_h3")
    return {
        **fv,
        "model": model,
        "config": importlib.import_module("fastvideo.configs.models.dits.minimax_h3"),
        "loader": importlib.import_module("fastvideo.models.loader.utils"),
        "forward_context": importlib.import_module("fastvideo.forward_context"),
        "packing": importlib.import_module("fastvideo.pipelines.basic.minimax_h3.packing"),
    }


def load_transformer(fv, folder: pathlib.Path):
    """A FastVideo transformer from a checkpoint folder, as its loader does it: the config.json fields into the arch
    config, the safetensors names through param_names_mapping, a missing gate zero-initialized (fsdp_load.py's
    ALLOWED_NEW_PARAM_PATTERNS), everything else strict."""
    from safetensors.torch import load_file

    hf_config = json.loads((folder / "config.json").read_text())
    config = fv["config"].MiniMaxH3Config()
    config.update_model_arch(hf_config)
    model = fv["model"].MiniMaxH3Transformer3DModel(config, hf_config).eval()
    state = {}
    for path in sorted(folder.glob("*.safetensors")):
        state.update(load_file(str(path)))
    mapping = fv["loader"].get_param_names_mapping(model.param_names_mapping)
    custom, reverse = fv["loader"].hf_to_custom_state_dict(state, mapping)
    wanted = model.state_dict()
    unexpected = sorted(set(custom) - set(wanted))
    missing = sorted(set(wanted) - set(custom))
    if unexpected or any("gate_compress" not in name for name in missing):
        raise ValueError(f"{folder}: unexpected {unexpected[:4]}, missing {missing[:4]}")
    for name in missing:
        custom[name] = torch.zeros_like(wanted[name])
    model.load_state_dict(custom, strict=True)
    model.reverse_param_names_mapping = reverse
    return model, missing


def export_fasth3(model, folder: pathlib.Path, config_json: pathlib.Path) -> None:
    """The student's checkpoint as FastVideo exports a trained transformer (train/entrypoint/dcp_to_diffusers.py):
    each loaded name back to its checkpoint name (reverse_param_names_mapping), the new gates under their own names,
    one model.safetensors beside the base config.json."""
    from safetensors.torch import save_file

    reverse = model.reverse_param_names_mapping
    state = {reverse[name][0] if name in reverse else name: value.detach().clone().contiguous()
             for name, value in model.state_dict().items()}
    folder.mkdir(parents=True)
    save_file(state, str(folder / "model.safetensors"))
    shutil.copy(config_json, folder / "config.json")


def in_dtype(model, dtype):
    """A copy in `dtype`, parameters and the RoPE buffer (as fx_dit.py runs diffusers' float64 forward)."""
    return copy.deepcopy(model).to(dtype)


# ----------------------------------------------------------------------------------------------------------------
# Layout, metadata and forward


def prefix_segments(layout) -> tuple:
    """The denoising stage's _h3_vsa_prefix_segments: (text, condition video, audio) rows before the generated video."""
    return (int(layout.text_indices.numel()), int(layout.num_condition_video_rows), int(layout.audio_indices.numel()))


def student_timesteps(fv, grid_pass: int) -> tuple:
    """The video and audio timesteps of one pass of the student's grid (basic_fasth3.py: 5 grid points)."""
    out = []
    for label in ("video", "audio"):
        scheduler = fv["scheduler"].MiniMaxH3Scheduler(shift=fx_fasth3.SHIFTS[label])
        scheduler.set_timesteps(fx_fasth3.STUDENT_GRID_POINTS, device="cpu")
        out.append(float(scheduler.timesteps[grid_pass]))
    return tuple(out)


def build_inputs(fv, config: dict, latent, audio_latents: int, timesteps: tuple, seed: int) -> tuple:
    packing = fv["packing"]
    frames, height, width = latent
    layout = packing.build_packed_sequence(torch.ones(TEXT_ROWS, dtype=torch.long), frames, height, width,
                                           audio_latents, tuple(config["patch_size"]))
    video_t, audio_t = timesteps
    unique, inverse = packing.build_row_timesteps(layout, video_timestep=video_t, audio_timestep=audio_t,
                                                  condition_video_timestep=max(video_t,
                                                                               packing.MINIMAX_H3_KEYFRAME_NOISE_AUG),
                                                  condition_audio_timestep=1.0)
    patch = config["patch_size"]
    video_dim = config["in_channels"] * patch[0] * patch[1] * patch[2]
    inputs = {
        "hidden_states": randn((1, layout.video_indices.numel(), video_dim), seed),
        "audio_hidden_states": randn((1, layout.audio_indices.numel(), config["audio_in_channels"]), seed + 1),
        "encoder_hidden_states": randn((1, layout.text_indices.numel(), config["text_dim"]), seed + 2),
        "timestep": unique.to(torch.float32),
        "timestep_indices": inverse.to(torch.long),
        "token_tags": layout.token_tags,
        "position_ids": layout.position_ids,
        "video_indices": layout.video_indices,
        "audio_indices": layout.audio_indices,
        "text_indices": layout.text_indices,
    }
    check_partition(inputs)
    return layout, inputs


class RoutingGap:
    """Wraps the backend's _build_block_mask to record the smallest gap, over every routed query tile of every layer
    and head, between the last kept and the first dropped video score (exempt mode)."""

    def __init__(self, backend):
        self.backend = backend
        self.original = backend._build_block_mask
        self.smallest = math.inf

    def __call__(self, scores, num_prefix_tiles, num_video_tiles, sparsity, exempt):
        kept = self.backend.compute_topk(sparsity, num_video_tiles)
        if kept < num_video_tiles:
            top = scores[:, :, num_prefix_tiles:, num_prefix_tiles:].topk(kept + 1, dim=-1).values
            gap = (top[..., kept - 1] - top[..., kept]) / (1.0 + top[..., kept - 1].abs())
            self.smallest = min(self.smallest, float(gap.min()))
        return self.original(scores, num_prefix_tiles, num_video_tiles, sparsity, exempt)

    def __enter__(self):
        self.backend._build_block_mask = self
        return self

    def __exit__(self, *exc):
        self.backend._build_block_mask = self.original


def fastvideo_forward(fv, model, layout, inputs: dict, tile_elems: int, sparsity: float) -> tuple:
    """One transformer call as MiniMaxH3DenoisingStage makes it, with the VSA-H3 metadata of its builder."""
    patch = tuple(model.patch_size)
    metadata = fv["backend"].MiniMaxH3VSAMetadataBuilder().build(
        current_timestep=0,
        raw_latent_shape=(layout.num_video_latent_frames, layout.latent_height, layout.latent_width),
        patch_size=patch,
        VSA_sparsity=sparsity,
        prefix_segments=prefix_segments(layout),
        device=torch.device("cpu"),
        exempt=True,
        dense_layers=(),
        tile_size=tile_elems,
    )
    with fv["forward_context"].set_forward_context(current_timestep=0, attn_metadata=metadata):
        video, audio = model(**inputs)
    return video, audio, metadata


# ----------------------------------------------------------------------------------------------------------------
# Cases


def write_base(config: dict, seed: int, folder: pathlib.Path) -> None:
    """The base checkpoint: a random diffusers transformer, saved as diffusers saves it (no gates)."""
    build_transformer(config, seed).save_pretrained(str(folder))
    drop_name_or_path(folder / "config.json")


def add_trained_gates(model, hidden: int, seed: int) -> None:
    """Stands in for the DMD2 training of the gates: every main block's to_gate_compress random and non-zero."""
    gen = torch.Generator().manual_seed(seed)
    for block in model.transformer_blocks:
        weight = block.attn.to_gate_compress.weight
        weight.copy_(torch.randn(tuple(weight.shape), generator=gen) * (GATE_SCALE / math.sqrt(hidden)))
        block.attn._gate_compress_active = None  # FastVideo tests the weight once, at the first forward


def run_case(fv, root: pathlib.Path, case) -> list:
    name, gates, tile_elems, sparsity, latent, audio_latents, grid_pass, seed = case
    config = FASTH3_CONFIG
    failures = []
    log(f"  fasth3_forward/{name}: {'FastH3 export with gates' if gates else 'base layout, no gates'}, tile "
        f"{tile_elems}, sparsity {sparsity}")
    folder = fresh_dir(root / name)
    with tempfile.TemporaryDirectory() as tmp:
        base = pathlib.Path(tmp) / "base"
        write_base(config, seed, base)
        base_model, zero_filled = load_transformer(fv, base)
        if len(zero_filled) != config["num_layers"]:
            failures.append(f"{name}: the loader zero-filled {len(zero_filled)} gates, expected one per main block")
        if gates:
            student = copy.deepcopy(base_model)
            add_trained_gates(student, config["hidden_size"], seed + 50)
            export_fasth3(student, folder / "transformer", base / "config.json")
        else:
            shutil.copytree(base, folder / "transformer")
        model, missing = load_transformer(fv, folder / "transformer")
        if gates and missing:
            failures.append(f"{name}: the export lacks {missing[:2]}")  # dcp_to_diffusers' strict reload

        diffusers_model = build_transformer(config, seed).double()
        timesteps = student_timesteps(fv, grid_pass)
        model64 = in_dtype(model, torch.float64)
        dense64 = in_dtype(base_model, torch.float64)
        for attempt in range(INPUT_SEED_TRIES):
            input_seed = seed + 100 + 10 * attempt
            layout, inputs = build_inputs(fv, config, latent, audio_latents, timesteps, input_seed)
            with RoutingGap(fv["backend"]) as gap:
                video64, audio64, metadata = fastvideo_forward(fv, model64, layout, inputs, tile_elems, sparsity)
            if gap.smallest >= MIN_ROUTING_GAP:
                break
            log(f"    input seed {input_seed}: routing gap {gap.smallest:.2e} < {MIN_ROUTING_GAP:g}, next seed")
        else:
            failures.append(f"{name}: no input seed gives a routing gap of {MIN_ROUTING_GAP:g}")
        video32, audio32, _ = fastvideo_forward(fv, in_dtype(model, torch.float32), layout, inputs,
                                                tile_elems, sparsity)

    # Self-checks. FastVideo's dense path (the base weights, no gate, sparsity 0: an all-true mask) is diffusers'
    # forward: the weights, the name mapping and the layout are the same model's.
    dense_video, dense_audio, _ = fastvideo_forward(fv, dense64, layout, inputs, tile_elems, 0.0)
    ref_video, ref_audio = diffusers_forward(diffusers_model, inputs, torch.float64)
    vs_diffusers = max(rel_l2(dense_video, ref_video), rel_l2(dense_audio, ref_audio))
    if vs_diffusers > 1e-10:
        failures.append(f"{name}: FastVideo's dense forward vs diffusers' rel L2 {vs_diffusers:.3g}")
    active = [bool(block.attn._gate_compress_active) for block in model64.transformer_blocks]
    if active != [gates] * config["num_layers"]:
        failures.append(f"{name}: gate branches active {active}")
    noise = {"video": rel_l2(video32, video64), "audio": rel_l2(audio32, audio64)}
    if max(noise.values()) > 1e-4:
        failures.append(f"{name}: float32 vs float64 rel L2 {noise}")
    vs_dense = max(rel_l2(video64, dense_video), rel_l2(audio64, dense_audio))
    if vs_dense < 1e-3:
        failures.append(f"{name}: the case equals the dense forward (rel L2 {vs_dense:.3g}): nothing to test")

    expected = {"sample_f64": video64, "audio_sample_f64": audio64, "sample_f32": video32.float(),
                "audio_sample_f32": audio32.float()}
    for key, value in expected.items():
        require_finite(f"{name}/{key}", value)
        log(f"    {key}: {summary(value)}")
    save_tensors(folder / "case.safetensors", case_tensors(inputs))
    save_tensors(folder / "expected.safetensors", expected)
    grid = [layout.num_video_latent_frames // config["patch_size"][0],
            layout.latent_height // config["patch_size"][1], layout.latent_width // config["patch_size"][2]]
    write_json(folder / "case.json", {
        "config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in config.items()},
        "gates": gates, "tile_elems": tile_elems, "sparsity": sparsity, "mode": "exempt",
        "grid": grid, "prefix_segments": list(prefix_segments(layout)),
        "num_prefix_tiles": int(metadata.num_prefix_tiles), "num_video_tiles": int(metadata.num_video_tiles),
        "k_vid": fv["backend"].compute_topk(sparsity, metadata.num_video_tiles),
        "video_timestep": timesteps[0], "audio_timestep": timesteps[1], "student_grid_pass": grid_pass,
        "input_seed": input_seed,
        "weights_file": sorted(p.name for p in (folder / "transformer").glob("*.safetensors")),
        "f32_self_noise_rel_l2": noise, "dense_rel_l2": vs_dense, "fastvideo_dense_vs_diffusers_rel_l2": vs_diffusers,
        "min_routing_gap": gap.smallest if math.isfinite(gap.smallest) else None,
    })
    log(f"    {metadata.num_prefix_tiles}+{metadata.num_video_tiles} tiles, k_vid "
        f"{fv['backend'].compute_topk(sparsity, metadata.num_video_tiles)}; f32 self-noise video "
        f"{noise['video']:.2e} audio {noise['audio']:.2e}; vs dense {vs_dense:.3e}; FastVideo dense vs diffusers "
        f"{vs_diffusers:.2e}; routing gap {gap.smallest:.2e}")
    return failures


def run(out) -> list:
    src = os.environ.get("FASTVIDEO_SRC", "")
    if not src:
        raise SystemExit("fx_fasth3_forward needs FASTVIDEO_SRC: the FastVideo source tree (the folder holding "
                         "fastvideo/)")
    fv = load_fastvideo_dit(src)
    root = fresh_dir(pathlib.Path(out) / "fasth3_forward")
    failures = []
    for case in CASES:
        failures += run_case(fv, root, case)
    for failure in failures:
        log(f"  SELF-CHECK FAILED: {failure}")
    return failures


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="tests/fixtures")
    parser.add_argument("--fastvideo-src", default=os.environ.get("FASTVIDEO_SRC", ""))
    args = parser.parse_args()
    os.environ["FASTVIDEO_SRC"] = args.fastvideo_src
    sys.exit(1 if run(args.out) else 0)
