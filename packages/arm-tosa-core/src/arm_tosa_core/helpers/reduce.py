"""Reductions shared by the reduction, normalization, softmax, pooling and argmax families."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch.fx import Node

from .. import layout
from ..builder import DType, Op, tosa_dtype
from ..context import LoweringContext, Value
from .common import mul_shift, nan_propagate


def reduce_dims(dims, rank: int) -> list[int]:
    """Normalised, sorted, unique dims; None or [] means every dim (torch's convention)."""
    if rank == 0:
        return []
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % rank for d in dims})


def as_runtime(ctx: LoweringContext, x: Value, dtype: DType | None = None) -> Value:
    """`x` as a graph tensor (constants are materialised in PyTorch's layout)."""
    if not x.is_const:
        return x
    t = ctx.tensor(x, None, dtype or tosa_dtype(x.dtype))
    return ctx.from_tensor(t, x.shape, x.dtype)


def reduce(ctx: LoweringContext, x: Value, op: Op, dims: Sequence[int], *attr) -> Value:
    """REDUCE_`op` over logical `dims` (keepdim) in x's layout; size-1 dims cost nothing.

    `attr` follows the axis in the attribute (e.g. the NaN mode of REDUCE_MAX/MIN).
    """
    x = as_runtime(ctx, x)
    for d in dims:
        if x.shape[d] == 1:
            continue
        shape = list(x.shape)
        shape[d] = 1
        t = ctx.b.op(op, [x.tensor], layout.apply(shape, x.perm), x.tensor.dtype, x.perm.index(d), *attr)
        x = Value(tuple(shape), x.dtype, tensor=t, perm=x.perm)
    return x


def reduce_sum(ctx: LoweringContext, x: Value, dims: Sequence[int]) -> Value:
    """REDUCE_SUM over logical `dims` (keepdim); reduced dims that are adjacent in x's layout (size-1
    dims between them do not count) are RESHAPEd into one axis first, so one REDUCE_SUM does them all."""
    x = as_runtime(ctx, x)
    axes = sorted(x.perm.index(d) for d in dims if x.shape[d] != 1)
    physical = layout.apply(x.shape, x.perm)
    if len(axes) < 2 or any(physical[a] != 1 and x.perm[a] not in dims for a in range(axes[0], axes[-1])):
        return reduce(ctx, x, Op.REDUCE_SUM, dims)
    first, last = axes[0], axes[-1]
    # the merged axis is the run's last one (the rank stays): the result is already keepdim's shape
    merged = list(physical)
    merged[first:last + 1] = [1] * (last - first) + [math.prod(physical[first:last + 1])]
    t = ctx.b.reshape(x.tensor, merged)
    merged[last] = 1
    t = ctx.b.op(Op.REDUCE_SUM, [t], merged, t.dtype, last)
    shape = tuple(1 if i in dims else s for i, s in enumerate(x.shape))
    return Value(shape, x.dtype, tensor=ctx.b.reshape(t, layout.apply(shape, x.perm)), perm=x.perm)


def drop_dims(ctx: LoweringContext, x: Value, dims: Sequence[int]) -> Value:
    """Remove size-1 logical `dims` (keepdim=False): a RESHAPE, never a TRANSPOSE."""
    if not dims:
        return x
    shape = tuple(s for i, s in enumerate(x.shape) if i not in set(dims))
    if x.is_const:
        return ctx.constant(x.const.reshape(shape))
    perm = layout.drop_dims(x.perm, dims)
    t = ctx.b.reshape(x.tensor, layout.apply(shape, perm))
    return Value(shape, x.dtype, tensor=t, perm=perm, qparams=x.qparams)


def binary(ctx: LoweringContext, op: Op, a: Value, b: Value, *extra) -> Value:
    """An elementwise TOSA op over broadcast values, in the layout of the first runtime operand."""
    rank = max(a.rank, b.rank)
    (ta, tb), perm = ctx.broadcast([a, b], rank, tosa_dtype(a.dtype))
    return ctx.emit(op, [ta, tb, *extra], torch.broadcast_shapes(a.shape, b.shape), a.dtype, perm)


def scale(ctx: LoweringContext, x: Value, factor: float) -> Value:
    """x * factor (a MUL by a broadcast constant; nothing when factor is 1)."""
    if factor == 1:
        return x
    c = ctx.constant(torch.full([1] * x.rank, factor, dtype=x.dtype))
    return binary(ctx, Op.MUL, x, c, mul_shift(ctx))


def unary(ctx: LoweringContext, op: Op, x: Value) -> Value:
    x = as_runtime(ctx, x)
    return ctx.emit(op, [x.tensor], x.shape, x.dtype, x.perm)


def count(shape: Sequence[int], dims: Sequence[int]) -> int:
    return math.prod(shape[d] for d in dims)


def mean_keepdim(ctx: LoweringContext, x: Value, dims: Sequence[int]) -> Value:
    """Mean over `dims`, keeping them (size 1)."""
    return scale(ctx, reduce(ctx, x, Op.REDUCE_SUM, dims), 1.0 / count(x.shape, dims))


def centered_variance(ctx: LoweringContext, x: Value, dims: Sequence[int], correction: float = 0.0):
    """(x - mean, mean, variance) over `dims` (all keepdim); variance divides by N - correction."""
    mean = mean_keepdim(ctx, x, dims)
    centered = binary(ctx, Op.SUB, x, mean)
    squares = binary(ctx, Op.MUL, centered, centered, mul_shift(ctx))
    total = reduce(ctx, squares, Op.REDUCE_SUM, dims)
    return centered, mean, scale(ctx, total, 1.0 / (count(x.shape, dims) - correction))


def values_only(node: Node) -> str | None:
    """Reason when anything but output 0 of a multi-output op (e.g. the indices) is used."""
    import operator

    for user in node.users:
        if user.target is not operator.getitem or user.args[1] != 0:
            return (f"{node.name}: output {user.args[1] if user.target is operator.getitem else 'tuple'} "
                    "(indices or statistics) is used; only the first output is lowered")
    return None


def float_only(node: Node, what: str, spec=None, integers: Sequence[torch.dtype] = ()) -> str | None:
    """Why `what` of a non-float input is not lowered; inputs of a dtype in `integers` are, under a
    `spec` with the INT profile (int16 only with its extension)."""
    dtype = node.args[0].meta["val"].dtype
    if spec is not None and spec.support_integer() and dtype in integers \
            and (dtype != torch.int16 or spec.support_extension("int16")):
        return None
    if not dtype.is_floating_point:
        return (f"{what} of {dtype} tensors is not lowered (FP profile; cast to float first, or "
                "quantize the model for the INT profile)")
    return None


def argmax_reason(dtype: torch.dtype, spec) -> str | None:
    """Why TOSA ARGMAX cannot take a (not quantized) tensor of `dtype` under `spec`; None when it can."""
    if dtype.is_floating_point:
        return None if spec.support_float() else f"argmax of {dtype} needs the FP profile (or quantize the model)"
    if dtype == torch.int8 or (dtype == torch.int16 and spec.support_extension("int16")):
        return None
    if dtype == torch.int16:
        return "TOSA 1.0 ARGMAX on int16 needs the int16 extension (a spec with \"+int16\")"
    return (f"TOSA 1.0 ARGMAX has no {str(dtype).replace('torch.', '').upper()} form (it takes float, int8, "
            "and int16 with the int16 extension)")


def arg_extreme(ctx: LoweringContext, x: Value, dim: int | None, keepdim: bool, minimum: bool) -> Value:
    """The int64 (carried as int32) index of the largest (`minimum`: smallest) entry along `dim`
    (None: over every element). The input is RESHAPEd so that ARGMAX's result already has the output
    shape: int32 RESHAPEs are INT-profile only, input ones are not."""
    if dim is None:  # over every element: [(1,) * rank if keepdim, numel]
        shape = (1,) * x.rank if keepdim else ()
        x, dim = ctx.reshape(x, (*shape, int(torch.Size(x.shape).numel()))), len(shape)
    else:
        dim %= max(x.rank, 1)
        if keepdim:  # a unit dim before `dim` stays in the result
            x, dim = ctx.reshape(x, (*x.shape[:dim], 1, *x.shape[dim:])), dim + 1
        shape = tuple(d for i, d in enumerate(x.shape) if i != dim)
    t = ctx.tensor(x, tuple(range(x.rank)))
    if minimum:
        op = Op.NEGATE if t.dtype in (DType.FP16, DType.FP32, DType.BF16) else Op.BITWISE_NOT
        extra = [ctx.b.zero_point(t.dtype), ctx.b.zero_point(t.dtype)] if op == Op.NEGATE else []
        t = ctx.b.op(op, [t, *extra], t.shape, t.dtype)
    index = ctx.b.op(Op.ARGMAX, [t], shape, DType.INT32, dim, nan_propagate())
    return ctx.from_tensor(index, shape, torch.int64)
