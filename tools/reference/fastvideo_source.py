"""Imports chosen modules of a FastVideo source tree without installing it (fx_fasth3.py, peer_vsa.py).

The packages around the modules are empty namespace packages, so their heavy __init__ files (distributed setup,
compiled kernels) never run; the two small modules the attention backends need from them (fastvideo.logger,
fastvideo.distributed) are stubs. fastvideo_kernel (FastVideo's fastvideo-kernel/python) is imported the same way:
its Triton kernels without its compiled extension or its other optional dependencies.
"""

import importlib
import logging
import os
import pathlib
import sys
import types

VSA_H3_BACKEND = "fastvideo.attention.backends.video_sparse_attn_h3"


def namespace_package(name: str, path: pathlib.Path) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = [str(path)]
    sys.modules[name] = module
    return module


class _Logger(logging.LoggerAdapter):
    def warning_once(self, message, *args):
        self.warning(message, *args)


def _parent_packages(modules):
    parents = []
    for name in modules:
        parts = name.split(".")
        for i in range(1, len(parts)):
            parent = ".".join(parts[:i])
            if parent not in parents:
                parents.append(parent)
    return parents


def import_fastvideo(src: str, modules) -> list:
    """The named fastvideo.* modules, imported from the tree `src` (the folder holding fastvideo/)."""
    root = pathlib.Path(src).resolve()
    if not (root / "fastvideo" / "attention" / "backends" / "video_sparse_attn_h3.py").is_file():
        raise SystemExit(f"FASTVIDEO_SRC={src} must be a FastVideo source tree (holding "
                         "fastvideo/attention/backends/video_sparse_attn_h3.py)")
    for env in ("FASTVIDEO_VSA_SM100A", "FASTVIDEO_H3_VSA_PROBE", "FASTVIDEO_VSA_CUTEDSL"):
        os.environ.pop(env, None)
    for parent in _parent_packages(modules):
        namespace_package(parent, root.joinpath(*parent.split(".")))
    logger_module = types.ModuleType("fastvideo.logger")
    logger_module.init_logger = lambda name: _Logger(logging.getLogger(name), {})
    sys.modules["fastvideo.logger"] = logger_module
    distributed = types.ModuleType("fastvideo.distributed")

    def get_sp_group():
        raise RuntimeError("FastVideo runs here without sequence parallelism")

    distributed.get_sp_group = get_sp_group
    sys.modules["fastvideo.distributed"] = distributed
    try:
        import pytest  # noqa: F401  (FastVideo's test modules import it; only their test functions use it)
    except ImportError:
        sys.modules["pytest"] = types.ModuleType("pytest")
    return [importlib.import_module(name) for name in modules]


def import_fastvideo_kernel(kernel_src: str, modules) -> list:
    """The named fastvideo_kernel.* modules from `kernel_src` (the folder holding fastvideo_kernel/, i.e. FastVideo's
    fastvideo-kernel/python)."""
    root = pathlib.Path(kernel_src).resolve()
    if not (root / "fastvideo_kernel" / "block_sparse_attn.py").is_file():
        raise SystemExit(f"{kernel_src} must hold fastvideo_kernel/block_sparse_attn.py (FastVideo's "
                         "fastvideo-kernel/python)")
    for parent in _parent_packages(modules):
        namespace_package(parent, root.joinpath(*parent.split(".")))
    return [importlib.import_module(name) for name in modules]
