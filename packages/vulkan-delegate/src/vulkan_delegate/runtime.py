"""Load the C++ runtime into this process and run programs with it.

The runtime registers "VkComputeBackend" into the pip `executorch` runtime (both link the same
libexecutorch.so). Where it comes from, first found: VULKAN_DELEGATE_LIB (a built library); the
runtime-cpp package's module `_backend_vulkan_delegate.so` (built by `uv sync` when the Vulkan
headers and glslc are present); else packages/runtime-cpp/src/vulkan_delegate built here with CMake
on first use (glslc compiles the shaders then).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

SOURCE = Path(__file__).resolve().parents[3] / "runtime-cpp" / "src" / "vulkan_delegate"
BUILD = Path(os.environ.get("VULKAN_DELEGATE_BUILD", SOURCE.parents[1] / "build" / "vulkan_delegate"))
LIB_NAME = "libvulkan_delegate_runtime.so"
INSTALL_HINT = ("apt-get install --no-install-recommends mesa-vulkan-drivers libvulkan1 libvulkan-dev "
                "glslc cmake g++")

_lib: ctypes.CDLL | None = None


class VulkanRuntimeError(RuntimeError):
    """The Vulkan runtime cannot be built or has no device; the message says what to install."""


def build_runtime(force: bool = False) -> Path:
    """Configure and build the runtime library (a no-op when it is up to date)."""
    missing = [t for t in ("cmake", "glslc", "c++") if shutil.which(t) is None]
    if missing:
        raise VulkanRuntimeError(f"building the Vulkan runtime needs {missing}; install: {INSTALL_HINT}")
    import executorch

    et_dir = Path(list(executorch.__path__)[0])
    BUILD.mkdir(parents=True, exist_ok=True)
    cfg = ["cmake", "-S", str(SOURCE), "-B", str(BUILD), "-DCMAKE_BUILD_TYPE=Release",
           f"-DEXECUTORCH_ROOT={et_dir}", f"-DPython3_EXECUTABLE={sys.executable}"]
    for cmd in (cfg, ["cmake", "--build", str(BUILD), "-j2"]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            raise VulkanRuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return BUILD / LIB_NAME


def load_runtime() -> ctypes.CDLL:
    """Load (building if needed) the runtime library; registers the backend into executorch."""
    global _lib
    if _lib is not None:
        return _lib
    import executorch.runtime  # noqa: F401  (libexecutorch.so first, so ours binds to the same one)

    path = os.environ.get("VULKAN_DELEGATE_LIB")
    lib = None if path else _runtime_cpp_module()
    if lib is None:
        lib = ctypes.CDLL(str(Path(path) if path else build_runtime()), mode=ctypes.RTLD_GLOBAL)
        if lib.runtime_cpp_register_vulkan_delegate() != 0:
            raise VulkanRuntimeError("registering VkComputeBackend failed (another library holds the id)")
    _lib = lib
    _lib.vkdg_shader_count.restype = ctypes.c_int
    _lib.vkdg_shader_name.restype = ctypes.c_char_p
    _lib.vkdg_shader_name.argtypes = [ctypes.c_int]
    _lib.vkdg_device_name.restype = ctypes.c_char_p
    return _lib


def _runtime_cpp_module() -> ctypes.CDLL | None:
    """runtime-cpp's registered vulkan_delegate module, or None when runtime-cpp lacks it."""
    try:
        import runtime_cpp
        from runtime_cpp._registry import module_handle
    except ImportError:
        return None
    ok = any(b.name == "vulkan_delegate" and b.registered for b in runtime_cpp.backends())
    return module_handle("vulkan_delegate") if ok else None


def runtime_shader_names() -> set[str]:
    """The shaders compiled into the runtime (its dispatch table)."""
    lib = load_runtime()
    return {lib.vkdg_shader_name(i).decode() for i in range(lib.vkdg_shader_count())}


def device_name() -> str:
    """Name of the Vulkan device the runtime picks; raises VulkanRuntimeError with the fix if none."""
    name = load_runtime().vkdg_device_name().decode()
    if name.startswith("error:"):
        raise VulkanRuntimeError(f"{name[6:].strip()}. For a CPU Vulkan device (lavapipe) install: {INSTALL_HINT}")
    return name


def _pte_bytes(program: Any) -> bytes:
    if isinstance(program, bytes | bytearray):
        return bytes(program)
    if isinstance(program, str | os.PathLike):
        return Path(program).read_bytes()
    if hasattr(program, "to_executorch"):
        program = program.to_executorch()
    if hasattr(program, "buffer"):
        return bytes(program.buffer)
    raise TypeError(f"run_on_vulkan takes an EdgeProgramManager, ExecutorchProgramManager, .pte bytes or "
                    f"path, not {type(program).__name__}")


def run_on_vulkan(lowered_program_or_pte: Any, *inputs: torch.Tensor) -> Any:
    """Run a lowered program through `executorch.runtime`, its Vulkan partitions on the GPU.

    Returns one tensor for a single-output program, else a tuple.
    """
    device_name()
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(_pte_bytes(lowered_program_or_pte))
    outputs = program.load_method("forward").execute(list(inputs))
    return outputs[0] if len(outputs) == 1 else tuple(outputs)
