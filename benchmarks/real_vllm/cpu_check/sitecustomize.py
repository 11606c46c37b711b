"""Loaded by every Python of the CPU check (this folder on PYTHONPATH): vLLM's CUDA path without a GPU.

Two things and nothing else. (1) vLLM's CUDA-only extensions (`.so` files linked against the driver's libcuda.so.1)
are first loaded for real; only when that fails for want of the driver (or of the file, for those the wheelhouse
leaves out) an empty module stands in, and its name is written to $VLLM_CPU_CHECK_STUBBED, so the check says exactly
what it could not load. (2) The entry point beside this file names `vllm.platforms.cuda.CudaPlatform` as an
out-of-tree platform plugin (vLLM prefers one over its built-in detection), since NVML finds no GPU here.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import types

# The extensions vLLM 0.26's CUDA wheel ships (shared/reference/vllm.md); only these may be stubbed.
CUDA_ONLY = {"vllm._C_stable_libtorch", "vllm._moe_C_stable_libtorch", "vllm._qutlass_C", "vllm._flashmla_C",
             "vllm.vllm_flash_attn._vllm_fa2_C", "vllm.vllm_flash_attn._vllm_fa3_C", "vllm.cumem_allocator",
             "vllm._flashmla_extension_C"}
# Left out of the wheelhouse on purpose (vLLM suppresses their ImportError): never stubbed, so vLLM sees them absent.
ABSENT_BY_DESIGN = {"vllm._moe_C_stable_libtorch", "vllm._qutlass_C", "vllm._flashmla_C",
                    "vllm.vllm_flash_attn._vllm_fa2_C"}


def cuda_platform() -> str:
    """CudaPlatform itself; with VLLM_CPU_CHECK_SM (e.g. 9.0) a CudaPlatform that answers the device questions
    asked at import time (oink_ops.py:18 asks the capability) as the lent H100 would, so the check goes past them."""
    return "sitecustomize.DevicePlatform" if os.environ.get("VLLM_CPU_CHECK_SM") else "vllm.platforms.cuda.CudaPlatform"


def __getattr__(name: str):
    """DevicePlatform, built on first use (vLLM resolves it by name once the platform is first asked for)."""
    if name != "DevicePlatform":
        raise AttributeError(name)
    from vllm.platforms.cuda import CudaPlatform
    from vllm.platforms.interface import DeviceCapability

    major, minor = (int(x) for x in os.environ["VLLM_CPU_CHECK_SM"].split("."))

    class DevicePlatform(CudaPlatform):
        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> DeviceCapability:
            return DeviceCapability(major=major, minor=minor)

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return "NVIDIA H100 80GB HBM3 (stand-in answer: CPU check)"

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return 80 * 1024**3

    globals()["DevicePlatform"] = DevicePlatform
    return DevicePlatform


def _record(name: str, why: str) -> None:
    path = os.environ.get("VLLM_CPU_CHECK_STUBBED")
    if path:
        with open(path, "a") as f:
            f.write(f"{name}\t{why}\n")


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec):  # noqa: D401 - importlib protocol
        return types.ModuleType(spec.name)

    def exec_module(self, module) -> None:
        module.__file__ = "<stub: CUDA-only extension, no driver on this machine>"


class _Loaded(importlib.abc.Loader):
    """Hands over a module already loaded (the real extension), so it is not loaded twice."""

    def __init__(self, module: types.ModuleType):
        self.module = module

    def create_module(self, spec):
        return self.module

    def exec_module(self, module) -> None:
        return None


class _CudaOnlyFinder(importlib.abc.MetaPathFinder):
    """Tries the real extension; stands an empty module in only when the driver (libcuda) is what is missing."""

    def find_spec(self, name, path=None, target=None):
        if name not in CUDA_ONLY:
            return None
        real = importlib.machinery.PathFinder.find_spec(name, path)
        if real is None:
            if name in ABSENT_BY_DESIGN:
                return None
            _record(name, "file absent")
            return importlib.machinery.ModuleSpec(name, _StubLoader())
        try:
            module = importlib.util.module_from_spec(real)
            real.loader.exec_module(module)  # type: ignore[union-attr]
        except ImportError as exc:
            if "libcuda.so" not in str(exc) and "libnvidia" not in str(exc):
                raise
            _record(name, f"real file found, load failed: {str(exc).splitlines()[0][:160]}")
            return importlib.machinery.ModuleSpec(name, _StubLoader())
        return importlib.machinery.ModuleSpec(name, _Loaded(module), origin=real.origin)


import importlib.util  # noqa: E402

sys.meta_path.insert(0, _CudaOnlyFinder())
