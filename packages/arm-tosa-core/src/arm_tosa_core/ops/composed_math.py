"""Elementwise math TOSA 1.0 has no operator for, composed from the ones it has (FP profile).

TOSA 1.0 has EXP, LOG, SIN, COS, TANH, ERF, RECIPROCAL, FLOOR, CEIL, POW and SELECT but no tan,
hyperbolic, inverse trigonometric, rounding-to-nearest, sign or erfinv operator. Each rule below
writes the function in those, with a stated accuracy (all far inside 1e-4 relative in float32):
- tan = sin / cos; sinh, cosh from one EXP and its RECIPROCAL;
- asin/acos: Abramowitz & Stegun 4.4.46 (|error| <= 2e-8 on [0, 1]), odd/even symmetry for x < 0;
- atan: A&S 4.4.49 on [0, 1] (|error| <= 2e-8), atan(x) = pi/2 - atan(1/x) above 1;
- asinh/acosh/atanh: their logarithm forms (asinh on |x|, so large negative x does not cancel);
- erfinv: Giles' single-precision approximation (relative error below 4e-7 on (-1, 1));
- round: half to even, as torch rounds.
In the INT profile all of them are a TABLE of the op itself (`Quant.TABLE`), exact against fake-quant.
"""

from __future__ import annotations

import math

import torch
from torch.fx import Node

from ..builder import Op
from ..context import LoweringContext, Value
from ..helpers.common import arg
from ..helpers.composed import Fn, _round_half_even, trunc
from ..registry import Quant, aten_target, register_op

aten = torch.ops.aten


# Abramowitz & Stegun 4.4.46 (asin/acos) and 4.4.49 (atan, in powers of x^2)
_ASIN = [1.5707963050, -0.2145988016, 0.0889789874, -0.0501743046, 0.0308918810, -0.0170881256,
         0.0066700901, -0.0012624911]
_ATAN = [1.0, -0.3333314528, 0.1999355085, -0.1420889944, 0.1065626393, -0.0752896400, 0.0429096138,
         -0.0161657367, 0.0028662257]
# Giles, "Approximating the erfinv function" (GPU Computing Gems), single precision
_ERFINV_CENTRAL = [1.50140941, 0.246640727, -0.00417768164, -0.00125372503, 0.00021858087,
                   -4.39150654e-06, -3.5233877e-06, 3.43273939e-07, 2.81022636e-08]
_ERFINV_TAIL = [2.83297682, 1.00167406, 0.00943887047, -0.0076224613, 0.00573950773, -0.00367342844,
                0.00134934322, 0.000100950558, -0.000200214257]


def _acos_of_abs(f: Fn, a: Value) -> Value:
    """acos(a) for 0 <= a <= 1 (A&S 4.4.46)."""
    return f.mul(f.sqrt(f.sub(1.0, a)), f.poly(a, _ASIN))


def _atan_of_abs(f: Fn, a: Value) -> Value:
    big = f.cmp(Op.GREATER, a, 1.0)
    t = f.select(big, f.unary(Op.RECIPROCAL, a), a)
    p = f.mul(t, f.poly(f.mul(t, t), _ATAN))
    return f.select(big, f.sub(math.pi / 2, p), p)


def _erfinv(f: Fn, x: Value) -> Value:
    w = f.sub(0.0, f.unary(Op.LOG, f.mul(f.sub(1.0, x), f.add(1.0, x))))
    central = f.poly(f.sub(w, 2.5), _ERFINV_CENTRAL)
    tail = f.poly(f.sub(f.sqrt(w), 3.0), _ERFINV_TAIL)
    return f.mul(f.select(f.cmp(Op.GREATER, 5.0, w), central, tail), x)


def _sign(f: Fn, x: Value) -> Value:
    return f.select(f.cmp(Op.GREATER, x, 0.0), 1.0, f.select(f.cmp(Op.GREATER, 0.0, x), -1.0, x))


def _sinh(f: Fn, x: Value) -> Value:
    e = f.unary(Op.EXP, x)
    return f.mul(f.sub(e, f.unary(Op.RECIPROCAL, e)), 0.5)


def _cosh(f: Fn, x: Value) -> Value:
    e = f.unary(Op.EXP, x)
    return f.mul(f.add(e, f.unary(Op.RECIPROCAL, e)), 0.5)


def _asin(f: Fn, x: Value) -> Value:
    return f.odd(x, f.sub(math.pi / 2, _acos_of_abs(f, f.unary(Op.ABS, x))))


def _acos(f: Fn, x: Value) -> Value:
    r = _acos_of_abs(f, f.unary(Op.ABS, x))
    return f.select(f.cmp(Op.GREATER, 0.0, x), f.sub(math.pi, r), r)


def _asinh(f: Fn, x: Value) -> Value:
    a = f.unary(Op.ABS, x)
    return f.odd(x, f.unary(Op.LOG, f.add(a, f.sqrt(f.add(f.mul(a, a), 1.0)))))


_FORMULAS = {
    aten.tan.default: lambda f, x: f.mul(f.unary(Op.SIN, x), f.unary(Op.RECIPROCAL, f.unary(Op.COS, x))),
    aten.sinh.default: _sinh,
    aten.cosh.default: _cosh,
    aten.asin.default: _asin,
    aten.acos.default: _acos,
    aten.atan.default: lambda f, x: f.odd(x, _atan_of_abs(f, f.unary(Op.ABS, x))),
    aten.asinh.default: _asinh,
    aten.acosh.default: lambda f, x: f.unary(Op.LOG, f.add(x, f.sqrt(f.sub(f.mul(x, x), 1.0)))),
    aten.atanh.default: lambda f, x: f.mul(f.unary(Op.LOG, f.mul(f.add(1.0, x), f.unary(
        Op.RECIPROCAL, f.sub(1.0, x)))), 0.5),
    aten.expm1.default: lambda f, x: f.sub(f.unary(Op.EXP, x), 1.0),
    aten.log1p.default: lambda f, x: f.unary(Op.LOG, f.add(x, 1.0)),
    aten.log10.default: lambda f, x: f.mul(f.unary(Op.LOG, x), 1 / math.log(10)),
    aten.log2.default: lambda f, x: f.mul(f.unary(Op.LOG, x), 1 / math.log(2)),
    aten.round.default: _round_half_even,
    aten.trunc.default: trunc,
    aten.erfinv.default: _erfinv,
    aten.sign.default: _sign,
}


def _logit(f: Fn, x: Value, eps: float | None) -> Value:
    """log(x / (1 - x)), x first clamped to [eps, 1 - eps] when eps is given (torch.logit)."""
    if eps is not None:
        x = f.select(f.cmp(Op.GREATER, eps, x), eps, f.select(f.cmp(Op.GREATER, x, 1.0 - eps), 1.0 - eps, x))
    return f.unary(Op.LOG, f.mul(x, f.unary(Op.RECIPROCAL, f.sub(1.0, x))))


def _math_support(node: Node, spec) -> str | None:
    dtype = node.meta["val"].dtype
    if aten_target(node.target) is aten.sign.default:
        if dtype == torch.bool:
            return "sign of a bool tensor is the tensor itself; not lowered"
        return None
    if not dtype.is_floating_point:
        return f"{aten_target(node.target).__name__} of {dtype} tensors is not lowered (float only)"
    return None


# logit is not core ATen: kept whole (preserve) so that INT sees one op, a TABLE
@register_op("unary_composed", [*_FORMULAS, aten.logit.default], support=_math_support, quant=Quant.TABLE,
             preserve=True, fp32_opmath=True)
def lower_unary_composed(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    if x.is_const:
        return ctx.constant(aten_target(node.target)(x.const, *node.args[1:], **node.kwargs))
    if aten_target(node.target) is aten.logit.default:
        return _logit(Fn(ctx, x), x, arg(node, 1, "eps"))
    if not x.dtype.is_floating_point:  # integer sign (INT profile): same SELECTs in the integer type
        return _sign(Fn(ctx, x), x)
    return _FORMULAS[aten_target(node.target)](Fn(ctx, x), x)
