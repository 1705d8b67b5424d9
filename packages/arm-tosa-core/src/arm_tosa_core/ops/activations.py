"""Unary math and activations: CLAMP for the piecewise-linear ones, TOSA's own ops where they exist,
short compositions for the rest (FP). The INT profile lowers the non-linear ones to TABLE.
"""

from __future__ import annotations

import math

import torch
from torch.fx import Node

from ..builder import DType, Op, scalar_bytes, tosa_dtype
from ..context import LoweringContext, Value
from ..helpers.common import arg, mul_shift, nan_propagate, unary
from ..helpers.intmath import clamp_quantized
from ..registry import Quant, aten_target, register_int_rule, register_op

aten = torch.ops.aten

_UNARY = {
    aten.abs.default: Op.ABS, aten.exp.default: Op.EXP, aten.log.default: Op.LOG,
    aten.rsqrt.default: Op.RSQRT, aten.reciprocal.default: Op.RECIPROCAL,
    aten.sigmoid.default: Op.SIGMOID, aten.tanh.default: Op.TANH, aten.erf.default: Op.ERF,
    aten.floor.default: Op.FLOOR, aten.ceil.default: Op.CEIL, aten.sin.default: Op.SIN,
    aten.cos.default: Op.COS,
}


@register_op("unary_math", list(_UNARY), quant=Quant.TABLE, folds_constants=True)
def lower_unary_math(ctx: LoweringContext, node: Node) -> Value:
    return unary(ctx, node, _UNARY[aten_target(node.target)], ctx.val(node.args[0]))


@register_op("neg", [aten.neg.default], quant=Quant.TABLE, folds_constants=True)
def lower_neg(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    dt = tosa_dtype(ctx.out_meta(node)[1])
    zp = [ctx.b.zero_point(dt), ctx.b.zero_point(dt)]
    return unary(ctx, node, Op.NEGATE, x, extra=zp)


@register_op("sqrt", [aten.sqrt.default], quant=Quant.TABLE, folds_constants=True)
def lower_sqrt(ctx: LoweringContext, node: Node) -> Value:
    # TOSA 1.0 has no SQRT; POW with exponent 0.5 is exact to rounding on the reference model.
    x = ctx.val(node.args[0])
    half = ctx.scalar(0.5, tosa_dtype(x.dtype), x.rank)
    return unary(ctx, node, Op.POW, x, extra=[half])


def clamp_value(ctx: LoweringContext, x: Value, lo: float | None, hi: float | None, shape, dtype) -> Value:
    """CLAMP x to [lo, hi] (None = unbounded), in x's layout.

    TOSA 1.0 has no int32 CLAMP in any profile (only int8/int16 and float): int32 (and int64, carried
    as int32) clamps become MAXIMUM/MINIMUM, which the INT profile has for int32; so do int16 clamps
    without the int16 extension (the builder widens them to int32 and back).
    """
    dt = tosa_dtype(dtype)
    if dt == DType.INT32 or (dt == DType.INT16 and not ctx.spec.support_extension("int16")):
        return _int32_clamp(ctx, x, lo, hi, shape, dtype)
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    t = ctx.tensor(x, None, dt if x.is_const else None)
    return ctx.emit(Op.CLAMP, [t], shape, dtype, None if x.is_const else x.perm,
                    scalar_bytes(lo, dt), scalar_bytes(hi, dt), nan_propagate())


def _int32_clamp(ctx: LoweringContext, x: Value, lo, hi, shape, dtype) -> Value:
    if x.is_const:
        return ctx.constant(x.const.clamp(lo, hi).to(dtype))
    out = x
    # torch rounds float bounds of an integer clamp toward the integer range: ceil(lo), floor(hi)
    for bound, op in ((lo, Op.MAXIMUM), (hi, Op.MINIMUM)):
        if bound is None:
            continue
        bound = math.ceil(bound) if op == Op.MAXIMUM else math.floor(bound)
        b = ctx.scalar(min(max(bound, -2**31), 2**31 - 1), DType.INT32, x.rank)
        out = ctx.emit(op, [ctx.tensor(out), b], shape, dtype, out.perm, nan_propagate())
    if out is x:  # no bound at all: torch still returns a copy
        return Value(shape, dtype, tensor=x.tensor, perm=x.perm)
    return out


_CLAMPS = [aten.relu.default, aten.hardtanh.default, aten.clamp.default]


def _clamp_bounds(node: Node) -> tuple[float | None, float | None]:
    target = aten_target(node.target)
    if target is aten.relu.default:
        return 0.0, None
    if target is aten.hardtanh.default:
        return arg(node, 1, "min_val", -1.0), arg(node, 2, "max_val", 1.0)
    return arg(node, 1, "min", None), arg(node, 2, "max", None)


@register_op("clamp", _CLAMPS, quant=Quant.ACTIVATION,
             quant_aliases=[aten.relu_.default, aten.hardtanh_.default, aten.clamp_.default], folds_constants=True)
def lower_clamp(ctx: LoweringContext, node: Node) -> Value:
    shape, dtype = ctx.out_meta(node)
    lo, hi = _clamp_bounds(node)
    return clamp_value(ctx, ctx.val(node.args[0]), lo, hi, shape, dtype)


def _mul(ctx: LoweringContext, a: Value, b: Value) -> Value:
    rank = max(a.rank, b.rank)
    (ta, tb), perm = ctx.broadcast([a, b], rank, tosa_dtype(a.dtype))
    shape = torch.broadcast_shapes(a.shape, b.shape)
    return ctx.emit(Op.MUL, [ta, tb, mul_shift(ctx)], shape, a.dtype, perm)


def _binary(ctx: LoweringContext, op: Op, a: Value, b: Value, *attr) -> Value:
    rank = max(a.rank, b.rank)
    (ta, tb), perm = ctx.broadcast([a, b], rank, tosa_dtype(a.dtype))
    return ctx.emit(op, [ta, tb], torch.broadcast_shapes(a.shape, b.shape), a.dtype, perm, *attr)


def _const(ctx: LoweringContext, value: float, like: Value) -> Value:
    return ctx.constant(torch.full([1] * like.rank, value, dtype=like.dtype))


def _same(ctx: LoweringContext, op: Op, x: Value, *attr, extra=()) -> Value:
    return ctx.emit(op, [ctx.tensor(x), *extra], x.shape, x.dtype, x.perm, *attr)


@register_op("gelu", [aten.gelu.default], quant=Quant.TABLE, fp32_opmath=True)
def lower_gelu(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    if node.kwargs.get("approximate", "none") == "tanh":
        # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        x3 = _mul(ctx, _mul(ctx, x, x), x)
        inner = _binary(ctx, Op.ADD, x, _mul(ctx, x3, _const(ctx, 0.044715, x)))
        t = _same(ctx, Op.TANH, _mul(ctx, inner, _const(ctx, math.sqrt(2 / math.pi), x)))
    else:  # 0.5 x (1 + erf(x / sqrt 2))
        t = _same(ctx, Op.ERF, _mul(ctx, x, _const(ctx, 1 / math.sqrt(2), x)))
    half_x = _mul(ctx, x, _const(ctx, 0.5, x))
    return _mul(ctx, half_x, _binary(ctx, Op.ADD, t, _const(ctx, 1.0, x)))


@register_op("silu", [aten.silu.default], preserve=True, quant=Quant.TABLE, fp32_opmath=True)
def lower_silu(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    return _mul(ctx, x, _same(ctx, Op.SIGMOID, x))


@register_op("hardswish", [aten.hardswish.default], preserve=True, quant=Quant.TABLE, fp32_opmath=True)
def lower_hardswish(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    shifted = _binary(ctx, Op.ADD, x, _const(ctx, 3.0, x))
    gate = clamp_value(ctx, shifted, 0.0, 6.0, x.shape, x.dtype)
    return _mul(ctx, x, _mul(ctx, gate, _const(ctx, 1 / 6, x)))


@register_op("hardsigmoid", [aten.hardsigmoid.default], preserve=True, quant=Quant.TABLE, fp32_opmath=True)
def lower_hardsigmoid(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    y = _binary(ctx, Op.ADD, _mul(ctx, x, _const(ctx, 1 / 6, x)), _const(ctx, 0.5, x))
    return clamp_value(ctx, y, 0.0, 1.0, x.shape, x.dtype)


@register_op("leaky_relu", [aten.leaky_relu.default], quant=Quant.TABLE)
def lower_leaky_relu(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    slope = arg(node, 1, "negative_slope", 0.01)
    scaled = _mul(ctx, x, _const(ctx, slope, x))
    if 0 <= slope <= 1:  # max(x, a x) is leaky relu for 0 <= a <= 1
        return _binary(ctx, Op.MAXIMUM, x, scaled, nan_propagate())
    positive = ctx.emit(Op.GREATER_EQUAL, [ctx.tensor(x), ctx.tensor(_const(ctx, 0.0, x), x.perm)],
                        x.shape, torch.bool, x.perm)
    return _select(ctx, positive, x, scaled)


def _select(ctx: LoweringContext, cond: Value, a: Value, b: Value) -> Value:
    tensors, perm = ctx.broadcast([a, b], a.rank, tosa_dtype(a.dtype))
    return ctx.emit(Op.SELECT, [ctx.tensor(cond, perm)] + tensors, a.shape, a.dtype, perm)


@register_op("elu", [aten.elu.default], quant=Quant.TABLE, fp32_opmath=True)
def lower_elu(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    alpha, scale, input_scale = (arg(node, i, n, 1.0) for i, n in
                                 ((1, "alpha"), (2, "scale"), (3, "input_scale")))
    xs = _mul(ctx, x, _const(ctx, input_scale, x)) if input_scale != 1 else x
    negative = _mul(ctx, _binary(ctx, Op.SUB, _same(ctx, Op.EXP, xs), _const(ctx, 1.0, x)),
                    _const(ctx, alpha * scale, x))
    positive = _mul(ctx, x, _const(ctx, scale, x)) if scale != 1 else x
    cond = ctx.emit(Op.GREATER, [ctx.tensor(x), ctx.tensor(_const(ctx, 0.0, x), x.perm)], x.shape,
                    torch.bool, x.perm)
    return _select(ctx, cond, positive, negative)


@register_int_rule("clamp")
def lower_clamp_int(ctx: LoweringContext, node: Node) -> Value:
    """Clamp in the output's integer range; free when the quantized range already implies it."""
    lo, hi = _clamp_bounds(node)
    return clamp_quantized(ctx, node, lo, hi)
