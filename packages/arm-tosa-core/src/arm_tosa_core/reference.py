"""Run a lowered program on the host: delegated parts on the TOSA reference model, the rest in PyTorch.

`run_on_reference_model` accepts what a user has at hand (an EdgeProgramManager from
`to_edge_transform_and_lower`, an ExportedProgram, an ExecutorchProgramManager, or a .pte as bytes or
path) and returns what the eager module would return. Target packages register how to find the TOSA
graph in their payloads with `register_payload_decoder`, or, when a payload holds no TOSA graph,
say what runs it instead with `register_opaque_payload`. `run_program` is the same walk with any
delegate runner (a target package's device runner, for example). A .pte always runs through
`executorch.runtime` with runtime_cpp's backends (see `pte_runtime`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from executorch.exir.lowered_backend_module import executorch_call_delegate
from torch.export import ExportedProgram
from torch.utils import _pytree as pytree

from . import layout
from .errors import MissingToolError, ReferenceModelError

# backend id -> function(processed_bytes, compile_specs) -> TOSA flatbuffer
PayloadDecoder = Callable[[bytes, list], bytes]
_DECODERS: dict[str, PayloadDecoder] = {"TOSABackend": lambda data, specs: data}
# backend id -> what to use instead, for payloads from which no TOSA graph can be recovered
_OPAQUE: dict[str, str] = {}

DelegateRunner = Callable[[str, bytes, list, list[torch.Tensor]], list[torch.Tensor]]
"""(backend_id, processed_bytes, compile_specs, input tensors) -> output tensors."""


def register_payload_decoder(backend_id: str, decoder: PayloadDecoder) -> None:
    """Teach the reference runner where the TOSA graph sits in `backend_id`'s delegate payload."""
    _DECODERS[backend_id] = decoder


def register_opaque_payload(backend_id: str, how_to_run: str) -> None:
    """Declare that `backend_id`'s payloads hold no TOSA graph; `how_to_run` names the alternative.

    `run_on_reference_model` then fails on such delegates with that advice instead of a generic
    "no decoder registered" message.
    """
    _OPAQUE[backend_id] = how_to_run


def _reference_model():
    try:
        import tosa_reference_model
    except ImportError as exc:
        raise MissingToolError("tosa-tools is not installed, so the TOSA reference model cannot run: "
                               "`uv pip install tosa-tools==2026.8.0`") from exc
    return tosa_reference_model


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.int64:  # crosses the boundary as INT32
        if t.numel() and (t.max() > torch.iinfo(torch.int32).max or t.min() < torch.iinfo(torch.int32).min):
            raise ReferenceModelError("an int64 input does not fit in int32, which TOSA uses for it")
        t = t.to(torch.int32)
    if t.dtype == torch.bfloat16:
        raise ReferenceModelError("bfloat16 inputs are not supported by the reference runner")
    return t.numpy()


def run_tosa(flatbuffer: bytes, inputs: Sequence[torch.Tensor],
             out_dtypes: Sequence[torch.dtype] | None = None) -> list[torch.Tensor]:
    """Run one TOSA flatbuffer on the reference model; cast outputs back to `out_dtypes`."""
    trm = _reference_model()
    outputs, status = trm.run(flatbuffer, [_to_numpy(x) for x in inputs])
    if status != trm.GraphStatus.TOSA_VALID:
        raise ReferenceModelError(f"the TOSA reference model returned {status.name}: the graph is invalid "
                                  "or unpredictable for these inputs (a lowering bug; please report it)")
    tensors = [torch.from_numpy(np.array(o)) for o in outputs]
    if out_dtypes is not None:
        tensors = [t.to(d) for t, d in zip(tensors, out_dtypes, strict=True)]
    return tensors


def run_delegate(backend_id: str, processed: bytes, compile_specs: list, inputs: Sequence[torch.Tensor],
                 out_dtypes: Sequence[torch.dtype] | None = None) -> list[torch.Tensor]:
    """Execute one delegate call of any registered backend on the reference model."""
    decoder = _DECODERS.get(backend_id)
    if decoder is None and backend_id in _OPAQUE:
        raise ReferenceModelError(
            f"delegate {backend_id!r} holds a compiled payload with no TOSA graph in it, so the TOSA "
            f"reference model cannot run it: {_OPAQUE[backend_id]}")
    if decoder is None:
        raise ReferenceModelError(
            f"no TOSA graph is known for delegate {backend_id!r}; registered: {sorted(_DECODERS)}. "
            "Import the target package (e.g. arm_ethosu) so it registers its payload decoder.")
    return run_tosa(decoder(bytes(processed), list(compile_specs)), inputs, out_dtypes)


def _physical(x: Any, perm: tuple[int, ...]) -> Any:
    """Tensor `x` permuted by `perm` (a layout change; nothing for the identity or a non-tensor)."""
    if not isinstance(x, torch.Tensor) or layout.is_identity(perm) or len(perm) != x.dim():
        return x
    return x.permute(*perm).contiguous()


class _DelegatingInterpreter(torch.fx.Interpreter):
    """Runs an exported program's graph module, sending each delegate call to `delegate_runner`."""

    def __init__(self, gm: torch.fx.GraphModule, delegate_runner: DelegateRunner) -> None:
        super().__init__(gm)
        self.delegate_runner = delegate_runner

    def run_node(self, n):
        self._node = n
        return super().run_node(n)

    def call_function(self, target, args, kwargs):
        if target is executorch_call_delegate:
            lowered, *inputs = args
            metas = self._node.meta.get("val")
            metas = metas if isinstance(metas, (tuple, list)) else [metas]
            # The delegate reads and writes each tensor as its bytes lie in the program's memory plan (its
            # dim order, e.g. NHWC for channels-last), as on the ExecuTorch runtime.
            in_metas = [a.meta.get("val") if isinstance(a, torch.fx.Node) else None for a in self._node.args[1:]]
            inputs = [_physical(x, layout.memory_layout(m)) for x, m in zip(inputs, in_metas, strict=True)]
            outs = self.delegate_runner(lowered.backend_id, bytes(lowered.processed_bytes),
                                        list(lowered.compile_specs), list(inputs))
            if metas and metas[0] is not None:  # e.g. int64 results computed as INT32
                outs = [_physical(o.to(m.dtype), layout.inverse(layout.memory_layout(m)))
                        for o, m in zip(outs, metas, strict=True)]
            return tuple(outs)
        return super().call_function(target, args, kwargs)


def _run_exported(ep: ExportedProgram, inputs: Sequence[Any], delegate_runner: DelegateRunner) -> Any:
    gm = ep.module()
    flat, _ = pytree.tree_flatten((tuple(inputs), {}))
    out = _DelegatingInterpreter(gm, delegate_runner).run(*flat)
    return pytree.tree_unflatten(pytree.tree_leaves(out), ep.call_spec.out_spec)


def run_on_reference_model(lowered_program_or_pte: Any, *inputs: Any) -> Any:
    """Run a lowered program with its delegated parts on the TOSA reference model.

    Returns what the eager module returns (a tensor or the same nested structure). Accepts an
    EdgeProgramManager, an ExportedProgram, an ExecutorchProgramManager, or a .pte (bytes or path).
    """
    return run_program(lowered_program_or_pte, inputs, run_delegate)


def run_program(lowered_program_or_pte: Any, inputs: Sequence[Any],
                delegate_runner: DelegateRunner | None,
                caller: str = "run_on_reference_model") -> Any:
    """Run a lowered program on the host. Accepts and returns what `run_on_reference_model` does;
    `caller` names the public function in error messages.

    An in-memory program (EdgeProgramManager, ExportedProgram) is walked in PyTorch with each
    delegate call sent to `delegate_runner` (None: `run_delegate`, the TOSA reference model). A .pte
    (bytes, path, ExecutorchProgramManager) always runs through `executorch.runtime`, its delegates
    on the backends runtime_cpp registers there (TOSABackend, EthosUBackend, VgfBackend), so it takes
    no custom runner: pass None or `run_delegate`.

    Raises:
        ValueError: a .pte with a custom `delegate_runner` (pass the lowered program instead).
        ReferenceModelError: the runtime has no backend for one of the .pte's delegates, or failed.
    """
    program = lowered_program_or_pte
    if isinstance(program, (str, os.PathLike)):
        path = Path(program)
        if not path.is_file():
            raise FileNotFoundError(f"no .pte file at {path}")
        program = path.read_bytes()
    if hasattr(program, "buffer") and not hasattr(program, "exported_program"):
        program = program.buffer  # ExecutorchProgramManager
    if isinstance(program, (bytes, bytearray, memoryview)):
        if delegate_runner not in (None, run_delegate):
            raise ValueError(
                f"{caller}: a .pte runs through executorch.runtime, whose registered backends execute "
                "its delegates, so a custom delegate runner cannot be applied to it: pass the lowered "
                "program (the EdgeProgramManager or ExportedProgram before to_executorch) instead")
        from .pte_runtime import run_pte_on_runtime

        # The one execution path for .pte files: the pip ExecuTorch runtime with runtime_cpp's backends.
        outs = run_pte_on_runtime(bytes(program), list(inputs))
        return outs[0] if len(outs) == 1 else tuple(outs)
    if hasattr(program, "exported_program"):
        program = program.exported_program()
    if not isinstance(program, ExportedProgram):
        raise TypeError(f"{caller} takes an EdgeProgramManager, ExportedProgram, "
                        f"ExecutorchProgramManager or .pte bytes/path, not {type(program).__name__}")
    return _run_exported(program, inputs, delegate_runner or run_delegate)
