"""Normalization: inference batch norm (FP and INT), batch/instance norm with batch statistics, layer
norm, group norm (FP). Each works in its input's layout (no TRANSPOSE after an NHWC convolution).

Inference batch norm with constant statistics folds at compile time to y = x * scale + shift with
per-channel constants (one MUL and one ADD; folded into the weights when it follows a convolution).
Under INT a batch norm that does not follow a convolution (conv -> GELU -> BN) is the same affine as a
1x1 DEPTHWISE_CONV2D with int8 weights +-127 and an int32 bias, whose per-channel accumulator scale
the following RESCALE absorbs (one NPU operation on Ethos-U). The others compute statistics in the graph:
mean = REDUCE_SUM * 1/N, var = REDUCE_SUM((x - mean)^2) * 1/N, y = (x - mean) * RSQRT(var + eps),
then the optional affine weight and bias.
"""

from __future__ import annotations

import math

import torch
from torch.fx import Node

from .. import layout
from ..builder import DType, Op
from ..context import LoweringContext, Value
from ..helpers.common import arg, is_constant_input, mul_shift
from ..helpers.convolution import bn_scale_shift, conv_args, fold_into_conv, is_convolution
from ..helpers.intmath import acc_type, accumulator_value
from ..helpers.reduce import as_runtime, binary, centered_variance, float_only, unary, values_only
from ..registry import Quant, lookup, register_int_rule, register_op

aten = torch.ops.aten
NHWC = layout.NCHW_TO_NHWC


def normalize(ctx: LoweringContext, x: Value, dims: list[int], eps: float) -> Value:
    """(x - mean) / sqrt(var + eps) over logical `dims` (biased variance), in x's layout."""
    centered, _, var = centered_variance(ctx, x, dims)
    eps_c = ctx.constant(torch.full([1] * var.rank, eps, dtype=var.dtype))
    inv_std = unary(ctx, Op.RSQRT, binary(ctx, Op.ADD, var, eps_c))
    return binary(ctx, Op.MUL, centered, inv_std, mul_shift(ctx))


def _channel_view(ctx: LoweringContext, param: Value, rank: int) -> Value:
    """A per-channel [C] parameter viewed as [C, 1, ...] so it broadcasts over dim 1 of a rank-`rank` x."""
    return ctx.reshape(param, (param.shape[0],) + (1,) * (rank - 2)) if rank > 2 else param


def _affine(ctx: LoweringContext, y: Value, weight, bias, view) -> Value:
    """y * weight + bias for optional node arguments; `view` shapes each parameter for broadcasting."""
    if weight is not None:
        y = binary(ctx, Op.MUL, y, view(ctx.val(weight)), mul_shift(ctx))
    if bias is not None:
        y = binary(ctx, Op.ADD, y, view(ctx.val(bias)))
    return y


# -- inference batch norm ------------------------------------------------------------------------
def _bn_inference_support(node: Node, spec) -> str | None:
    reason = float_only(node, "batch_norm") or values_only(node)
    if reason:
        return reason
    for index, name in ((1, "weight"), (2, "bias"), (3, "running_mean"), (4, "running_var")):
        if node.args[index] is not None and not is_constant_input(node, index):
            return (f"batch_norm {name} is computed at runtime; only constant parameters and running "
                    "statistics are folded")
    return None


# quant: the input and the output get their own qparams (REDUCE's annotation); export names it batch_norm
@register_op("batch_norm_inference", [aten._native_batch_norm_legit_no_training.default],
             support=_bn_inference_support, quant=Quant.REDUCE, quant_aliases=(aten.batch_norm.default,),
             int16=False, float_params=True, fp32_opmath=True)
def lower_batch_norm_inference(ctx: LoweringContext, node: Node):

    x = ctx.val(node.args[0])
    scale, shift = bn_scale_shift(*(ctx.val(a).const if a is not None else None for a in node.args[1:5]),
                                  eps=float(node.args[6]))
    channels = x.shape[1]
    shape = (channels,) + (1,) * (x.rank - 2)
    source = node.args[0]
    conv = conv_args(source) if is_convolution(source) else None
    if conv is not None and len(source.users) == 1 and (not conv.transposed or conv.groups == 1):
        # conv -> batch norm: fold into the conv's weights at compile time (the unfolded conv is dropped)
        folded = fold_batch_norm(ctx, source, scale, shift)
        if folded is not None:
            return (folded, None, None)
    y = binary(ctx, Op.MUL, x, ctx.constant(scale.to(x.dtype).reshape(shape)), mul_shift(ctx))
    if bool(shift.abs().max() > 0):
        y = binary(ctx, Op.ADD, y, ctx.constant(shift.to(x.dtype).reshape(shape)))
    return (y, None, None)  # the saved statistics are refused by the support rule


_WEIGHT_CODE = 127  # |int8 weight| of each channel: the bias is then exact to 1/254 of an input step


@register_int_rule("batch_norm_inference")
def lower_batch_norm_inference_int(ctx: LoweringContext, node: Node):
    """int8 x -> int32 accumulator of x * scale + shift, per-channel scale (a 1x1 DEPTHWISE_CONV2D).

    Channel c's accumulator unit is u_c = s_in * |scale_c| / 127, its weight sign(scale_c) * 127 and
    its bias round(shift_c / u_c): the only rounding besides the final RESCALE is the bias' (at most
    1/254 of an input step), so the result is within 1 LSB of the fake-quantized batch norm."""
    x = ctx.val(node.args[0])
    if x.qparams is None or x.qparams.dtype != torch.int8:
        raise ValueError("quantized batch_norm needs an int8 input")
    scale, shift = bn_scale_shift(*(ctx.val(a).const if a is not None else None for a in node.args[1:5]),
                                  eps=float(node.args[6]))
    s_in = float(x.qparams.scale)
    unit = s_in * scale.abs() / _WEIGHT_CODE
    unit = torch.maximum(unit, shift.abs() / 2**30).clamp_min(s_in * 2.0**-40)  # the bias fits in int32
    weight = torch.round(scale * s_in / unit).clamp(-_WEIGHT_CODE, _WEIGHT_CODE)
    bias = torch.round(shift / unit)
    shape, channels = x.shape, x.shape[1]
    x4 = x if x.rank == 4 else ctx.reshape(x, (shape[0], channels, 1, math.prod(shape[2:])))
    b = ctx.b
    operands = [ctx.tensor(x4, NHWC), b.const(weight.reshape(1, 1, channels, 1).to(torch.int8), DType.INT8),
                b.const(bias.to(torch.int32), DType.INT32), b.zero_point(DType.INT8, x.qparams.zero_point),
                b.zero_point(DType.INT8)]
    y = b.op(Op.DEPTHWISE_CONV2D, operands, layout.apply(x4.shape, NHWC), DType.INT32, [0, 0, 0, 0], [1, 1],
             [1, 1], False, acc_type(DType.INT8))
    acc = Value(x4.shape, torch.int32, tensor=y, perm=NHWC)
    if x.rank != 4:
        acc = ctx.reshape(acc, shape)
    return (accumulator_value(shape, torch.int32, acc.tensor, acc.perm, unit.numpy(), axis=1), None, None)


# -- batch norm with batch statistics (training mode / instance norm) -------------------------------
def _bn_stats_support(node: Node, spec) -> str | None:
    return float_only(node, "batch_norm") or values_only(node)


@register_op("batch_norm_batch_stats", [aten._native_batch_norm_legit.no_stats], support=_bn_stats_support,
             profiles=("FP",))
def lower_batch_norm_batch_stats(ctx: LoweringContext, node: Node):
    x = as_runtime(ctx, ctx.val(node.args[0]))
    eps = arg(node, 5, "eps", 1e-5)
    y = normalize(ctx, x, [d for d in range(x.rank) if d != 1], eps)
    y = _affine(ctx, y, node.args[1], node.args[2], lambda p: _channel_view(ctx, p, x.rank))
    return (y, None, None)


# -- layer norm ------------------------------------------------------------------------------------
def _layer_norm_support(node: Node, spec) -> str | None:
    return float_only(node, "layer_norm") or values_only(node)


@register_op("layer_norm", [aten.native_layer_norm.default], support=_layer_norm_support, profiles=("FP",),
             fp32_opmath=True)
def lower_layer_norm(ctx: LoweringContext, node: Node):
    x = as_runtime(ctx, ctx.val(node.args[0]))
    dims = list(range(x.rank - len(node.args[1]), x.rank))
    y = normalize(ctx, x, dims, node.args[4])
    y = _affine(ctx, y, node.args[2], node.args[3], lambda p: p)  # [*normalized_shape] broadcasts as is
    return (y, None, None)


# -- group norm ------------------------------------------------------------------------------------
def split_dim(ctx: LoweringContext, x: Value, dim: int, sizes: tuple[int, ...]) -> Value:
    """View logical dim `dim` as `sizes`: splitting a dim in place is a RESHAPE in any layout."""
    shape = x.shape[:dim] + tuple(sizes) + x.shape[dim + 1:]
    extra = len(sizes) - 1
    perm: list[int] = []
    for p in x.perm:
        if p < dim:
            perm.append(p)
        elif p == dim:
            perm.extend(range(dim, dim + len(sizes)))
        else:
            perm.append(p + extra)
    t = ctx.b.reshape(x.tensor, layout.apply(shape, perm))
    return Value(shape, x.dtype, tensor=t, perm=tuple(perm))


def _group_norm_support(node: Node, spec) -> str | None:
    return float_only(node, "group_norm") or values_only(node)


@register_op("group_norm", [aten.native_group_norm.default], support=_group_norm_support, profiles=("FP",),
             fp32_opmath=True)
def lower_group_norm(ctx: LoweringContext, node: Node):
    x = as_runtime(ctx, ctx.val(node.args[0]))
    groups, eps = node.args[6], node.args[7]
    channels = x.shape[1]
    grouped = split_dim(ctx, x, 1, (groups, channels // groups))
    y = normalize(ctx, grouped, list(range(2, grouped.rank)), eps)
    # merge (G, C/G) back into C: the inverse RESHAPE, again in place
    merged = ctx.b.reshape(ctx.tensor(y, grouped.perm), layout.apply(x.shape, x.perm))
    y = Value(x.shape, x.dtype, tensor=merged, perm=x.perm)
    y = _affine(ctx, y, node.args[1], node.args[2], lambda p: _channel_view(ctx, p, x.rank))
    return (y, None, None)


def fold_batch_norm(ctx: LoweringContext, conv: Node, scale: torch.Tensor, shift: torch.Tensor) -> Value | None:
    """The convolution `conv` with a following per-channel `y * scale + shift` folded into its constant
    weight and bias (None when it cannot be folded: runtime weights or a quantized convolution)."""
    args = conv_args(conv)
    w = ctx.val(args.weight)
    bias = ctx.val(args.bias) if args.bias is not None else None
    if not w.is_const or (bias is not None and not bias.is_const) or w.qparams is not None:
        return None
    weight, folded_bias = fold_into_conv(w.const, bias.const if bias is not None else None, scale, shift,
                                         args.transposed)
    return lookup(conv.target).lower(ctx, conv, ctx.constant(weight), ctx.constant(folded_bias))  # the conv family's rule
