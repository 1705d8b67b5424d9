"""Elementwise arithmetic, min/max, pow and comparisons."""

from __future__ import annotations

import math

import torch
from torch.fx import Node

from .. import layout
from ..builder import DType, Op, T, tosa_dtype
from ..context import LoweringContext, Value
from ..errors import LoweringError
from ..helpers.common import COMPARE_OPS, arg, elementwise, mul_shift, nan_propagate
from ..helpers.composed import Fn
from ..helpers.intmath import accumulator_value, rescale
from ..registry import (
    INDEX_INTEGERS,
    OpEntry,
    Quant,
    aten_target,
    exact_in_float32,
    is_compile_time_constant,
    register_int_rule,
    register_op,
)
from ..specification import TosaSpecification

aten = torch.ops.aten


def _scaled(ctx: LoweringContext, value: Value, factor) -> Value:
    """`value * factor` for add/sub's alpha (folded when the value is constant)."""
    if factor in (None, 1):
        return value
    if value.is_const:
        return ctx.constant(value.const * factor)
    scale = ctx.scalar(factor, value.tensor.dtype, value.rank)
    t = ctx.b.op(Op.MUL, [value.tensor, scale, mul_shift(ctx)], value.tensor.shape, value.tensor.dtype)
    return ctx.from_tensor(t, value.shape, value.dtype, value.perm)


def index_broadcast_rule(node: Node, entry: OpEntry, spec: TosaSpecification) -> str | None:
    """add/sub/mul on int32 under TOSA FP: fine unless a run-time int32 operand of lower rank must be
    broadcast (its RESHAPE on int32 is INT-profile only)."""
    rank = len(node.meta["val"].shape)
    for a in node.all_input_nodes:
        val = a.meta.get("val")
        if val is not None and val.dtype in INDEX_INTEGERS and val.dim() != rank \
                and not is_compile_time_constant(a):
            return (f"{entry.name} broadcasting a rank-{val.dim()} {val.dtype} tensor to rank {rank} needs "
                    f"an int32 RESHAPE, which only the INT profile has; under {spec} it runs on the CPU")
    return None


# a broadcast int32 operand moves as float32 when its values are proved within +-2^24
_broadcast_or_float = exact_in_float32(index_broadcast_rule)


@register_op("add", [aten.add.Tensor, aten.add.Scalar], quant=Quant.BINARY, quant_aliases=[aten.add_.Tensor, aten.add_.Scalar],
             fp_index_math=True, fp_integer_rule=_broadcast_or_float, folds_constants=True, int64_arithmetic=True)
def lower_add(ctx: LoweringContext, node: Node) -> Value:
    a, b = ctx.val(node.args[0]), _scaled(ctx, ctx.val(node.args[1]), arg(node, 2, "alpha", 1))
    return elementwise(ctx, node, Op.ADD, [a, b])


def _sub_operands(node: Node) -> tuple:
    """(minuend, subtrahend) nodes/scalars of sub or rsub; alpha scales the subtrahend.

    rsub(self, other, alpha) is other - alpha * self (torch's `2 - x` and `torch.rsub`)."""
    first, second = node.args[0], node.args[1]
    return (second, first) if aten_target(node.target) in _RSUB else (first, second)


_RSUB = (aten.rsub.Scalar, aten.rsub.Tensor)


@register_op("sub", [aten.sub.Tensor, aten.sub.Scalar, aten.rsub.Scalar], quant=Quant.BINARY,
             quant_aliases=[aten.rsub.Tensor, aten.sub_.Tensor, aten.sub_.Scalar],
             fp_index_math=True, fp_integer_rule=_broadcast_or_float, folds_constants=True, int64_arithmetic=True)
def lower_sub(ctx: LoweringContext, node: Node) -> Value:
    minuend, subtrahend = _sub_operands(node)
    a, b = ctx.val(minuend), _scaled(ctx, ctx.val(subtrahend), arg(node, 2, "alpha", 1))
    return elementwise(ctx, node, Op.SUB, [a, b])


@register_op("mul", [aten.mul.Tensor, aten.mul.Scalar], quant=Quant.BINARY, quant_aliases=[aten.mul_.Tensor, aten.mul_.Scalar],
             fp_index_math=True, fp_integer_rule=_broadcast_or_float, folds_constants=True, int64_arithmetic=True)
def lower_mul(ctx: LoweringContext, node: Node) -> Value:
    a, b = ctx.val(node.args[0]), ctx.val(node.args[1])
    return elementwise(ctx, node, Op.MUL, [a, b], extra=[mul_shift(ctx)])


def _div_support(node: Node, spec) -> str | None:
    if not node.meta["val"].dtype.is_floating_point:
        return "integer division is not lowered; TOSA INTDIV truncates, torch floors"
    return None


# torch.div(..., rounding_mode=...) (the *_mode overloads) is the div_rounding family (division.py)
@register_op("div", [aten.div.Tensor, aten.div.Scalar],
             support=_div_support, profiles=("FP",), folds_constants=True)
def lower_div(ctx: LoweringContext, node: Node) -> Value:
    a, b = ctx.val(node.args[0]), ctx.val(node.args[1])
    if b.is_const:  # x / c -> x * (1/c), exact enough and one op
        return elementwise(ctx, node, Op.MUL, [a, ctx.constant(1.0 / b.const.float())],
                           extra=[mul_shift(ctx)])
    shape, dtype = ctx.out_meta(node)
    b = ctx.with_rank(b, len(shape))
    recip = ctx.emit(Op.RECIPROCAL, [ctx.tensor(b)], b.shape, dtype, b.perm)
    return elementwise(ctx, node, Op.MUL, [a, recip], extra=[mul_shift(ctx)])


@register_op("maximum", [aten.maximum.default], quant=Quant.SHARED, folds_constants=True)  # INT rule: selection.py
def lower_maximum(ctx: LoweringContext, node: Node) -> Value:
    return elementwise(ctx, node, Op.MAXIMUM, [ctx.val(a) for a in node.args[:2]], nan_propagate())


@register_op("minimum", [aten.minimum.default], quant=Quant.SHARED, folds_constants=True)
def lower_minimum(ctx: LoweringContext, node: Node) -> Value:
    return elementwise(ctx, node, Op.MINIMUM, [ctx.val(a) for a in node.args[:2]], nan_propagate())


def _pow_support(node: Node, spec) -> str | None:
    tensor_exponent = aten_target(node.target) is aten.pow.Tensor_Tensor
    if node.meta.get("arm_quantized"):
        if tensor_exponent:
            return "quantized pow with a tensor exponent is not lowered (a constant exponent is a TABLE)"
        return None
    if not node.meta["val"].dtype.is_floating_point:
        # TOSA POW and RECIPROCAL are float-only: integers get repeated MULs for a constant n >= 0
        exponent = node.args[1]
        if tensor_exponent or not _small_natural(exponent):
            return (f"integer pow with exponent {'a tensor' if tensor_exponent else exponent} is not lowered "
                    "(TOSA POW is float-only; integer powers lower for constant exponents 0..64)")
    return None


def _small_natural(exponent) -> bool:
    return isinstance(exponent, (int, float)) and float(exponent).is_integer() and 0 <= exponent <= 64


@register_op("pow", [aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor], support=_pow_support, quant=Quant.TABLE, folds_constants=True)
def lower_pow(ctx: LoweringContext, node: Node) -> Value:
    base, exponent = ctx.val(node.args[0]), node.args[1]
    if isinstance(exponent, (int, float)) and float(exponent).is_integer() and abs(exponent) <= 64:
        return _integer_power(ctx, node, base, int(exponent))
    shape, _ = ctx.out_meta(node)
    if not shape:  # a 0-d result (a full-reduction norm): constants are at least rank 1, so work at [1]
        base1 = ctx.reshape(base, (1,))
        exp1 = ctx.reshape(ctx.val(exponent), (1,)) if isinstance(exponent, Node) else exponent
        return ctx.reshape(_float_power(ctx, base1, exp1), ())
    return _float_power(ctx, base, ctx.val(exponent) if isinstance(exponent, Node) else exponent)


def _float_power(ctx: LoweringContext, base: Value, exponent: Value | float) -> Value:
    """torch.pow (C's pow) for floats. The reference model runs TOSA POW only for a finite base > 0
    and a finite exponent (anything else is UNPREDICTABLE), so POW sees those, with 1 in place of
    the rest, and SELECTs give torch's values elsewhere:
    - |x| ** y where |x| is 0 or inf, or y is +-inf: 1 for |x| == 1, else inf when |x| > 1 and
      y > 0 or |x| < 1 and y < 0, else 0;
    - x < 0: that magnitude negated for an odd integer y (an infinite y counts as even), NaN for a
      non-integer y (but -inf ** y is inf ** y, except for a constant y of +-0.5, which torch
      computes as sqrt / rsqrt);
    - NaN in, NaN out, but x ** 0 and 1 ** y are 1.
    The sign of a zero base is not kept (torch gives -inf for -0.0 ** -1, this inf)."""
    f, nan, inf = Fn(ctx, base), float("nan"), float("inf")

    def both(a: Value, b: Value, op: Op = Op.LOGICAL_AND) -> Value:
        return f.op(op, a, b, out_dtype=torch.bool, in_dtype=torch.bool)

    size = f.unary(Op.ABS, base)
    regular = both(f.cmp(Op.GREATER, size, 0.0), f.cmp(Op.GREATER, inf, size))  # NaN: False
    big = f.cmp(Op.GREATER, size, 1.0)
    nan_base = f.op(Op.LOGICAL_NOT, f.cmp(Op.EQUAL, base, base), out_dtype=torch.bool, in_dtype=torch.bool)
    if isinstance(exponent, Value):
        finite = f.cmp(Op.GREATER, inf, f.unary(Op.ABS, exponent))  # NaN: False
        y = f.select(finite, exponent, 1.0)
        power = f.op(Op.POW, f.select(regular, size, 1.0), y)
        limit = f.select(both(big, f.cmp(Op.GREATER, 0.0, exponent), Op.LOGICAL_XOR), inf, 0.0)
        magnitude = f.select(both(regular, finite), power, f.select(f.cmp(Op.EQUAL, size, 1.0), 1.0, limit))
        integer = f.cmp(Op.EQUAL, f.unary(Op.FLOOR, y), y)
        even = f.cmp(Op.EQUAL, f.mul(f.unary(Op.FLOOR, f.mul(y, 0.5)), 2.0), y)
        odd = both(both(integer, f.op(Op.LOGICAL_NOT, even, out_dtype=torch.bool, in_dtype=torch.bool)), finite)
        not_integer = both(f.op(Op.LOGICAL_NOT, integer, out_dtype=torch.bool, in_dtype=torch.bool),
                           f.op(Op.LOGICAL_NOT, f.cmp(Op.EQUAL, base, -inf), out_dtype=torch.bool,
                                in_dtype=torch.bool))
        negative = f.select(odd, f.sub(0.0, magnitude), f.select(not_integer, nan, magnitude))
        nan_in = both(nan_base, f.op(Op.LOGICAL_NOT, f.cmp(Op.EQUAL, exponent, exponent), out_dtype=torch.bool,
                                     in_dtype=torch.bool), Op.LOGICAL_OR)
        one = both(f.cmp(Op.EQUAL, exponent, 0.0), f.cmp(Op.EQUAL, base, 1.0), Op.LOGICAL_OR)
        result = f.select(nan_in, nan, f.select(f.cmp(Op.GREATER, 0.0, base), negative, magnitude))
        return f.select(one, 1.0, result)
    # a constant exponent: which of the cases above apply is known here
    y = float(exponent)
    if math.isnan(y):
        return f.select(f.cmp(Op.EQUAL, base, 1.0), 1.0, nan)
    grows, shrinks = (inf, 0.0) if y > 0 else (0.0, inf)  # |x| > 1 and |x| < 1, for 0, inf or y = +-inf
    if math.isinf(y):
        magnitude = f.select(f.cmp(Op.EQUAL, size, 1.0), 1.0, f.select(big, grows, shrinks))
    else:
        magnitude = f.select(regular, f.op(Op.POW, f.select(regular, size, 1.0), y), f.select(big, grows, shrinks))
    if math.isinf(y) or y % 2 == 0:
        negative = magnitude
    elif y.is_integer():
        negative = f.sub(0.0, magnitude)
    elif abs(y) == 0.5:  # torch computes these as sqrt / rsqrt: NaN for -inf too
        negative = nan
    else:
        negative = f.select(f.cmp(Op.EQUAL, base, -inf), magnitude, nan)
    return f.select(nan_base, nan, f.select(f.cmp(Op.GREATER, 0.0, base), negative, magnitude))


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


def _promoted(node: Node) -> torch.dtype:
    dtypes = [a.meta["val"].dtype for a in node.args[:2] if isinstance(a, Node)]
    return dtypes[0] if len(set(dtypes)) == 1 else torch.result_type(*[a.meta["val"] for a in node.args[:2]
                                                                        if isinstance(a, Node)])


_BOOL_EQUALITY = (aten.eq.Tensor, aten.eq.Scalar, aten.ne.Tensor, aten.ne.Scalar)


def _compare_support(node: Node, spec) -> str | None:
    dtypes = {a.meta["val"].dtype for a in node.args[:2] if isinstance(a, Node)}
    if len(dtypes) > 1:
        return f"comparison of mixed dtypes {sorted(map(str, dtypes))} is not lowered"
    if dtypes == {torch.bool}:  # TOSA compares numbers only: bool (in)equality is LOGICAL_XOR
        if aten_target(node.target) not in _BOOL_EQUALITY:
            return "ordering comparisons (<, <=, >, >=) of bool tensors are not lowered"
        if any(not isinstance(a, Node) and a not in (0, 1) for a in node.args[:2]):
            return "comparing a bool tensor with a number other than 0 or 1 is not lowered"
    return None


def _folded(ctx: LoweringContext, node: Node) -> Value | None:
    """The node computed at compile time when every tensor input is a constant, else None.

    Masks built from arange/full (causal masks) then cost no operator, and int32 index comparisons,
    which TOSA's FP profile lacks, never reach the graph (see `folds_constants`).
    """
    args = []
    for a in node.args:
        if isinstance(a, Node):
            value = ctx.val(a)
            if not value.is_const:
                return None
            a = value.const
        args.append(a)
    return ctx.constant(aten_target(node.target)(*args, **node.kwargs))


def _bool_equality(ctx: LoweringContext, node: Node, equal: bool) -> Value:
    """a == b / a != b on bool tensors: LOGICAL_XOR (TOSA's EQUAL takes no bool operands)."""
    xor = elementwise(ctx, node, Op.LOGICAL_XOR, [ctx.val(a) for a in node.args[:2]])
    return ctx.emit(Op.LOGICAL_NOT, [xor.tensor], xor.shape, torch.bool, xor.perm) if equal else xor


# INT: operands share qparams, the bool result is not quantized (`bool_result`); rule in selection.py
@register_op("compare", list(COMPARE_OPS), support=_compare_support, quant=Quant.SHARED, bool_result=True,
             folds_constants=True, fp_index_math=True, fp_integer_rule=exact_in_float32())  # FP: as float32
def lower_compare(ctx: LoweringContext, node: Node) -> Value:
    folded = _folded(ctx, node)
    if folded is not None:
        return folded
    if _promoted(node) == torch.bool:
        return _bool_equality(ctx, node, equal=True)
    op, swap = COMPARE_OPS[aten_target(node.target)]
    a, b = ctx.val(node.args[0]), ctx.val(node.args[1])
    if swap:
        a, b = b, a
    # integers compared as float32 under TOSA FP (`integer_float_math`) set the compute dtype
    return elementwise(ctx, node, op, [a, b], in_dtype=node.meta.get("arm_compute_dtype", _promoted(node)))


@register_op("ne", [aten.ne.Tensor, aten.ne.Scalar], support=_compare_support, quant=Quant.SHARED, bool_result=True,
             folds_constants=True)
def lower_ne(ctx: LoweringContext, node: Node) -> Value:
    folded = _folded(ctx, node)
    if folded is not None:
        return folded
    if _promoted(node) == torch.bool:
        return _bool_equality(ctx, node, equal=False)
    eq = elementwise(ctx, node, Op.EQUAL, [ctx.val(a) for a in node.args[:2]], in_dtype=_promoted(node))
    return ctx.emit(Op.LOGICAL_NOT, [eq.tensor], eq.shape, torch.bool, eq.perm)


_LOGICAL = {aten.logical_and.default: Op.LOGICAL_AND, aten.logical_or.default: Op.LOGICAL_OR,
            aten.logical_xor.default: Op.LOGICAL_XOR,
            # `mask & other` etc.: LOGICAL_* on bool tensors, BITWISE_* on integers (INT profile)
            aten.bitwise_and.Tensor: Op.LOGICAL_AND, aten.bitwise_or.Tensor: Op.LOGICAL_OR,
            aten.bitwise_xor.Tensor: Op.LOGICAL_XOR, aten.bitwise_and.Scalar: Op.LOGICAL_AND,
            aten.bitwise_or.Scalar: Op.LOGICAL_OR, aten.bitwise_xor.Scalar: Op.LOGICAL_XOR}
_NOT = (aten.logical_not.default, aten.bitwise_not.default)  # `~mask` is bitwise_not on bool
_BITWISE = {Op.LOGICAL_AND: Op.BITWISE_AND, Op.LOGICAL_OR: Op.BITWISE_OR, Op.LOGICAL_XOR: Op.BITWISE_XOR}
_BITWISE_INTS = (torch.int8, torch.int16, torch.int32)
_LOGICAL_NAMES = ("logical_and", "logical_or", "logical_xor", "logical_not")


def _logical_support(node: Node, spec) -> str | None:
    dtypes = {a.meta["val"].dtype for a in node.args[:2] if isinstance(a, Node)}
    if dtypes == {torch.bool}:
        return None
    if aten_target(node.target).__name__.split(".")[0] in _LOGICAL_NAMES:  # operands tested against 0
        if len(dtypes) == 1 and ((dtypes <= {torch.float16, torch.float32} and spec.support_float())
                                 or (dtypes <= set(_BITWISE_INTS) and spec.support_integer())):
            return None
        return (f"logical ops on {sorted(map(str, dtypes))} are not lowered under {spec} (bool, float under FP, "
                "int8/int16/int32 under INT: TOSA compares int32 only in its INT profile)")
    if len(dtypes) == 1 and dtypes <= set(_BITWISE_INTS):  # TOSA BITWISE_* are PRO-INT, int8/16/32
        return None if spec.support_integer() else (
            f"bitwise ops on {dtypes.pop()} tensors need the INT profile (TOSA 1.0 BITWISE_* are PRO-INT); "
            f"under {spec} they run on the CPU")
    return f"bitwise ops on {sorted(map(str, dtypes))} are not lowered (bool, int8, int16 or int32 only)"


@register_op("logical", list(_LOGICAL) + list(_NOT), support=_logical_support, folds_constants=True)
def lower_logical(ctx: LoweringContext, node: Node) -> Value:
    folded = _folded(ctx, node)
    if folded is not None:
        return folded
    target = aten_target(node.target)
    shape, dtype = ctx.out_meta(node)
    values = [ctx.val(a) for a in node.args[:2 if target not in _NOT else 1]]
    if dtype == torch.bool:  # logical_*(x, y) of numbers: x != 0, y != 0 first
        values = [v if v.dtype == torch.bool else _nonzero(ctx, v) for v in values]
    if target in _NOT:
        v = values[0]
        op = Op.LOGICAL_NOT if dtype == torch.bool else Op.BITWISE_NOT
        return ctx.emit(op, [ctx.tensor(v, None, tosa_dtype(dtype))], shape, dtype, None if v.is_const else v.perm)
    op = _LOGICAL[target] if dtype == torch.bool else _BITWISE[_LOGICAL[target]]
    return elementwise(ctx, node, op, values)


def _nonzero(ctx: LoweringContext, v: Value) -> Value:
    """v != 0 as a bool value (EQUAL to zero, then LOGICAL_NOT)."""
    if v.is_const:
        return ctx.constant(v.const != 0)
    zero = ctx.constant(torch.zeros([1] * v.rank, dtype=v.dtype))
    (t, z), perm = ctx.broadcast([v, zero], v.rank, v.tensor.dtype)
    eq = ctx.emit(Op.EQUAL, [t, z], v.shape, torch.bool, perm)
    return ctx.emit(Op.LOGICAL_NOT, [eq.tensor], v.shape, torch.bool, perm)


@register_op("where", [aten.where.self], quant=Quant.SHARED, folds_constants=True)
def lower_where(ctx: LoweringContext, node: Node) -> Value:
    folded = _folded(ctx, node)
    if folded is not None:
        return folded
    shape, dtype = ctx.out_meta(node)
    cond, a, b = (ctx.with_rank(ctx.val(x), len(shape)) for x in node.args[:3])
    perm = ctx.common_layout([cond, a, b], len(shape))
    tensors = [ctx.tensor(cond, perm, tosa_dtype(torch.bool))]
    tensors += [ctx.tensor(v, perm, tosa_dtype(dtype)) for v in (a, b)]
    return ctx.emit(Op.SELECT, tensors, shape, dtype, perm)


# -- INT rules: inputs requantized to a shared int32 scale, the result is an int32 accumulator -------
# int8 add/sub: the operand with the larger scale becomes int32 in units of (its scale) / 2^19 and the
# other one in the same units (a factor below 2^19). This is TFLite's elementwise-add scaling (inputs
# shifted left by 20, divided by twice the larger scale), the form vela folds, together with the
# RESCALE to int8 after the ADD, into one NPU elementwise op with input/output scaling.
_ADD_UNIT_BITS = 19
# int16 with zero points 0 (symmetric, the a16w8 form): 2^14 units per code of the larger scale, TFLite's
# int16 add scaling (left shift 15, divided by twice the larger scale), which vela folds into one
# elementwise op as for int8; on Ethos-U55 any other factor leaves each RESCALE a Mul/Add pass of its
# own (an int16 residual add cost 5.3x its int8 form). |code| <= 2^15, so each operand stays within
# 2^29 and the sum within int32. With a zero point a code minus it needs 17 bits: 2^13 units.
_WIDE_UNIT_BITS = 14
_WIDE_ZP_UNIT_BITS = 13
# Equal scales would give both operands the factor 2^19, which vela does not fold (it needs exactly one
# operand at 2^19). 2^19 - 2^-12 is multiplier 2^31 - 1, shift 12: for |x| < 2^11 (every int8 code minus
# its zero point) round(x * that) is exactly x * 2^19, so the results do not change.
_NEARLY_UNIT = 2.0**_ADD_UNIT_BITS - 2.0**-12


def _int32_operands(ctx: LoweringContext, node: Node, factors, operands=None) -> tuple[list[T], tuple[int, ...]]:
    """Both quantized operands RESCALEd to int32 (zero point removed, times their factor) in the
    layout the op runs in. A layout change happens on the int8 tensor, before the RESCALE: a quarter
    of the bytes, and vela can then fold the RESCALE into the elementwise op."""
    shape, _ = ctx.out_meta(node)
    values = _quantized_operands(node, ctx, operands)
    ranked = [ctx.with_rank(v, len(shape)) for v in values]
    perm = ctx.common_layout(ranked, len(shape))
    tensors = [rescale(ctx.b, ctx.tensor(r, perm), f, v.qparams.zero_point, 0, DType.INT32)
               for v, r, f in zip(values, ranked, factors, strict=True)]
    return tensors, perm


def _quantized_operands(node: Node, ctx: LoweringContext, operands=None) -> list[Value]:
    values = [ctx.val(a) for a in (node.args[:2] if operands is None else operands)]
    if any(v.qparams is None for v in values):
        raise ValueError(f"{node.name}: quantized arithmetic needs quantized operands")
    return values


def add_sub_factors(scales: list[float], wide: bool = False, zero_points: bool = False) -> tuple[list[float], float]:
    """(RESCALE factor per operand, scale of one int32 unit) for a quantized add/sub.

    The larger scale maps to exactly 2^19 units per code (int16 operands: 2^14, or 2^13 where a
    zero point is not 0, ``zero_points``); with equal int8 scales the second operand uses the
    equivalent factor `_NEARLY_UNIT` (see above).
    """
    bits = (_WIDE_ZP_UNIT_BITS if zero_points else _WIDE_UNIT_BITS) if wide else _ADD_UNIT_BITS
    unit = max(scales) / 2.0 ** bits
    factors = [s / unit for s in scales]
    if not wide and factors[0] == factors[1]:
        factors[1] = _NEARLY_UNIT
    return factors, unit


@register_int_rule("add")
@register_int_rule("sub")
def lower_add_sub_int(ctx: LoweringContext, node: Node) -> Value:
    """Both operands to int32 in a shared unit (see `add_sub_factors`), then ADD/SUB: an int32
    accumulator the following quantize RESCALEs to int8."""
    target = aten_target(node.target)
    subtract = target not in (aten.add.Tensor, aten.add.Scalar)
    operands = _sub_operands(node) if subtract else node.args[:2]
    alpha = float(arg(node, 2, "alpha", 1))
    if alpha == 0:
        raise LoweringError(f"quantized {target} with alpha=0 is not lowered (it ignores an operand)")
    if alpha < 0:  # a + (-2) * b == a - 2 * b: the RESCALE factors stay positive
        subtract, alpha = not subtract, -alpha
    values = _quantized_operands(node, ctx, operands)
    wide = any(v.qparams.dtype == torch.int16 for v in values)
    # alpha folds into the second operand's scale: alpha * s * (q - z) is (alpha * s) * (q - z)
    factors, unit = add_sub_factors([float(values[0].qparams.scale), float(values[1].qparams.scale) * alpha],
                                    wide, any(int(v.qparams.zero_point) != 0 for v in values))
    (ta, tb), perm = _int32_operands(ctx, node, factors, operands)
    shape, _ = ctx.out_meta(node)
    op = Op.SUB if subtract else Op.ADD
    t = ctx.b.op(op, [ta, tb], layout.apply(shape, perm), DType.INT32)
    return accumulator_value(shape, torch.int32, t, perm, unit)


@register_int_rule("mul")
def lower_mul_int(ctx: LoweringContext, node: Node) -> Value:
    """(qa - za) * (qb - zb) in int32: an accumulator with scale sa * sb."""
    values = _quantized_operands(node, ctx)
    (ta, tb), perm = _int32_operands(ctx, node, [1.0, 1.0])
    shape, _ = ctx.out_meta(node)
    t = ctx.b.op(Op.MUL, [ta, tb, mul_shift(ctx)], layout.apply(shape, perm), DType.INT32)
    unit = float(values[0].qparams.scale) * float(values[1].qparams.scale)
    return accumulator_value(shape, torch.int32, t, perm, unit)
