"""Reductions (FP): mean, sum, amax/amin (and max/min values), var/var_mean, any.

Every rule works in the layout its input already has: a logical dim `d` is physical axis
`perm.index(d)`, TOSA REDUCE_* keep the reduced axis (size 1), and dropping it (keepdim=False) is a
RESHAPE of unit dims, so a reduction after an NHWC convolution adds no TRANSPOSE. TOSA reduces one
axis per operator: sum/mean first RESHAPE reduced dims that sit next to each other in the layout into
one axis (one REDUCE_SUM; vela turns each reduced non-channel axis into a TRANSPOSE plus a reduction),
other rules reduce dims one after the other; mean is REDUCE_SUM times 1/N. The mean over H and W of
an NCHW tensor stored NHWC (global average pooling) is one AVG_POOL2D in FP.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch.fx import Node

from .. import layout
from ..builder import DType, Op, tosa_dtype
from ..context import LoweringContext, Value
from ..registry import Quant, aten_target, register_int_rule, register_op
from .common import arg, mul_shift
from .elementwise import nan_propagate

aten = torch.ops.aten


# -- helpers shared with normalization and softmax ------------------------------------------------
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


def to_int32(ctx: LoweringContext, x: Value) -> Value:
    """An integer or bool value as int32 (a CAST unless it already is one)."""
    x = as_runtime(ctx, x)
    if x.tensor.dtype == DType.INT32:
        return x
    t = ctx.b.op(Op.CAST, [x.tensor], x.tensor.shape, DType.INT32)
    return Value(x.shape, torch.int32, tensor=t, perm=x.perm)


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


# -- sum / mean --------------------------------------------------------------------------------
_SUMS = (aten.sum.dim_IntList, aten.sum.default)
_SUMMED_INTEGERS = (torch.bool, torch.int8, torch.int16, torch.int32, torch.int64)


def _sum_mean_support(node: Node, spec) -> str | None:
    dtype, out = node.args[0].meta["val"].dtype, node.meta["val"].dtype
    if aten_target(node.target) in _SUMS and dtype in _SUMMED_INTEGERS and not node.meta.get("arm_quantized"):
        if not spec.support_integer():
            return (f"sum of {dtype} tensors needs the INT profile (TOSA 1.0 REDUCE_SUM on int32 is PRO-INT); "
                    f"under {spec} it runs on the CPU")
        return None if out in (torch.int32, torch.int64) else f"sum of {dtype} into {out} is not lowered"
    reason = float_only(node, "sum/mean")
    if reason:
        return reason
    if out != dtype:
        return f"sum/mean with an output dtype ({out}) other than the input's is not lowered"
    return None


# the adaptive average pools (pooling's family); with a 1x1 output one is the mean over H, W with
# keepdim, which pooling's rules hand to this module's
ADAPTIVE_AVG_POOLS = (aten._adaptive_avg_pool2d.default, aten.adaptive_avg_pool2d.default)
_MEANS = (aten.mean.dim, aten.mean.default, *ADAPTIVE_AVG_POOLS)


def _sum_mean_dims(node: Node, rank: int) -> tuple[list[int], bool]:
    """(reduced dims, keepdim) of a sum/mean node."""
    target = aten_target(node.target)
    if target in ADAPTIVE_AVG_POOLS:
        return [rank - 2, rank - 1], True
    if target in (aten.sum.dim_IntList, aten.mean.dim):
        return reduce_dims(arg(node, 1, "dim"), rank), arg(node, 2, "keepdim", False)
    return reduce_dims(None, rank), False


def is_spatial_mean(node: Node, x: Value, dims: Sequence[int]) -> bool:
    """A mean over H and W of a rank-4 [N, C, H, W] value (global average pooling)."""
    return aten_target(node.target) in _MEANS and x.rank == 4 and list(dims) == [2, 3] and not x.is_const


def pools_in_place(x: Value) -> bool:
    """Whether x is (or is for free) stored NHWC, so AVG_POOL2D needs no TRANSPOSE."""
    from .pooling import NHWC

    return x.perm == NHWC or layout.only_unit_dims_move(x.shape, x.perm, NHWC)


@register_op("sum_mean", [aten.sum.dim_IntList, aten.mean.dim, aten.mean.default, aten.sum.default],
             support=_sum_mean_support, quant=Quant.REDUCE, fp32_opmath=True)
def lower_sum_mean(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    if not x.dtype.is_floating_point and not node.meta.get("arm_quantized"):
        x = to_int32(ctx, x)  # torch sums integers (and bools) into int64, carried as int32
    dims, keepdim = _sum_mean_dims(node, x.rank)
    if is_spatial_mean(node, x, dims) and pools_in_place(x):
        from .pooling import global_avg_pool

        y = global_avg_pool(ctx, x)
    elif aten_target(node.target) in _MEANS:
        y = scale(ctx, reduce_sum(ctx, x, dims), 1.0 / count(x.shape, dims))
    else:
        y = reduce_sum(ctx, x, dims)
    return y if keepdim else drop_dims(ctx, y, dims)


# -- amax / amin / max / min -------------------------------------------------------------------
_EXTREMA = {
    aten.amax.default: Op.REDUCE_MAX, aten.max.default: Op.REDUCE_MAX, aten.max.dim: Op.REDUCE_MAX,
    aten.amin.default: Op.REDUCE_MIN, aten.min.default: Op.REDUCE_MIN, aten.min.dim: Op.REDUCE_MIN,
}


def _extrema_support(node: Node, spec) -> str | None:
    target = aten_target(node.target)
    if target in (aten.max.dim, aten.min.dim) and values_only(node) and not node.meta.get("arm_quantized"):
        from .argmax import argmax_reason  # the indices are an ARGMAX

        reason = argmax_reason(node.args[0].meta["val"].dtype, spec)
        if reason:
            return reason
    dtype = node.args[0].meta["val"].dtype
    if dtype == torch.bool or (not dtype.is_floating_point and not spec.support_integer()):
        return f"max/min of {dtype} tensors is not lowered for {spec} (integer REDUCE_MAX needs the INT profile)"
    return None


@register_op("amax_amin", list(_EXTREMA), support=_extrema_support, quant=Quant.SHARED, fp_index_math=True)
def lower_extrema(ctx: LoweringContext, node: Node):
    x = ctx.val(node.args[0])
    target = aten_target(node.target)
    op = _EXTREMA[target]
    if target in (aten.max.default, aten.min.default):
        dims, keepdim = list(range(x.rank)), False
    else:
        dims = reduce_dims(arg(node, 1, "dim"), x.rank)
        keepdim = arg(node, 2, "keepdim", False)
    y = reduce(ctx, x, op, dims, nan_propagate())
    y = y if keepdim else drop_dims(ctx, y, dims)
    if target in (aten.max.dim, aten.min.dim):
        if not values_only(node):
            return (y, None)  # the indices are not used
        from .argmax import arg_extreme

        return (y, arg_extreme(ctx, x, dims[0], keepdim, minimum=target is aten.min.dim))
    return y


# -- var / var_mean ----------------------------------------------------------------------------
def _var_support(node: Node, spec) -> str | None:
    reason = float_only(node, "var")
    if reason:
        return reason
    x = node.args[0].meta["val"]
    dims = reduce_dims(arg(node, 1, "dim"), x.dim())
    correction = node.kwargs.get("correction")
    correction = 1 if correction is None else correction
    if count(x.shape, dims) - correction <= 0:
        return f"variance over {count(x.shape, dims)} element(s) with correction {correction} is undefined"
    return None


@register_op("var", [aten.var.correction, aten.var_mean.correction], support=_var_support, profiles=("FP",),
             fp32_opmath=True)
def lower_var(ctx: LoweringContext, node: Node):
    x = ctx.val(node.args[0])
    dims = reduce_dims(arg(node, 1, "dim"), x.rank)
    correction = node.kwargs.get("correction")
    correction = 1 if correction is None else correction
    _, mean, var = centered_variance(ctx, x, dims, correction)
    if not node.kwargs.get("keepdim", False):
        mean, var = drop_dims(ctx, mean, dims), drop_dims(ctx, var, dims)
    if aten_target(node.target) is aten.var_mean.correction:
        return (var, mean)
    return var


# -- any ---------------------------------------------------------------------------------------
def _any_support(node: Node, spec) -> str | None:
    dtype = node.args[0].meta["val"].dtype
    if dtype != torch.bool:
        return f"any/all of {dtype} tensors is not lowered (only bool; compare with 0 first)"
    return None


_ANY_ALL = {aten.any.dim: Op.REDUCE_ANY, aten.any.dims: Op.REDUCE_ANY, aten.any.default: Op.REDUCE_ANY,
            aten.all.dim: Op.REDUCE_ALL, aten.all.dims: Op.REDUCE_ALL, aten.all.default: Op.REDUCE_ALL}


@register_op("any_all", list(_ANY_ALL), support=_any_support)
def lower_any_all(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    target = aten_target(node.target)
    if target in (aten.any.default, aten.all.default):
        dims, keepdim = list(range(x.rank)), False
    else:
        dims = reduce_dims(arg(node, 1, "dim"), x.rank)
        keepdim = arg(node, 2, "keepdim", False)
    y = reduce(ctx, as_runtime(ctx, x, DType.BOOL), _ANY_ALL[target], dims)
    return y if keepdim else drop_dims(ctx, y, dims)


def _keeps_qparams(node: Node, x: Value) -> bool:
    """Whether the int8 node's output is quantized exactly like its input."""
    from .quantize import output_qparams

    try:
        return x.qparams.dtype == torch.int8 and output_qparams(node).same_as(x.qparams)
    except ValueError:  # no quantize user: the result stays an accumulator
        return False


@register_int_rule("sum_mean")
def lower_sum_mean_int(ctx: LoweringContext, node: Node) -> Value:
    """Sum of (q - zero_point) in int32: an accumulator with scale s (sum) or s / N (mean); the
    following quantize RESCALEs it once, so the result is rounded once, like the fake-quant model.

    A spatial mean whose output keeps the input's qparams is one AVG_POOL2D instead (no RESCALE; it
    rounds ties up where torch rounds them to even, which only matters when H * W is even).
    With other output qparams AVG_POOL2D would round twice (to the input's scale, then the output's),
    so it stays a sum; vela runs the merged REDUCE_SUM as a TRANSPOSE and one reduction layer, fewer
    NPU cycles than its AVG_POOL2D plus a RESCALE (21k against 36k for MobileNetV2's 7x7x1280).
    """
    from ..quantized import to_int32
    from .quantize import accumulator_value

    x = ctx.val(node.args[0])
    dims, keepdim = _sum_mean_dims(node, x.rank)
    mean = aten_target(node.target) in _MEANS
    if is_spatial_mean(node, x, dims) and pools_in_place(x) and _keeps_qparams(node, x):
        from .pooling import global_avg_pool

        y = global_avg_pool(ctx, x)
        return y if keepdim else drop_dims(ctx, y, dims)
    t, unit = to_int32(ctx, x)
    y = reduce_sum(ctx, Value(x.shape, torch.int32, tensor=t, perm=x.perm), dims)
    y = y if keepdim else drop_dims(ctx, y, dims)
    if mean:
        unit /= count(x.shape, dims)
    return accumulator_value(y.shape, torch.int32, y.tensor, y.perm, unit)
