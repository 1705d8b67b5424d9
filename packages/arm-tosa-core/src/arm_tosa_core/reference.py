"""Run a lowered program on the host: delegated parts on the TOSA reference model, the rest in PyTorch.

`run_on_reference_model` accepts what a user has at hand (an EdgeProgramManager from
`to_edge_transform_and_lower`, an ExportedProgram, an ExecutorchProgramManager, or a .pte as bytes or
path) and returns what the eager module would return. Target packages register how to find the TOSA
graph in their payloads with `register_payload_decoder`.
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

from .errors import MissingToolError, ReferenceModelError

# backend id -> function(processed_bytes, compile_specs) -> TOSA flatbuffer
PayloadDecoder = Callable[[bytes, list], bytes]
_DECODERS: dict[str, PayloadDecoder] = {"TOSABackend": lambda data, specs: data}


def register_payload_decoder(backend_id: str, decoder: PayloadDecoder) -> None:
    """Teach the reference runner where the TOSA graph sits in `backend_id`'s delegate payload."""
    _DECODERS[backend_id] = decoder


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
    if decoder is None:
        raise ReferenceModelError(
            f"no TOSA graph is known for delegate {backend_id!r}; registered: {sorted(_DECODERS)}. "
            "Import the target package (e.g. arm_ethosu) so it registers its payload decoder.")
    return run_tosa(decoder(bytes(processed), list(compile_specs)), inputs, out_dtypes)


class _DelegatingInterpreter(torch.fx.Interpreter):
    def run_node(self, n):
        self._node = n
        return super().run_node(n)

    def call_function(self, target, args, kwargs):
        if target is executorch_call_delegate:
            lowered, *inputs = args
            metas = self._node.meta.get("val")
            metas = metas if isinstance(metas, (tuple, list)) else [metas]
            outs = run_delegate(lowered.backend_id, lowered.processed_bytes, lowered.compile_specs, inputs,
                                [m.dtype for m in metas] if metas and metas[0] is not None else None)
            return tuple(outs)
        return super().call_function(target, args, kwargs)


def _run_exported(ep: ExportedProgram, inputs: Sequence[Any]) -> Any:
    gm = ep.module()
    flat, _ = pytree.tree_flatten((tuple(inputs), {}))
    out = _DelegatingInterpreter(gm).run(*flat)
    return pytree.tree_unflatten(pytree.tree_leaves(out), ep.call_spec.out_spec)


def run_on_reference_model(lowered_program_or_pte: Any, *inputs: Any) -> Any:
    """Run a lowered program with its delegated parts on the TOSA reference model.

    Returns what the eager module returns (a tensor or the same nested structure). Accepts an
    EdgeProgramManager, an ExportedProgram, an ExecutorchProgramManager, or a .pte (bytes or path).
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
        from .pte_interpreter import run_pte

        outs = run_pte(bytes(program), list(inputs), run_delegate)
        return outs[0] if len(outs) == 1 else tuple(outs)
    if hasattr(program, "exported_program"):
        program = program.exported_program()
    if not isinstance(program, ExportedProgram):
        raise TypeError("run_on_reference_model takes an EdgeProgramManager, ExportedProgram, "
                        f"ExecutorchProgramManager or .pte bytes/path, not {type(program).__name__}")
    return _run_exported(program, inputs)
