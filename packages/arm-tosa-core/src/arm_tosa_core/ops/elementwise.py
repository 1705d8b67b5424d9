"""Elementwise arithmetic, min/max, pow and comparisons."""

from __future__ import annotations

import torch
from torch.fx import Node

from .. import layout
from ..builder import DType, Op, tosa_dtype
from ..context import LoweringContext, Value
from ..registry import Quant, aten_target, register_int_rule, register_op
from .common import arg, elementwise, mul_shift

aten = torch.ops.aten


def nan_propagate():
    import tosa_serializer as ts

    return ts.NanPropagationMode.PROPAGATE


def _scaled(ctx: LoweringContext, value: Value, factor) -> Value:
    """`value * factor` for add/sub's alpha (folded when the value is constant)."""
    if factor in (None, 1):
        return value
    if value.is_const:
        return ctx.constant(value.const * factor)
    scale = ctx.scalar(factor, value.tensor.dtype, value.rank)
    t = ctx.b.op(Op.MUL, [value.tensor, scale, mul_shift(ctx)], value.tensor.shape, value.tensor.dtype)
    return ctx.from_tensor(t, value.shape, value.dtype, value.perm)


@register_op("add", [aten.add.Tensor, aten.add.Scalar], quant=Quant.BINARY, quant_aliases=[aten.add_.Tensor])
def lower_add(ctx: LoweringContext, node: Node) -> Value:
    a, b = ctx.val(node.args[0]), _scaled(ctx, ctx.val(node.args[1]), arg(node, 2, "alpha", 1))
    return elementwise(ctx, node, Op.ADD, [a, b])


@register_op("sub", [aten.sub.Tensor, aten.sub.Scalar, aten.rsub.Scalar], quant=Quant.BINARY)
def lower_sub(ctx: LoweringContext, node: Node) -> Value:
    a, b = ctx.val(node.args[0]), _scaled(ctx, ctx.val(node.args[1]), arg(node, 2, "alpha", 1))
    if aten_target(node.target) is aten.rsub.Scalar:
        a, b = b, a
    return elementwise(ctx, node, Op.SUB, [a, b])


@register_op("mul", [aten.mul.Tensor, aten.mul.Scalar], quant=Quant.BINARY, quant_aliases=[aten.mul_.Tensor])
def lower_mul(ctx: LoweringContext, node: Node) -> Value:
    a, b = ctx.val(node.args[0]), ctx.val(node.args[1])
    return elementwise(ctx, node, Op.MUL, [a, b], extra=[mul_shift(ctx)])


def _div_support(node: Node, spec) -> str | None:
    if node.kwargs.get("rounding_mode") is not None:
        return "division with a rounding mode is not lowered (only true division)"
    if not node.meta["val"].dtype.is_floating_point:
        return "integer division is not lowered; TOSA INTDIV truncates, torch floors"
    return None


# exir spells torch.div(..., rounding_mode=...) as the *_mode overloads; registered so their reason shows
@register_op("div", [aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode],
             support=_div_support, profiles=("FP",))
def lower_div(ctx: LoweringContext, node: Node) -> Value:
    a, b = ctx.val(node.args[0]), ctx.val(node.args[1])
    if b.is_const:  # x / c -> x * (1/c), exact enough and one op
        return elementwise(ctx, node, Op.MUL, [a, ctx.constant(1.0 / b.const.float())],
                           extra=[mul_shift(ctx)])
    shape, dtype = ctx.out_meta(node)
    b = ctx.with_rank(b, len(shape))
    recip = ctx.emit(Op.RECIPROCAL, [ctx.tensor(b)], b.shape, dtype, b.perm)
    return elementwise(ctx, node, Op.MUL, [a, recip], extra=[mul_shift(ctx)])


@register_op("maximum", [aten.maximum.default])
def lower_maximum(ctx: LoweringContext, node: Node) -> Value:
    return elementwise(ctx, node, Op.MAXIMUM, [ctx.val(a) for a in node.args[:2]], nan_propagate())


@register_op("minimum", [aten.minimum.default])
def lower_minimum(ctx: LoweringContext, node: Node) -> Value:
    return elementwise(ctx, node, Op.MINIMUM, [ctx.val(a) for a in node.args[:2]], nan_propagate())


def _pow_support(node: Node, spec) -> str | None:
    if node.meta.get("arm_quantized") and aten_target(node.target) is aten.pow.Tensor_Tensor:
        return "quantized pow with a tensor exponent is not lowered (a constant exponent is a TABLE)"
    return None


@register_op("pow", [aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor], support=_pow_support, quant=Quant.TABLE)
def lower_pow(ctx: LoweringContext, node: Node) -> Value:
    base, exponent = ctx.val(node.args[0]), node.args[1]
    if isinstance(exponent, (int, float)) and float(exponent).is_integer() and abs(exponent) <= 64:
        return _integer_power(ctx, node, base, int(exponent))
    # TOSA POW is defined for base >= 0 only; torch gives NaN there for non-integer exponents anyway
    return elementwise(ctx, node, Op.POW, [base, ctx.val(exponent)])


def _integer_power(ctx: LoweringContext, node: Node, base: Value, n: int) -> Value:
    """x ** n by repeated squaring (and RECIPROCAL for n < 0): exact for negative bases, which TOSA
    POW rejects, and cheaper than POW for the usual x ** 2."""
    shape, dtype = ctx.out_meta(node)
    if n == 0:
        return ctx.constant(torch.ones(shape, dtype=dtype))
    (t,), perm = ctx.broadcast([base], len(shape), tosa_dtype(dtype))
    result, square, k = None, t, abs(n)
    while k:
        if k & 1:
            result = square if result is None else ctx.b.op(Op.MUL, [result, square, mul_shift(ctx)],
                                                            t.shape, t.dtype)
        k >>= 1
        if k:
            square = ctx.b.op(Op.MUL, [square, square, mul_shift(ctx)], t.shape, t.dtype)
    if n < 0:
        result = ctx.b.op(Op.RECIPROCAL, [result], t.shape, t.dtype)
    return ctx.from_tensor(result, shape, dtype, perm)


_COMPARE = {
    aten.eq.Tensor: (Op.EQUAL, False), aten.eq.Scalar: (Op.EQUAL, False),
    aten.gt.Tensor: (Op.GREATER, False), aten.gt.Scalar: (Op.GREATER, False),
    aten.ge.Tensor: (Op.GREATER_EQUAL, False), aten.ge.Scalar: (Op.GREATER_EQUAL, False),
    aten.lt.Tensor: (Op.GREATER, True), aten.lt.Scalar: (Op.GREATER, True),
    aten.le.Tensor: (Op.GREATER_EQUAL, True), aten.le.Scalar: (Op.GREATER_EQUAL, True),
}


def _promoted(node: Node) -> torch.dtype:
    dtypes = [a.meta["val"].dtype for a in node.args[:2] if isinstance(a, Node)]
    return dtypes[0] if len(set(dtypes)) == 1 else torch.result_type(*[a.meta["val"] for a in node.args[:2]
                                                                        if isinstance(a, Node)])


def _compare_support(node: Node, spec) -> str | None:
    dtypes = {a.meta["val"].dtype for a in node.args[:2] if isinstance(a, Node)}
    if len(dtypes) > 1:
        return f"comparison of mixed dtypes {sorted(map(str, dtypes))} is not lowered"
    return None


@register_op("compare", list(_COMPARE), support=_compare_support)
def lower_compare(ctx: LoweringContext, node: Node) -> Value:
    op, swap = _COMPARE[aten_target(node.target)]
    a, b = ctx.val(node.args[0]), ctx.val(node.args[1])
    if swap:
        a, b = b, a
    return elementwise(ctx, node, op, [a, b], in_dtype=_promoted(node))


@register_op("ne", [aten.ne.Tensor, aten.ne.Scalar], support=_compare_support)
def lower_ne(ctx: LoweringContext, node: Node) -> Value:
    eq = elementwise(ctx, node, Op.EQUAL, [ctx.val(a) for a in node.args[:2]], in_dtype=_promoted(node))
    return ctx.emit(Op.LOGICAL_NOT, [eq.tensor], eq.shape, torch.bool, eq.perm)


_LOGICAL = {aten.logical_and.default: Op.LOGICAL_AND, aten.logical_or.default: Op.LOGICAL_OR,
            aten.logical_xor.default: Op.LOGICAL_XOR}
_NOT = (aten.logical_not.default, aten.bitwise_not.default)  # `~mask` is bitwise_not on bool


def _logical_support(node: Node, spec) -> str | None:
    dtypes = {a.meta["val"].dtype for a in node.args[:2] if isinstance(a, Node)}
    if dtypes != {torch.bool}:
        return f"logical/bitwise ops on {sorted(map(str, dtypes))} are not lowered (only on bool tensors)"
    return None


@register_op("logical", list(_LOGICAL) + list(_NOT), support=_logical_support)
def lower_logical(ctx: LoweringContext, node: Node) -> Value:
    target = aten_target(node.target)
    if target in _NOT:
        v = ctx.val(node.args[0])
        shape, _ = ctx.out_meta(node)
        return ctx.emit(Op.LOGICAL_NOT, [ctx.tensor(v, None, tosa_dtype(torch.bool))], shape, torch.bool,
                        None if v.is_const else v.perm)
    return elementwise(ctx, node, _LOGICAL[target], [ctx.val(a) for a in node.args[:2]])


@register_op("where", [aten.where.self])
def lower_where(ctx: LoweringContext, node: Node) -> Value:
    shape, dtype = ctx.out_meta(node)
    cond, a, b = (ctx.with_rank(ctx.val(x), len(shape)) for x in node.args[:3])
    perm = ctx.common_layout([cond, a, b], len(shape))
    tensors = [ctx.tensor(cond, perm, tosa_dtype(torch.bool))]
    tensors += [ctx.tensor(v, perm, tosa_dtype(dtype)) for v in (a, b)]
    return ctx.emit(Op.SELECT, tensors, shape, dtype, perm)


# -- INT rules: inputs requantized to a shared int32 scale, the result is an int32 accumulator -------
_ADD_HEADROOM = 2**20  # int32 units per input LSB: keeps fractional precision of the smaller scale


def _int32_operands(ctx: LoweringContext, node: Node, unit_of) -> tuple[list[Value], float]:
    from ..quantized import rescale

    values = [ctx.val(a) for a in node.args[:2]]
    if any(v.qparams is None for v in values):
        raise ValueError(f"{node.name}: quantized arithmetic needs quantized operands")
    unit = unit_of([float(v.qparams.scale) for v in values])
    out = []
    for v in values:
        t = rescale(ctx.b, ctx.tensor(v), float(v.qparams.scale) / unit if unit_of is not _product_unit
                    else 1.0, v.qparams.zero_point, 0, DType.INT32)
        out.append(Value(v.shape, torch.int32, tensor=t, perm=v.perm if not v.is_const else
                         tuple(range(v.rank))))
    return out, unit


def _product_unit(scales: list[float]) -> float:
    return scales[0] * scales[1]


@register_int_rule("add")
@register_int_rule("sub")
def lower_add_sub_int(ctx: LoweringContext, node: Node) -> Value:
    """Both operands to int32 in units of max(scale) / 2^20, then ADD/SUB: an int32 accumulator."""
    from .quantize import accumulator_value

    target = aten_target(node.target)
    if arg(node, 2, "alpha", 1) != 1 or target is aten.rsub.Scalar:
        raise ValueError("quantized add/sub with alpha or rsub is not lowered")
    wide = any(ctx.val(a).qparams and ctx.val(a).qparams.dtype == torch.int16 for a in node.args[:2])
    headroom = 2**13 if wide else _ADD_HEADROOM  # int16 codes need 17 bits: keep the sum inside int32
    (a, b), unit = _int32_operands(ctx, node, lambda s: max(s) / headroom)
    shape, _ = ctx.out_meta(node)
    (ta, tb), perm = ctx.broadcast([a, b], len(shape), DType.INT32)
    op = Op.ADD if target in (aten.add.Tensor, aten.add.Scalar) else Op.SUB
    t = ctx.b.op(op, [ta, tb], layout.apply(shape, perm), DType.INT32)
    return accumulator_value(shape, torch.int32, t, perm, unit)


@register_int_rule("mul")
def lower_mul_int(ctx: LoweringContext, node: Node) -> Value:
    """(qa - za) * (qb - zb) in int32: an accumulator with scale sa * sb."""
    from .quantize import accumulator_value

    (a, b), unit = _int32_operands(ctx, node, _product_unit)
    shape, _ = ctx.out_meta(node)
    (ta, tb), perm = ctx.broadcast([a, b], len(shape), DType.INT32)
    t = ctx.b.op(Op.MUL, [ta, tb, mul_shift(ctx)], layout.apply(shape, perm), DType.INT32)
    return accumulator_value(shape, torch.int32, t, perm, unit)
