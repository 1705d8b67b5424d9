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

from collections.abc import Sequence

import torch
from torch.fx import Node

from .. import layout
from ..builder import DType, Op
from ..context import LoweringContext, Value
from ..helpers.common import arg, nan_propagate
from ..helpers.intmath import accumulator_value, output_qparams
from ..helpers.intmath import to_int32 as rescale_to_int32
from ..helpers.reduce import (
    arg_extreme,
    argmax_reason,
    as_runtime,
    centered_variance,
    count,
    drop_dims,
    float_only,
    reduce,
    reduce_dims,
    reduce_sum,
    scale,
    values_only,
)
from ..helpers.windows import ADAPTIVE_AVG_POOLS, NHWC, global_avg_pool, is_global_average
from ..registry import Quant, aten_target, register_int_rule, register_op

aten = torch.ops.aten


# shared reductions live in helpers/reduce.py (normalization, softmax and pooling use them too)
def to_int32(ctx: LoweringContext, x: Value) -> Value:
    """An integer or bool value as int32 (a CAST unless it already is one)."""
    x = as_runtime(ctx, x)
    if x.tensor.dtype == DType.INT32:
        return x
    t = ctx.b.op(Op.CAST, [x.tensor], x.tensor.shape, DType.INT32)
    return Value(x.shape, torch.int32, tensor=t, perm=x.perm)


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
    return x.perm == NHWC or layout.only_unit_dims_move(x.shape, x.perm, NHWC)


@register_op("sum_mean", [aten.sum.dim_IntList, aten.mean.dim, aten.mean.default, aten.sum.default],
             support=_sum_mean_support, quant=Quant.REDUCE, fp32_opmath=True, folds_constants=True,
             int64_arithmetic=True, shares_qparams=is_global_average)
def lower_sum_mean(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    if not x.dtype.is_floating_point and not node.meta.get("arm_quantized"):
        x = to_int32(ctx, x)  # torch sums integers (and bools) into int64, carried as int32
    dims, keepdim = _sum_mean_dims(node, x.rank)
    if is_spatial_mean(node, x, dims) and pools_in_place(x):
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
        reason = argmax_reason(node.args[0].meta["val"].dtype, spec)
        if reason:
            return reason
    dtype = node.args[0].meta["val"].dtype
    if dtype == torch.bool or (not dtype.is_floating_point and not spec.support_integer()):
        return f"max/min of {dtype} tensors is not lowered for {spec} (integer REDUCE_MAX needs the INT profile)"
    return None


@register_op("amax_amin", list(_EXTREMA), support=_extrema_support, quant=Quant.SHARED, fp_index_math=True, folds_constants=True)
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


@register_op("any_all", list(_ANY_ALL), support=_any_support, folds_constants=True)
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
    try:
        return x.qparams.dtype == torch.int8 and output_qparams(node).same_as(x.qparams)
    except ValueError:  # no quantize user: the result stays an accumulator
        return False


@register_int_rule("sum_mean")
def lower_sum_mean_int(ctx: LoweringContext, node: Node) -> Value:
    """Sum of (q - zero_point) in int32: an accumulator with scale s (sum) or s / N (mean); the
    following quantize RESCALEs it once, so the result is rounded once, like the fake-quant model.

    A spatial mean whose output keeps the input's qparams (the quantizer's choice for a global average,
    `is_global_average`) is one AVG_POOL2D instead (no RESCALE; it rounds ties up where torch rounds
    them to even, which only matters when H * W is even).
    With other output qparams AVG_POOL2D would round twice (to the input's scale, then the output's),
    so it stays a sum; vela runs the merged REDUCE_SUM as a TRANSPOSE and one reduction layer, fewer
    NPU cycles than its AVG_POOL2D plus a RESCALE (21k against 36k for MobileNetV2's 7x7x1280).
    """
    x = ctx.val(node.args[0])
    dims, keepdim = _sum_mean_dims(node, x.rank)
    mean = aten_target(node.target) in _MEANS
    if is_spatial_mean(node, x, dims) and pools_in_place(x) and _keeps_qparams(node, x):
        y = global_avg_pool(ctx, x)
        return y if keepdim else drop_dims(ctx, y, dims)
    t, unit = rescale_to_int32(ctx, x)
    y = reduce_sum(ctx, Value(x.shape, torch.int32, tensor=t, perm=x.perm), dims)
    y = y if keepdim else drop_dims(ctx, y, dims)
    if mean:
        unit /= count(x.shape, dims)
    return accumulator_value(y.shape, torch.int32, y.tensor, y.perm, unit)
