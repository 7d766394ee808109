#!/usr/bin/env python3
"""
Build the parity fixtures under one output folder (normally tests/fixtures/) with the reference implementation.

    PYTHONPATH=.ref python3 tools/reference/make_fixtures.py --out tests/fixtures [--only dit,denoise] [--jobs 4]

Each family runs in its own process, so one failing (or crashing) family cannot stop the others; its traceback is
printed and the exit status is non-zero when any family failed. The tiny tokenizer is built first because the
text-encoder and end-to-end families ship copies of it. Everything runs on the CPU with one thread per process, so a
rerun on the same software produces identical files.
"""

import argparse
import concurrent.futures
import json
import os
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
FAMILIES = ("tiny_tokenizer", "tokenizer", "dit", "denoise", "text_encoder", "video_vae", "video_vae_encoder",
            "audio_vae", "audio_vae_encoder", "e2e", "e2e_fl2va", "e2e_ref2va", "vision", "image", "image_exif",
            "layout",
            "qwen_video", "media", "fasth3", "fasth3_forward")
NEEDS_TINY_TOKENIZER = ("tokenizer", "text_encoder", "e2e", "vision")
# Families that read another family's output folder: run after it when both are selected.
RUNS_AFTER = {"qwen_video": "vision", "e2e_ref2va": "e2e"}
# Families that need no torch (Pillow + NumPy only): they run on any machine, and record their own versions.
# `media` imports torch itself for its torchaudio part, and skips that part where torch is missing.
TORCH_FREE = ("image", "image_exif", "media")
# Families of parts that each run where their tools are (`e2e_ref2va`: its media part needs the ffmpeg command line
# and PyAV, its pipeline part torch): they import torch themselves, in their torch part only. Run on a machine
# without torch they leave MANIFEST.json's versions as they were.
TORCH_WHERE_PRESENT = ("e2e_ref2va",)
DEFAULT_TIMEOUT_S = 360


def default_qwen3_archive() -> str:
    """The Qwen3 tokenizer archive: .ref/data/ first, then the repository's tests/data/."""
    for candidate in (
        pathlib.Path(os.environ.get("PYTHONPATH", ".ref").split(os.pathsep)[0]) / "data" / "qwen3_tokenizer.tar.xz",
        HERE.parent.parent / "tests" / "data" / "qwen3_tokenizer.tar.xz",
        HERE.parent.parent / ".ref" / "data" / "qwen3_tokenizer.tar.xz",
    ):
        if candidate.is_file():
            return str(candidate.resolve())
    return str(HERE.parent.parent / "tests" / "data" / "qwen3_tokenizer.tar.xz")


def run_family(name: str, out: pathlib.Path, qwen3_archive: str) -> list:
    """Body of one worker process; returns the names of failed cases."""
    sys.path.insert(0, str(HERE))
    if name not in TORCH_FREE and name not in TORCH_WHERE_PRESENT:
        import common  # noqa: F401  (hides the GPUs, pins threads, disables autograd)

    if name == "tiny_tokenizer":
        import tiny_tokenizer

        info = tiny_tokenizer.build(out / "tiny_tokenizer")
        common.log(f"  tiny_tokenizer: base vocab {info['base_vocab_size']}, {info['merges']} merges, "
                   f"added ids {min(info['added'].values())}..{max(info['added'].values())}")
        return []
    if name == "tokenizer":
        import fx_tokenizer

        return fx_tokenizer.run(out, pathlib.Path(qwen3_archive))
    module = __import__(f"fx_{name}")
    return module.run(out)


def worker_main(args) -> int:
    import traceback

    started = time.time()
    try:
        failures = run_family(args.worker, pathlib.Path(args.out), args.qwen3_tokenizer)
    except Exception:
        traceback.print_exc()
        failures = [args.worker]
    print(f"[{args.worker}] {'FAILED: ' + ', '.join(failures) if failures else 'ok'} "
          f"({time.time() - started:.1f} s)", flush=True)
    return 1 if failures else 0


def versions() -> dict:
    """The versions of the libraries this Python has (a machine without torch runs the torch-free families only)."""
    script = (
        "import importlib, json, platform\n"
        "out = {'python': platform.python_version()}\n"
        "for name in ('torch', 'diffusers', 'transformers', 'tokenizers', 'safetensors', 'numpy', 'PIL'):\n"
        "    try:\n"
        "        module = importlib.import_module(name)\n"
        "    except ImportError:\n"
        "        continue\n"
        "    out['pillow' if name == 'PIL' else name] = module.__version__\n"
        "    if name == 'diffusers':\n"
        "        out['diffusers_path'] = module.__file__\n"
        "print(json.dumps(out))"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=worker_env())
    if result.returncode != 0:
        print(result.stderr, flush=True)
        return {"error": result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "unknown"}
    return json.loads(result.stdout.strip().splitlines()[-1])


def worker_env() -> dict:
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["PYTHONUNBUFFERED"] = "1"
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH", "")]))
    return env


def launch(name: str, args) -> tuple:
    started = time.time()
    command = [sys.executable, str(HERE / "make_fixtures.py"), "--worker", name, "--out", str(args.out),
               "--qwen3-tokenizer", args.qwen3_tokenizer]
    try:
        result = subprocess.run(command, capture_output=True, text=True, env=worker_env(), timeout=args.timeout)
        output, code = result.stdout + result.stderr, result.returncode
    except subprocess.TimeoutExpired as expired:
        def text(value):
            return value.decode(errors="replace") if isinstance(value, bytes) else (value or "")

        output, code = text(expired.stdout) + text(expired.stderr) + f"\n[{name}] TIMEOUT after {args.timeout} s", 124
    return name, code, output, time.time() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="tests/fixtures", help="output folder (the fixtures root)")
    parser.add_argument("--only", default="", help=f"comma-separated subset of {','.join(FAMILIES)}")
    parser.add_argument("--jobs", type=int, default=4, help="families run at once (one CPU thread each)")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_S, help="seconds per family")
    parser.add_argument("--qwen3-tokenizer", default=default_qwen3_archive(), help="qwen3_tokenizer.tar.xz")
    parser.add_argument("--worker", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.out = str(pathlib.Path(args.out).resolve())

    if args.worker:
        return worker_main(args)

    selected = [name.strip() for name in args.only.split(",") if name.strip()] or list(FAMILIES)
    unknown = sorted(set(selected) - set(FAMILIES))
    if unknown:
        parser.error(f"unknown families {unknown}; choose from {','.join(FAMILIES)}")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = versions()
    print(f"versions: {json.dumps(info)}", flush=True)

    results = {}

    def report(name, code, output, seconds):
        print(f"\n===== {name}: {'ok' if code == 0 else f'FAILED (exit {code})'} in {seconds:.1f} s =====", flush=True)
        print(output.rstrip(), flush=True)
        results[name] = {"ok": code == 0, "seconds": round(seconds, 1)}

    first = [name for name in selected if name == "tiny_tokenizer"]
    if not first and any(name in NEEDS_TINY_TOKENIZER for name in selected):
        if not (out / "tiny_tokenizer" / "tokenizer.json").is_file():
            first = ["tiny_tokenizer"]
    for name in first:
        report(*launch(name, args))
    rest = [name for name in selected if name != "tiny_tokenizer"]
    later = [name for name in rest if RUNS_AFTER.get(name) in rest]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(launch, name, args) for name in rest if name not in later]
        for future in concurrent.futures.as_completed(futures):
            report(*future.result())
    for name in later:
        report(*launch(name, args))

    # `versions` are those of the torch families' run; a torch-free family keeps its own in its entry, so a run of
    # those alone (on a machine without torch) leaves the others' record as it was.
    run_versions = {k: v for k, v in info.items() if k != "diffusers_path"}
    manifest = {"versions": run_versions, "families": {}}
    manifest_path = out / "MANIFEST.json"
    if manifest_path.is_file():
        previous = json.loads(manifest_path.read_text())
        manifest["families"].update(previous.get("families", {}))
        if all(name in TORCH_FREE or (name in TORCH_WHERE_PRESENT and "torch" not in info) for name in results):
            manifest["versions"] = previous.get("versions", run_versions)
    for name, result in results.items():
        folder = out / name
        files = sorted(str(p.relative_to(out)) for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
        manifest["families"][name] = {
            "ok": result["ok"],
            "files": len(files),
            "bytes": sum((out / f).stat().st_size for f in files),
        }
        if name in TORCH_FREE:
            manifest["families"][name]["versions"] = {k: v for k, v in run_versions.items()
                                                      if k in ("python", "numpy", "pillow")}
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    failed = sorted(name for name, result in results.items() if not result["ok"])
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"\nfixtures: {total} bytes under {out}; failed families: {failed or 'none'}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
