"""The lowering context: torch values -> TOSA tensors, with layout and constants handled in one place.

A `Value` is what a torch node lowered to. It is either a compile-time constant (a torch tensor, kept
logical until a rule needs it in the graph, so permutes/views of weights fold for free) or a TOSA tensor
stored in layout `perm`. Rules ask for tensors in the layout they need through `ctx.tensor`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.fx import Node

from . import layout
from .builder import DType, Op, T, TosaGraphBuilder, numpy_dtype, tosa_dtype
from .errors import LoweringError
from .specification import TosaSpecification


@dataclass(eq=False)
class Value:
    """A lowered torch value: logical shape/dtype plus either a constant or a TOSA tensor in `perm`."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    tensor: T | None = None
    perm: layout.Perm = ()
    const: torch.Tensor | None = None
    qparams: Any = None  # set by the INT profile: (scale, zero_point, qmin, qmax, dtype)
    _cache: dict = field(default_factory=dict)
    # the tensor in other layouts (perm -> TRANSPOSE/RESHAPE output): shared by every Value that aliases
    # the same TOSA tensor in the same layout (each dequantize of one quantized value), so a value with
    # several consumers is transposed once, not once per consumer
    _layouts: dict = field(default_factory=dict)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_const(self) -> bool:
        return self.const is not None


def _channels_last(perm) -> bool:
    """(0, 2, ..., r-1, 1): an image's channels-last layout (rank 4+: a rank-3 (0, 2, 1) is also a transposed
    [batch, tokens, features] matrix)."""
    return len(perm) >= 4 and tuple(perm) == (0, *range(2, len(perm)), 1)


class LoweringContext:
    """State shared by the lowering rules of one partition."""

    def __init__(self, spec: TosaSpecification, builder: TosaGraphBuilder) -> None:
        self.spec = spec
        self.b = builder
        builder.int16_extension = spec.support_extension("int16")
        self.values: dict[Node, Any] = {}
        # A trial lowering (trial_lowering.py) sets this: a rule that reads past its own arguments (a
        # neighbour's weight) gets that node's value as the partition boundary would give it.
        self.outside_value: Callable[[Node], Any] | None = None

    # -- reading arguments -------------------------------------------------------------------
    def val(self, arg: Any) -> Value:
        """The lowered value of a node argument (python scalars become constants)."""
        if isinstance(arg, Node):
            try:
                value = self.values[arg]
            except KeyError:
                value = self.outside_value(arg) if self.outside_value is not None else None
                if value is None:
                    raise LoweringError(f"node {arg.name} was used before it was lowered") from None
                self.values[arg] = value
            if not isinstance(value, Value):
                raise LoweringError(f"node {arg.name} is a tuple; expected a tensor (missing getitem?)")
            return value
        if isinstance(arg, (int, float, bool)):
            return self.constant(torch.tensor(arg))
        raise LoweringError(f"cannot lower argument {arg!r} of type {type(arg).__name__}")

    @staticmethod
    def meta(node: Node) -> torch.Tensor:
        """The fake tensor torch.export recorded for a node's (first) output."""
        val = node.meta.get("val")
        if isinstance(val, (tuple, list)):
            val = val[0]
        return val

    # -- making values -----------------------------------------------------------------------
    def constant(self, tensor: torch.Tensor) -> Value:
        return Value(tuple(tensor.shape), tensor.dtype, const=tensor.detach())

    def from_tensor(self, t: T, shape, dtype: torch.dtype, perm=None) -> Value:
        perm = layout.identity(len(shape)) if perm is None else tuple(perm)
        if layout.apply(shape, perm) != t.shape:
            raise LoweringError(f"tensor {t.name} has shape {t.shape}, expected "
                                f"{layout.apply(shape, perm)} for logical {tuple(shape)} in layout {perm}")
        return Value(tuple(int(d) for d in shape), dtype, tensor=t, perm=perm)

    def emit(self, op: Op, inputs: list[T], shape, dtype: torch.dtype, perm=None, *attr,
             tosa_type: DType | None = None) -> Value:
        """Emit `op` producing a value of logical `shape` stored in layout `perm` (default identity)."""
        perm = layout.identity(len(shape)) if perm is None else tuple(perm)
        out = self.b.op(op, inputs, layout.apply(shape, perm), tosa_type or tosa_dtype(dtype), *attr)
        return Value(tuple(int(d) for d in shape), dtype, tensor=out, perm=perm)

    # -- materialising -----------------------------------------------------------------------
    def tensor(self, value: Value, perm=None, dtype: DType | None = None) -> T:
        """`value` as a TOSA tensor in layout `perm` (default: where it already is; identity for constants).

        Constants are permuted at compile time. A layout change in which only size-1 dims move is a
        RESHAPE; anything else costs one TRANSPOSE, cached per TOSA tensor and layout (`Value._layouts`).
        """
        if value.is_const:
            perm = layout.identity(value.rank) if perm is None else tuple(perm)
            key = ("const", perm, dtype)
            if key not in value._cache:
                _check_int32_range(value, dtype or tosa_dtype(value.dtype))
                data = value.const.permute(*perm) if value.rank else value.const
                value._cache[key] = self.b.const(data, dtype or tosa_dtype(value.dtype))
            return value._cache[key]
        if dtype is not None and dtype != value.tensor.dtype:
            raise LoweringError(f"tensor {value.tensor.name} is {value.tensor.dtype}, rule asked for {dtype}")
        perm = value.perm if perm is None else tuple(perm)
        if perm == value.perm:
            return value.tensor
        if perm not in value._layouts:
            target_shape = layout.apply(value.shape, perm)
            if layout.only_unit_dims_move(value.shape, value.perm, perm):
                value._layouts[perm] = self.b.reshape(value.tensor, target_shape)
            else:
                value._layouts[perm] = self.b.transpose(value.tensor, layout.relative(value.perm, perm))
        return value._layouts[perm]

    def with_rank(self, value: Value, rank: int) -> Value:
        """Broadcast view: prepend size-1 dims so `value` has `rank` dims (free for constants)."""
        extra = rank - value.rank
        if extra <= 0:
            return value
        shape = (1,) * extra + value.shape
        if value.is_const:
            out = self.constant(value.const.reshape(shape))
            out.qparams = value.qparams
            return out
        key = ("rank", rank)
        if key not in value._cache:
            perm = layout.insert_leading(value.perm, extra)
            t = self.b.reshape(value.tensor, layout.apply(shape, perm))
            value._cache[key] = Value(shape, value.dtype, tensor=t, perm=perm, qparams=value.qparams)
        return value._cache[key]

    def common_layout(self, values: list[Value], rank: int) -> layout.Perm:
        """The layout elementwise ops should run in: that of the first full-rank runtime input."""
        for v in values:
            if not v.is_const and v.rank == rank:
                return v.perm
        return layout.identity(rank)

    def broadcast(self, values: list[Value], rank: int, dtype: DType | None = None):
        """Tensors for an elementwise op: equal ranks, one shared layout. Returns (tensors, perm)."""
        values = [self.with_rank(v, rank) for v in values]
        perm = self.common_layout(values, rank)
        return [self.tensor(v, perm, dtype) for v in values], perm

    def scalar(self, value: float, dtype: DType, rank: int) -> T:
        """A broadcastable constant of shape [1]*rank."""
        return self.b.const(np.full([1] * rank, value, dtype=numpy_dtype(dtype)), dtype)

    def reshape(self, value: Value, shape) -> Value:
        """torch `view`/`reshape` of `value`, keeping its layout when that costs nothing.

        When the reshape only inserts or removes size-1 dims, the data order is unchanged in any
        layout, so the non-1 dims keep their physical order and no TRANSPOSE is needed. Otherwise the
        reshape happens in the value's own layout (`layout.reshape_in_place`): each split/merge group of
        dims is brought together with at most one TRANSPOSE, not through PyTorch's layout and back.
        """
        shape = tuple(int(d) for d in shape)
        if value.is_const:  # a quantized constant keeps its qparams (its codes mean nothing without them)
            out = self.constant(value.const.reshape(shape))
            out.qparams = value.qparams
            return out
        old_big = [d for d in value.shape if d != 1]
        new_big = [d for d in shape if d != 1]
        if old_big == new_big and not layout.is_identity(value.perm):
            old_ids = [i for i, d in enumerate(value.shape) if d != 1]
            new_ids = [i for i, d in enumerate(shape) if d != 1]
            mapping = dict(zip(old_ids, new_ids, strict=True))
            physical_order = [mapping[p] for p in value.perm if p in mapping]
            perm = list(range(len(shape)))
            for slot, dim in zip(new_ids, physical_order, strict=True):
                perm[slot] = dim
            t = self.b.reshape(value.tensor, layout.apply(shape, perm))
            return Value(shape, value.dtype, tensor=t, perm=tuple(perm), qparams=value.qparams)
        in_place = None if layout.is_identity(value.perm) else layout.reshape_in_place(value.shape, value.perm, shape)
        if in_place is not None and tuple(in_place[0]) != tuple(value.perm) and not _channels_last(in_place[1]):
            # the split/merge costs a TRANSPOSE in the value's layout too: the same one TRANSPOSE to PyTorch's
            # order leaves the result in the identity layout that matmul/linear read (ViT's, BERT's and Llama's
            # attention head merge paid a second TRANSPOSE back to it; U85 hf:vit -911 NPU cycles). A
            # channels-last result (image models: channel shuffle) stays where its convolutions read it.
            in_place = None
        if in_place is not None:  # split/merge in the value's own layout: at most one TRANSPOSE, no trip to NCHW
            first, perm = in_place
            t = self.b.reshape(self.tensor(value, first), layout.apply(shape, perm))
            return Value(shape, value.dtype, tensor=t, perm=perm, qparams=value.qparams)
        t = self.tensor(value, layout.identity(value.rank))
        return Value(shape, value.dtype, tensor=self.b.reshape(t, shape),
                     perm=layout.identity(len(shape)), qparams=value.qparams)

    def out_meta(self, node: Node):
        """(shape, dtype) of a node's output."""
        meta = self.meta(node)
        # quantized nodes are float in torch but carried as integers: rules see the storage dtype
        return tuple(int(d) for d in meta.shape), node.meta.get("arm_storage_dtype", meta.dtype)


_INT32 = torch.iinfo(torch.int32)


def _check_int32_range(value: Value, dtype: DType) -> None:
    """An int64 constant enters the graph as INT32 (TOSA 1.0 has no 64-bit integers): refuse one
    that does not fit rather than let it wrap."""
    data = value.const
    if data.dtype == torch.int64 and dtype == DType.INT32 and data.numel() and (int(data.max()) > _INT32.max or int(data.min()) < _INT32.min):
        raise LoweringError(f"an int64 constant with values in [{int(data.min())}, {int(data.max())}] does not fit "
                            "the INT32 that TOSA carries int64 in; the nodes computing it stay on the CPU")
