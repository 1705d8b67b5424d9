"""Rounding division and remainders: div(rounding_mode="floor"/"trunc"), floor_divide (exir spells it
div.Tensor_mode), remainder and fmod.

Float: q = round(a * (1/b)) with FLOOR (or CEIL below zero for trunc), then corrected by one where the
reciprocal's rounding put a/b on the wrong side of an integer (a - q b then has the wrong sign or
magnitude), so whole-number quotients such as 6 / 3 are exact. Integers (int32): TOSA INTDIV truncates;
floor division subtracts one where the remainder is non-zero and its sign differs from the divisor's
(comparisons on int32 need the INT profile). remainder = a - b floor(a / b), fmod = a - b trunc(a / b).
INT: with a scalar divisor each is a function of one quantized input, so a TABLE.
"""

from __future__ import annotations

import torch
from torch.fx import Node

from ..builder import Op
from ..context import LoweringContext, Value
from ..helpers.common import arg
from ..helpers.composed import Fn, trunc
from ..registry import Quant, aten_target, is_compile_time_constant, register_op

aten = torch.ops.aten

_MODES = (aten.div.Tensor_mode, aten.div.Scalar_mode)
_REMAINDERS = (aten.remainder.Tensor, aten.remainder.Scalar, aten.fmod.Tensor, aten.fmod.Scalar)


def _rounding(node: Node) -> str:
    """"floor" or "trunc": the rounding of the quotient this node needs."""
    target = aten_target(node.target)
    if target in _MODES:
        return node.kwargs.get("rounding_mode") or arg(node, 2, "rounding_mode")
    return "trunc" if target in (aten.fmod.Tensor, aten.fmod.Scalar) else "floor"


def _runtime_operands(node: Node) -> list[Node]:
    """The operands that are not numbers: tensors other than single-element compile-time constants
    (exir lifts the 3.0 of x // 3.0 into a tensor constant: still a number to the INT rule's TABLE)."""
    return [a for a in node.args[:2] if isinstance(a, Node) and not (
        is_compile_time_constant(a) and a.meta["val"].numel() == 1)]


def _support(node: Node, spec) -> str | None:
    target = aten_target(node.target)
    if target in _MODES and _rounding(node) not in ("floor", "trunc"):
        return "division without a rounding mode is lowered by the div family"
    if node.meta.get("arm_quantized") and len(_runtime_operands(node)) > 1:
        return ("quantized division/remainder by a tensor is not lowered: TOSA INT has no division, and "
                "only a function of one quantized input becomes a TABLE (divide by a number instead)")
    # a compile-time divisor is converted to the result's dtype while lowering (x // 7 divides by int64 7)
    dtypes = {a.meta["val"].dtype for a in node.args[:2] if isinstance(a, Node) and not is_compile_time_constant(a)}
    if len(dtypes) > 1:
        return f"division of mixed dtypes {sorted(map(str, dtypes))} is not lowered"
    if node.meta["val"].dtype == torch.int64 or node.meta["val"].dtype == torch.int32:
        if not spec.support_integer() and _rounding(node) == "floor":
            return ("integer floor division/remainder needs int32 comparisons, which only the INT profile "
                    f"has; under {spec} it runs on the CPU")
    return None


def _int_quotient(f: Fn, a: Value, b: Value, floor: bool) -> Value:
    q = f.op(Op.INTDIV, a, b)
    if not floor:
        return q
    r = f.sub(a, f.mul(q, b))
    inexact = f.cmp(Op.EQUAL, r, 0)
    sign_b = f.ctx.constant(b.const < 0) if b.is_const else f.cmp(Op.GREATER, 0, b)
    signs_differ = f.op(Op.LOGICAL_XOR, f.cmp(Op.GREATER, 0, r), sign_b,
                        out_dtype=torch.bool, in_dtype=torch.bool)
    step = f.op(Op.LOGICAL_AND, f.op(Op.LOGICAL_NOT, inexact, out_dtype=torch.bool, in_dtype=torch.bool),
                signs_differ, out_dtype=torch.bool, in_dtype=torch.bool)
    return f.select(step, f.sub(q, 1), q)


def _float_quotient(f: Fn, a: Value, b: Value, floor: bool) -> Value:
    recip = f.c(1.0 / float(b.const.item()), b.rank) if b.is_const and b.const.numel() == 1 else \
        f.unary(Op.RECIPROCAL, b)
    ratio = f.mul(a, recip)
    q = f.unary(Op.FLOOR, ratio) if floor else trunc(f, ratio)
    # one step of correction: r = a - q b must lie in [0, b) (floor) or share a's sign and be < |b|
    r = f.sub(a, f.mul(q, b))
    sign_b = f.ctx.constant(b.const < 0) if b.is_const else f.cmp(Op.GREATER, 0.0, b)
    abs_b = f.ctx.constant(b.const.abs()) if b.is_const else f.unary(Op.ABS, b)
    if floor:  # r on the other side of 0 from b: q was one too large; |r| >= |b| on b's side: too small
        too_big = f.op(Op.LOGICAL_AND, f.op(Op.LOGICAL_XOR, f.cmp(Op.GREATER, 0.0, r), sign_b,
                                            out_dtype=torch.bool, in_dtype=torch.bool),
                       f.op(Op.LOGICAL_NOT, f.cmp(Op.EQUAL, r, 0.0), out_dtype=torch.bool, in_dtype=torch.bool),
                       out_dtype=torch.bool, in_dtype=torch.bool)
        too_small = f.cmp(Op.GREATER_EQUAL, f.unary(Op.ABS, r), abs_b)
        too_small = f.op(Op.LOGICAL_AND, too_small, f.op(Op.LOGICAL_NOT, too_big, out_dtype=torch.bool,
                                                         in_dtype=torch.bool),
                         out_dtype=torch.bool, in_dtype=torch.bool)
        q = f.select(too_big, f.sub(q, 1.0), f.select(too_small, f.add(q, 1.0), q))
    else:  # trunc: |r| >= |b| means |q| one too small, in the direction of a / b's sign
        too_small = f.cmp(Op.GREATER_EQUAL, f.unary(Op.ABS, r), abs_b)
        step = f.select(f.op(Op.LOGICAL_XOR, f.cmp(Op.GREATER, 0.0, a), sign_b, out_dtype=torch.bool,
                             in_dtype=torch.bool), -1.0, 1.0)
        q = f.select(too_small, f.add(q, step), q)
    return q


# floor_divide is kept whole (preserve): exir would decompose it after the INT region is marked
# float_params: a lifted constant divisor joins the quantized region unquantized (the TABLE folds it)
@register_op("div_rounding", [*_MODES, *_REMAINDERS, aten.floor_divide.default], support=_support,
             quant=Quant.TABLE, preserve=True, float_params=True, fp_index_math=True, folds_constants=True)
def lower_div_rounding(ctx: LoweringContext, node: Node) -> Value:
    a, b = ctx.val(node.args[0]), ctx.val(node.args[1])
    shape, dtype = ctx.out_meta(node)
    if a.is_const and b.is_const:
        return ctx.constant(aten_target(node.target)(*[ctx.val(x).const for x in node.args[:2]],
                                                     **node.kwargs).to(dtype))
    f = Fn(ctx, Value(shape, dtype))
    if b.is_const:  # at full rank, so that compile-time facts about it (sign, |b|) broadcast
        b = ctx.constant(b.const.to(dtype).reshape([1] * (len(shape) - b.rank) + list(b.shape)))
    floor = _rounding(node) == "floor"
    integer = not dtype.is_floating_point
    q = _int_quotient(f, a, b, floor) if integer else _float_quotient(f, a, b, floor)
    if aten_target(node.target) not in _REMAINDERS:
        return q
    return f.sub(a, f.mul(q, b))

