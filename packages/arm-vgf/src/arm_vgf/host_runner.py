"""run_vgf_on_vulkan: run a lowered program with its VGF delegates on a Vulkan device.

A .pte (bytes, path or ExecutorchProgramManager) runs through the pip ExecuTorch runtime
(`executorch.runtime`) with runtime_cpp's backends: VgfBackend builds each VGF's data-graph
pipeline on a Vulkan device (lavapipe on CPU machines, through the ML SDK emulation layers that
this module puts on the loader's path while the program loads), the CPU part runs on the runtime's
kernels. An in-memory lowered program (EdgeProgramManager / ExportedProgram) has no serialized form
for the runtime: the core's walk (`arm_tosa_core.reference.run_program`) runs it in PyTorch and
sends each VGF delegate to the ML SDK scenario runner (`vulkan_runner`), other TOSA-based
delegates to the TOSA reference model.

The TOSA boundary of a partition is in PyTorch's layout and order, and the model converter keeps
it: a VGF's inputs and outputs have the torch shapes, so tensors pass through unpermuted.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from arm_tosa_core import TosaCompileSpec
from arm_tosa_core.reference import run_delegate, run_program

from .backend import BACKEND_ID
from .compile_spec import type_narrowing
from .environment import layer_environment, require_ml_device
from .vgf_file import VgfTensor
from .vulkan_runner import prepare_vgf


class VgfInputError(ValueError):
    """A delegate input does not fit the VGF's input tensor."""


def _to_numpy(x: Any, t: VgfTensor) -> np.ndarray:
    x = torch.as_tensor(x).detach().cpu()
    want = t.numpy_dtype()
    if x.dtype == torch.int64 and want == np.int32:  # TOSA carries int64 values as INT32
        info = torch.iinfo(torch.int32)
        if x.numel() and (x.max() > info.max or x.min() < info.min):
            raise VgfInputError(f"VGF input {t.name}: int64 values outside the int32 range, which "
                                "the TOSA boundary uses for int64")
        x = x.to(torch.int32)
    if x.dtype == torch.bfloat16:  # numpy has no bfloat16: go through the raw bits
        arr = x.contiguous().view(torch.int16).numpy().view(want)
    else:
        arr = x.contiguous().numpy()
    if arr.dtype != want and arr.dtype.kind == "f" and want.kind == "f":
        arr = arr.astype(want)  # a VGF converted with --type-narrowing takes fp16 inputs
    if arr.dtype != want:
        raise VgfInputError(f"VGF input {t.name} is {want}, the program passes {x.dtype}: the "
                            "delegate was compiled for other dtypes than it is called with")
    if tuple(arr.shape) != t.shape:
        if arr.size != int(np.prod(t.shape, dtype=np.int64)):
            raise VgfInputError(f"VGF input {t.name} has shape {list(t.shape)}, the program "
                                f"passes {list(arr.shape)}")
        arr = arr.reshape(t.shape)  # e.g. a rank-0 tensor the converter stores as [1]
    return arr


def _to_torch(arr: np.ndarray) -> torch.Tensor:
    if arr.dtype.name == "bfloat16":
        return torch.from_numpy(arr.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.array(arr, copy=True))


def run_vgf_delegate(backend_id: str, processed: bytes, compile_specs: list,
                     inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Delegate runner: VGF payloads on the Vulkan device, other delegates on the reference model."""
    if backend_id != BACKEND_ID:
        return run_delegate(backend_id, processed, compile_specs, inputs)
    runner = prepare_vgf(bytes(processed))
    expected = runner.model.inputs
    if len(inputs) != len(expected):
        raise VgfInputError(f"the VGF delegate takes {len(expected)} inputs, the program passes "
                            f"{len(inputs)}")
    arrays = [_to_numpy(x, t) for x, t in zip(inputs, expected, strict=True)]
    outs = [_to_torch(o) for o in runner.run(arrays)]
    settings = _settings(compile_specs)
    if type_narrowing(settings.get("compiler_flags") or []):
        # The narrowing pass rewrites fp32 graphs only, so fp16 results stand for fp32 ones.
        outs = [o.float() if o.dtype == torch.float16 else o for o in outs]
    return outs


def _settings(compile_specs: list) -> dict:
    try:
        return TosaCompileSpec.settings_from_list(compile_specs)
    except ValueError:
        return {}


def run_vgf_on_vulkan(lowered_program_or_pte: Any, *inputs: Any) -> Any:
    """Run a lowered program with its VGF delegates on a Vulkan device, the rest in PyTorch.

    Same calling convention and return value as `arm_tosa_core.run_on_reference_model`: accepts an
    EdgeProgramManager, an ExportedProgram, an ExecutorchProgramManager, or a .pte (bytes or path),
    and returns what the eager module returns. A .pte runs through `executorch.runtime` with
    runtime_cpp's VgfBackend. Needs the Vulkan environment (`validate_environment()` says what is
    missing and how to install it).
    """
    require_ml_device()  # a clear error (with the fix) before any Vulkan object is made
    if _is_pte(lowered_program_or_pte):
        # VgfBackend creates its Vulkan instance while the method loads: the loader must see the
        # emulation layers (each manifest in its own folder, Graph first) at that moment.
        with layer_environment():
            return run_program(lowered_program_or_pte, inputs, None, caller="run_vgf_on_vulkan")
    return run_program(lowered_program_or_pte, inputs, run_vgf_delegate, caller="run_vgf_on_vulkan")


def _is_pte(program: Any) -> bool:
    """A serialized program: .pte bytes, a path to one, or an ExecutorchProgramManager."""
    if isinstance(program, (bytes, bytearray, memoryview, str, os.PathLike)):
        return True
    return hasattr(program, "buffer") and not hasattr(program, "exported_program")
