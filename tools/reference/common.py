"""Shared helpers of the fixture scripts: CPU-only deterministic torch, seeded draws, parameter randomization,
safetensors/JSON writers and small numeric summaries.

Import this module before anything that imports torch: it hides the GPUs so every fixture is computed on the CPU.
"""

import json
import os
import pathlib
import shutil

os.environ["CUDA_VISIBLE_DEVICES"] = ""  # fixtures are CPU computations, bit-reproducible on one machine
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402

# One thread: reductions are split the same way on every run, whatever the core count.
torch.set_num_threads(1)
torch.set_grad_enabled(False)

ALLOWED_DTYPES = (torch.float64, torch.float32, torch.bfloat16, torch.int64, torch.uint8)


def generator(seed: int) -> torch.Generator:
    return torch.Generator("cpu").manual_seed(seed)


def randn(shape, seed: int, scale: float = 1.0) -> torch.Tensor:
    """Standard normal float32 draw from its own seeded CPU generator."""
    return torch.randn(tuple(shape), generator=generator(seed), dtype=torch.float32) * scale


def scalar_i64(value: int) -> torch.Tensor:
    return torch.tensor([int(value)], dtype=torch.int64)


def save_tensors(path, tensors: dict) -> None:
    """Write a safetensors file of contiguous CPU tensors (f64/f32/bf16/i64, and u8 for images, only)."""
    from safetensors.torch import save_file

    out = {}
    for name, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name}: expected a tensor, got {type(tensor)}")
        if tensor.dtype not in ALLOWED_DTYPES:
            raise TypeError(f"{name}: dtype {tensor.dtype} is not one of {ALLOWED_DTYPES}")
        out[name] = tensor.detach().cpu().contiguous().clone()
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(out, str(path), metadata={"producer": "h3 tools/reference"})


def write_json(path, obj) -> None:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=True) + "\n", encoding="utf-8")


def write_jsonl(path, rows) -> None:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=True) + "\n")


def read_jsonl(path):
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def fresh_dir(path) -> pathlib.Path:
    path = pathlib.Path(path)
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def randomize_params(
    module: torch.nn.Module,
    seed: int,
    one_scale: float = 0.1,
    zero_scale: float = 0.1,
    weight_g_scale: float = 0.0,
) -> list:
    """
    Perturb every parameter the reference initializes to a constant, so that no path is an identity in the fixture:
    a constant 1 (norm weights, Snake alphas) becomes 1 + one_scale * N(0,1), a constant 0 (biases, zero-init residual
    scales, register tokens, SnakeBeta log-alpha/beta, AdaLN gates) becomes zero_scale * N(0,1), any other constant c
    becomes c * (1 + one_scale * N(0,1)). With weight_g_scale > 0 the weight-norm magnitudes `*.weight_g`, which start
    equal to the norm of their direction, are multiplied by 1 + weight_g_scale * N(0,1).
    Returns the names that were changed.
    """
    gen = generator(seed)
    changed = []
    for name, param in module.named_parameters():
        noise = torch.randn(tuple(param.shape), generator=gen, dtype=torch.float32).to(param.dtype)
        flat = param.detach().reshape(-1)
        if flat.numel() == 0:
            continue
        if name.endswith("weight_g") and weight_g_scale > 0:
            param.mul_(1.0 + weight_g_scale * noise)
            changed.append(name)
        elif bool(torch.all(flat == flat[0])):
            value = float(flat[0])
            if value == 0.0:
                param.copy_(zero_scale * noise)
            elif value == 1.0:
                param.copy_(1.0 + one_scale * noise)
            else:
                param.copy_(value * (1.0 + one_scale * noise))
            changed.append(name)
    return changed


def drop_name_or_path(config_path) -> None:
    """
    Remove the `_name_or_path` that diffusers records for a model loaded with from_pretrained (a temporary folder here)
    from a saved config.json, keeping diffusers' own formatting.
    """
    path = pathlib.Path(config_path)
    config = json.loads(path.read_text(encoding="utf-8"))
    if config.pop("_name_or_path", None) is not None:
        path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def summary(tensor: torch.Tensor) -> str:
    t = tensor.detach().double()
    return (
        f"shape={list(tensor.shape)} dtype={str(tensor.dtype).replace('torch.', '')} "
        f"mean|x|={t.abs().mean().item():.4g} max|x|={t.abs().max().item():.4g} finite={bool(torch.isfinite(t).all())}"
    )


def rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    return (torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b).clamp_min(1e-300)).item()


def max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.detach().double() - b.detach().double()).abs().max().item()


def require_finite(name: str, tensor: torch.Tensor) -> None:
    if not bool(torch.isfinite(tensor.detach().double()).all()):
        raise ValueError(f"{name} has non-finite values")


def tree_size(path) -> int:
    return sum(p.stat().st_size for p in pathlib.Path(path).rglob("*") if p.is_file())


def log(*parts) -> None:
    print(*parts, flush=True)
