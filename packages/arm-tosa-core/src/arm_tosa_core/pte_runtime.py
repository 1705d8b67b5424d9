"""Run a .pte through the pip ExecuTorch runtime (`executorch.runtime`) with our C++ backends.

`runtime_cpp` registers TOSABackend and EthosUBackend (and, where built, VgfBackend) into the
registry of the wheel's `libexecutorch.so`; this module loads the program, checks that every delegate
it names has a registered backend, and executes one method. The CPU part runs on the wheel's own
kernels (portable/optimized, plus the quantized ones `executorch.kernels.quantized` registers, which
our INT programs use at their float boundary).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import torch

from . import layout
from .errors import MissingToolError, ReferenceModelError

RUNTIME_INSTALL_HINT = ('pip install "arm-ethosu[runtime]" (or "arm-tosa-core[runtime]", '
                        '"arm-vgf[runtime]"; it builds the C++ runtime, so it needs CMake and a C++ compiler), '
                        "or `uv sync` in the workspace root, which installs it")


def _runtime():
    try:
        import runtime_cpp
    except ImportError as exc:  # an optional extra: compiling works without it
        raise MissingToolError("runtime-cpp (the C++ backends of the ExecuTorch runtime) is not installed, "
                               f"so .pte files cannot run on the host. For host execution: {RUNTIME_INSTALL_HINT}"
                               ) from exc
    from executorch.runtime import Runtime

    return runtime_cpp, Runtime.get()


def _missing_backends(pte: bytes, runtime_cpp) -> list[str]:
    from .pte_delegates import list_delegates

    registered = set(runtime_cpp.registered_backend_ids())
    return sorted({d.backend_id for d in list_delegates(pte)} - registered)


def pte_backends_registered(pte: bytes) -> bool:
    """True when every delegate of `pte` has a backend registered in the pip runtime."""
    runtime_cpp, _ = _runtime()
    return not _missing_backends(pte, runtime_cpp)


def _in_planned_layout(pte: bytes, method: str, inputs: Sequence[torch.Tensor]) -> list:
    """`inputs` dense in the memory layout the program plans for each (the runtime reads their bytes as
    they lie). Where the program plans the usual contiguous layout, any tensor is made contiguous (as
    before channels-last I/O existed); where it plans another (exported with a channels-last image), a
    tensor in another layout raises ValueError stating both, rather than being misread."""
    from .pte_delegates import input_dim_orders

    out = []
    for i, (x, order) in enumerate(zip(inputs, input_dim_orders(pte, method), strict=False)):
        if not isinstance(x, torch.Tensor) or order is None or len(order) != x.dim():
            out.append(x)
            continue
        planned, given = layout.planned_layout(x.shape, order), layout.memory_layout(x)
        if not layout.only_unit_dims_move(x.shape, planned, given) and not layout.is_identity(planned):
            raise ValueError(
                f"input {i} of method {method!r} is {_layout_name(planned)} (dim order {planned}) in this "
                f"program, but the tensor given is {_layout_name(given)} (dim order {given}): pass it as "
                f"{_conversion(planned)}, the layout the program was exported with")
        out.append(x.permute(*planned).contiguous().permute(*layout.inverse(planned)))
    return out + list(inputs[len(out):])


def _conversion(perm: tuple[int, ...]) -> str:
    if layout.is_identity(perm):
        return "x.contiguous()"
    if perm == layout.NCHW_TO_NHWC:
        return "x.to(memory_format=torch.channels_last)"
    return f"x.permute{perm}.contiguous().permute{layout.inverse(perm)}"


def _layout_name(perm: tuple[int, ...]) -> str:
    if layout.is_identity(perm):
        return "contiguous"
    return "channels-last" if perm == layout.NCHW_TO_NHWC else "permuted"


def run_pte_on_runtime(pte: bytes | str | os.PathLike, inputs: Sequence[torch.Tensor],
                       method: str = "forward") -> list[torch.Tensor]:
    """Execute `method` of a .pte on the pip runtime; return its outputs.

    Raises:
        ReferenceModelError: a delegate's backend is not registered (says which, and how to get it),
            or the runtime refused to load or execute the method (its log line, on stderr, says why).
    """
    data = Path(pte).read_bytes() if isinstance(pte, (str, os.PathLike)) else bytes(pte)
    runtime_cpp, runtime = _runtime()
    missing = _missing_backends(data, runtime_cpp)
    if missing:
        status = "; ".join(str(s) for s in runtime_cpp.backends())
        raise ReferenceModelError(f"the .pte delegates to {missing}, which no backend in the pip "
                                  f"runtime handles. runtime_cpp: {status}")
    program = runtime.load_program(data)
    try:
        loaded = program.load_method(method)
    except RuntimeError as exc:
        raise ReferenceModelError(
            f"the ExecuTorch runtime could not load method {method!r}: {exc}. The runtime's log line "
            "above names the cause (a missing CPU kernel, or a delegate payload the backend refused; "
            "for an Ethos-U .pte compiled without its host graph, recompile with arm-compile --host-graph "
            "or EthosUCompileSpec(...).include_host_graph())") from exc
    try:
        outputs = loaded.execute(_in_planned_layout(data, method, inputs))
    except RuntimeError as exc:
        raise ReferenceModelError(f"the ExecuTorch runtime failed executing {method!r}: {exc} (see "
                                  "the log line above)") from exc
    return [o.clone() if isinstance(o, torch.Tensor) else o for o in outputs]
