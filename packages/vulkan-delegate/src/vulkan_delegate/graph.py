"""The compute graph a delegated partition lowers to: tensors, dispatches, constants, arena plan.

Sizes are *dims*: a Python int, or a sympy polynomial in the program's dynamic symbols (batch,
sequence length). The runtime evaluates them per call, so one payload runs at every size up to the
bounds given at export; the arena is planned at those bounds.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy
import torch

Dim = Any  # int | sympy.Expr

F32, F16, U8, I32 = 0, 1, 2, 3  # device dtypes; bool and int64 tensors are computed as I32 (0/1, narrowed)
DTYPE_BYTES = {F32: 4, F16: 2, U8: 1, I32: 4}
VARIANT = {F32: "f32", F16: "f16", I32: "i32"}  # the shader variant that reads/writes a dtype
# The dtype of a delegate input or output in ExecuTorch: the runtime converts to and from the device
# dtype at upload and readback (bool bytes <-> int32 words, int64 <-> int32, range-checked).
HOST_F32, HOST_F16, HOST_BOOL, HOST_I32, HOST_I64 = 0, 1, 2, 3, 4
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
ARENA_ALIGN = 256  # >= minStorageBufferOffsetAlignment of every driver we know (NVIDIA 16..64, lavapipe 16)

KIND_ARENA, KIND_CONST = 0, 1


class LoweringError(ValueError):
    """A node cannot be lowered (raised only for nodes the support rules should have refused)."""


def numel(shape: list[Dim]) -> Dim:
    n: Dim = 1
    for d in shape:
        n = n * d
    return n


def contiguous_strides(shape: list[Dim]) -> list[Dim]:
    strides: list[Dim] = []
    acc: Dim = 1
    for d in reversed(shape):
        strides.append(acc)
        acc = acc * d
    return strides[::-1]


@dataclass
class Storage:
    """A region of device memory: an arena slot (planned) or a slice of the constant blob."""

    kind: int
    nbytes_max: int
    offset: int = -1
    first_use: int = -1
    last_use: int = -1
    pinned: bool = False  # graph inputs and outputs live for the whole call


@dataclass
class Tensor:
    id: int
    dtype: int
    shape: list[Dim]
    storage: Storage

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass
class Dispatch:
    shader: str
    bindings: list[Tensor]
    push: list[Dim | float]  # ints (dims) and floats, in shader order
    threads: tuple[Dim, Dim, Dim]
    name: str = ""  # the PyTorch module and op it came from (the per-dispatch profile's label)


@dataclass
class Graph:
    """What `preprocess` builds; `payload.serialize` writes it."""

    compute_dtype: int = F32
    tensors: list[Tensor] = field(default_factory=list)
    dispatches: list[Dispatch] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)  # tensor id per delegate input (-1: not a tensor)
    outputs: list[int] = field(default_factory=list)
    input_hosts: list[int] = field(default_factory=list)  # HOST_* per input (HOST_F32 for a non-tensor)
    output_hosts: list[int] = field(default_factory=list)
    symbols: list[tuple[sympy.Symbol, int, int, int]] = field(default_factory=list)  # sym, input, dim, max
    constants: bytearray = field(default_factory=bytearray)
    _const_index: dict[bytes, Storage] = field(default_factory=dict)
    arena_bytes: int = 0
    source: str = ""  # name given to the dispatches appended now (the fx node being lowered)

    # ------------------------------------------------------------------ tensors
    def max_value(self, d: Dim) -> int:
        if isinstance(d, int):
            return d
        return int(sympy.sympify(d).subs({s: m for s, _, _, m in self.symbols}))

    def new_tensor(self, shape: list[Dim], dtype: int | None = None) -> Tensor:
        dtype = self.compute_dtype if dtype is None else dtype
        nbytes = self.max_value(numel(shape)) * DTYPE_BYTES[dtype]
        nbytes = max(-(-nbytes // 4) * 4, 4)  # whole 32-bit words: shaders read u8 tensors by the word
        t = Tensor(len(self.tensors), dtype, list(shape), Storage(KIND_ARENA, nbytes))
        self.tensors.append(t)
        return t

    def alias(self, t: Tensor, shape: list[Dim]) -> Tensor:
        """A contiguous view: same storage, new shape (view/reshape/squeeze cost nothing)."""
        a = Tensor(len(self.tensors), t.dtype, list(shape), t.storage)
        self.tensors.append(a)
        return a

    def constant(self, value: torch.Tensor | np.ndarray, dtype: int | None = None) -> Tensor:
        """A constant tensor; identical bytes are stored once in the payload."""
        dtype = self.compute_dtype if dtype is None else dtype
        arr = value.detach().cpu().contiguous().numpy() if isinstance(value, torch.Tensor) else value
        if dtype == I32 and arr.size and (arr.min() < INT32_MIN or arr.max() > INT32_MAX):
            raise LoweringError(f"an integer constant holds values in [{arr.min()}, {arr.max()}], outside int32 "
                                "(the delegate computes integer tensors as int32)")
        np_dtype = {F32: np.float32, F16: np.float16, U8: np.uint8, I32: np.int32}[dtype]
        data = np.ascontiguousarray(arr.astype(np_dtype)).tobytes()
        key = hashlib.sha256(data).digest() + bytes([dtype])
        storage = self._const_index.get(key)
        if storage is None:
            pad = (-len(self.constants)) % ARENA_ALIGN
            self.constants.extend(b"\0" * pad)
            storage = Storage(KIND_CONST, max(len(data), 4), offset=len(self.constants))
            # every declared byte is stored: a 1-element fp16 constant (2 bytes) is bound as 4, and the
            # runtime refuses a tensor reaching past the blob's end
            self.constants.extend(data + b"\0" * (storage.nbytes_max - len(data)))
            self._const_index[key] = storage
        t = Tensor(len(self.tensors), dtype, list(arr.shape), storage)
        self.tensors.append(t)
        return t

    # ------------------------------------------------------------------ dispatches
    def dispatch(self, shader: str, bindings: list[Tensor], push: list, threads: tuple) -> None:
        """Append a dispatch; every shader writes its last binding and only reads the others."""
        threads = tuple(threads) + (1,) * (3 - len(threads))
        self.dispatches.append(Dispatch(shader, list(bindings), list(push), threads, self.source))

    def prune_unread(self) -> None:
        """Drop dispatches whose result no later dispatch reads and that is no graph output (e.g. the
        KV-head copies an attention rule made unnecessary by reading the heads directly)."""
        read: set[int] = set()
        keep: list[Dispatch] = []
        for d in reversed(self.dispatches):
            out = d.bindings[-1].storage
            if out.kind == KIND_ARENA and not out.pinned and id(out) not in read:
                continue
            keep.append(d)
            read.update(id(t.storage) for t in d.bindings[:-1])
        self.dispatches = keep[::-1]

    # ------------------------------------------------------------------ memory plan
    def plan_arena(self) -> None:
        """Greedy best-fit by size: a slot is reused once the last dispatch that reads it is done."""
        storages = {id(t.storage): t.storage for t in self.tensors if t.storage.kind == KIND_ARENA}
        for s in storages.values():
            s.first_use = s.last_use = -1
        for step, d in enumerate(self.dispatches):
            for t in d.bindings:
                s = t.storage
                if s.kind == KIND_ARENA:
                    s.first_use = step if s.first_use < 0 else s.first_use
                    s.last_use = step
        end = len(self.dispatches)
        for s in storages.values():
            if s.pinned or s.first_use < 0:
                s.first_use, s.last_use = 0, end
        placed: list[Storage] = []
        for s in sorted(storages.values(), key=lambda s: -s.nbytes_max):
            size = _align(s.nbytes_max)
            live = sorted((p for p in placed if not (p.last_use < s.first_use or s.last_use < p.first_use)),
                          key=lambda p: p.offset)
            offset = 0
            for p in live:
                if offset + size <= p.offset:
                    break
                offset = max(offset, p.offset + _align(p.nbytes_max))
            s.offset = offset
            placed.append(s)
        self.arena_bytes = max((p.offset + _align(p.nbytes_max) for p in placed), default=0)


def _align(n: int) -> int:
    return (n + ARENA_ALIGN - 1) // ARENA_ALIGN * ARENA_ALIGN
