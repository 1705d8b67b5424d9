"""Read the delegate payloads out of an ExecuTorch ``.pte`` program.

The file is read with ExecuTorch's own serializer (``deserialize_pte_binary``, which also folds
segment-stored delegate data back into the Program), so a payload is found wherever the .pte
keeps it (inline or in a segment). Reports and extractors use this; running a .pte is
``executorch.runtime``'s job (see ``pte_runtime``).

    for d in list_delegates("model.pte"):
        print(d.backend_id, len(d.processed))
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from executorch.exir import schema
from executorch.exir._serialize._program import PTEFile, deserialize_pte_binary


class CompileSpecLike(Protocol):
    """A delegate compile spec: a key and its raw value (ExecuTorch's ``CompileSpec`` fits)."""

    key: str
    value: bytes


@dataclass(frozen=True)
class DelegateInfo:
    """One entry of a method's delegate table.

    Attributes:
        backend_id: the backend that lowered it (the BackendDetails class name).
        processed: the bytes its preprocess() returned, wherever the .pte stores them.
        compile_specs: the compile specs it was lowered with.
        index: its position in the method's delegate table (DelegateCall.delegate_index).
    """

    backend_id: str
    processed: bytes
    compile_specs: list[CompileSpecLike]
    index: int


_FILE_IDENTIFIER = re.compile(rb"ET[0-9]{2}")


def _load(pte: bytes | str | os.PathLike) -> PTEFile:
    """Reads and deserializes a .pte, with segments folded back into the Program."""
    if isinstance(pte, (bytes, bytearray, memoryview)):
        data = bytes(pte)
        where = "the given bytes"
    elif isinstance(pte, (str, os.PathLike)):
        data = Path(pte).read_bytes()
        where = str(pte)
    else:
        raise TypeError(f"pte must be bytes or a path, got {type(pte).__name__}")
    # A .pte is a flatbuffer whose file identifier ("ET" + schema version) sits at bytes 4..8.
    if len(data) < 8 or not _FILE_IDENTIFIER.fullmatch(data[4:8]):
        raise ValueError(
            f"{where} is not an ExecuTorch .pte program (no 'ETxx' file identifier at bytes 4..8); "
            "pass the bytes of ExecutorchProgramManager.buffer or the path of a .pte file"
        )
    try:
        return _deserialize(data)
    except Exception as err:  # the flatbuffer reader raises assorted errors on corrupt input
        raise ValueError(f"{where} looks like a .pte but could not be read: {err}") from err


@functools.lru_cache(maxsize=8)
def _deserialize(data: bytes) -> PTEFile:
    # Parsing is pure Python and each host run asks for the delegates again (to check that their
    # backends are registered); nothing here mutates the parsed program.
    return deserialize_pte_binary(data)


def _processed(program: schema.Program, delegate: schema.BackendDelegate) -> bytes:
    ref = delegate.processed
    # deserialize_pte_binary has already moved segment-stored blobs inline.
    if ref.location != schema.DataLocation.INLINE or ref.index >= len(
        program.backend_delegate_data
    ):
        raise ValueError(
            f"malformed .pte: delegate '{delegate.id}' data reference {ref} cannot be resolved"
        )
    return bytes(program.backend_delegate_data[ref.index].data)


def list_delegates(pte: bytes | str | os.PathLike) -> list[DelegateInfo]:
    """The delegates of every method of a .pte, in method order then delegate-table order.

    Raises:
        ValueError: `pte` is not a .pte program, or one that cannot be read.
    """
    program = _load(pte).program
    return [
        DelegateInfo(d.id, _processed(program, d), list(d.compile_specs), i)
        for plan in program.execution_plan
        for i, d in enumerate(plan.delegates)
    ]


def input_dim_orders(pte: bytes | str | os.PathLike, method: str = "forward") -> list[tuple[int, ...] | None]:
    """The dim order each input of `method` is planned with (None for a non-tensor input): the memory
    layout the runtime reads the input's bytes in, e.g. (0, 2, 3, 1) for a channels-last image.

    Raises:
        ValueError: `pte` is not a .pte program, or has no method `method`.
    """
    program = _load(pte).program
    plans = {plan.name: plan for plan in program.execution_plan}
    if method not in plans:
        raise ValueError(f"the .pte has no method {method!r}; it has {sorted(plans)}")
    plan = plans[method]
    values = [plan.values[i].val for i in plan.inputs]
    return [tuple(v.dim_order) if isinstance(v, schema.Tensor) else None for v in values]
