"""`Fn`: arithmetic on lowered float values, so a composed rule reads like its formula."""

from __future__ import annotations

import torch

from ..builder import Op, tosa_dtype
from ..context import LoweringContext, Value
from .common import mul_shift


class Fn:
    """Arithmetic on lowered values of one float dtype, so a rule reads like its formula."""

    def __init__(self, ctx: LoweringContext, like: Value) -> None:
        self.ctx, self.dtype = ctx, like.dtype

    def c(self, value: float, rank: int) -> Value:
        return self.ctx.constant(torch.full([1] * rank, value, dtype=self.dtype))

    def _as_value(self, v, rank: int) -> Value:
        return v if isinstance(v, Value) else self.c(float(v), rank)

    def op(self, op: Op, *args, extra=(), out_dtype=None, in_dtype=None) -> Value:
        rank = max(a.rank for a in args if isinstance(a, Value))
        values = [self._as_value(a, rank) for a in args]
        shape = torch.broadcast_shapes(*(v.shape for v in values))
        tensors, perm = self.ctx.broadcast(values, rank, tosa_dtype(in_dtype or self.dtype))
        return self.ctx.emit(op, tensors + list(extra), shape, out_dtype or self.dtype, perm)

    def add(self, a, b) -> Value:
        return self.op(Op.ADD, a, b)

    def sub(self, a, b) -> Value:
        return self.op(Op.SUB, a, b)

    def mul(self, a, b) -> Value:
        return self.op(Op.MUL, a, b, extra=[mul_shift(self.ctx)])

    def unary(self, op: Op, a: Value) -> Value:
        return self.op(op, a)

    def sqrt(self, a: Value) -> Value:  # TOSA 1.0 has no SQRT: POW(x, 0.5)
        return self.op(Op.POW, a, 0.5)

    def cmp(self, op: Op, a, b) -> Value:
        return self.op(op, a, b, out_dtype=torch.bool)

    def select(self, cond: Value, a, b) -> Value:
        rank = max(v.rank for v in (cond, a, b) if isinstance(v, Value))
        a, b = self._as_value(a, rank), self._as_value(b, rank)
        shape = torch.broadcast_shapes(cond.shape, a.shape, b.shape)
        values = [self.ctx.with_rank(v, rank) for v in (cond, a, b)]
        perm = self.ctx.common_layout(values, rank)
        tensors = [self.ctx.tensor(values[0], perm, tosa_dtype(torch.bool))]
        tensors += [self.ctx.tensor(v, perm, tosa_dtype(self.dtype)) for v in values[1:]]
        return self.ctx.emit(Op.SELECT, tensors, shape, self.dtype, perm)

    def poly(self, x: Value, coefficients: list[float]) -> Value:
        """c0 + c1 x + c2 x^2 + ... by Horner's rule."""
        acc = self.c(coefficients[-1], x.rank)
        for coefficient in reversed(coefficients[:-1]):
            acc = self.add(self.mul(acc, x), coefficient)
        return acc

    def odd(self, x: Value, magnitude: Value) -> Value:
        """f(x) from f(|x|) for an odd function: negated where x < 0."""
        return self.select(self.cmp(Op.GREATER, 0.0, x), self.sub(0.0, magnitude), magnitude)


def _round_half_even(f: Fn, x: Value) -> Value:
    """floor(x), plus one above the half and at a half whose floor is odd (x - floor(x) is exact)."""
    down = f.unary(Op.FLOOR, x)
    frac = f.sub(x, down)
    half = f.mul(down, 0.5)
    odd = f.cmp(Op.GREATER, half, f.unary(Op.FLOOR, half))
    tie_odd = f.op(Op.LOGICAL_AND, f.cmp(Op.EQUAL, frac, 0.5), odd, out_dtype=torch.bool, in_dtype=torch.bool)
    up = f.op(Op.LOGICAL_OR, f.cmp(Op.GREATER, frac, 0.5), tie_odd, out_dtype=torch.bool, in_dtype=torch.bool)
    return f.select(up, f.add(down, 1.0), down)


def trunc(f: Fn, x: Value) -> Value:
    """Round toward zero: CEIL below 0, FLOOR above."""
    return f.select(f.cmp(Op.GREATER, 0.0, x), f.unary(Op.CEIL, x), f.unary(Op.FLOOR, x))
