"""Quantize/dequantize folding at the edges of the quantized region.

The INT rules shared by whole quant kinds (SHARED, TABLE, ACTIVATION's clamp) live in
`helpers/intmath.py`; families of other kinds bring their own INT rule (`register_int_rule`).
"""

from __future__ import annotations

import torch
from torch.fx import Node

from ..builder import DType, Op
from ..context import LoweringContext, Value
from ..helpers.gather import gather_dim
from ..helpers.intmath import requantize
from ..helpers.qparams import QParams, qd, qparams_of
from ..registry import bounded_integer_cast, register_op

aten = torch.ops.aten


def _const_of(ctx: LoweringContext):
    def resolve(node):
        v = ctx.values.get(node)
        return v.const if isinstance(v, Value) and v.is_const else None

    return resolve


def _boundary_support(node: Node, spec) -> str | None:
    if not node.meta.get("arm_quantized"):
        return "quantize/dequantize at the float boundary of the program stays on the CPU"
    for a in node.args[1:3]:
        if isinstance(a, Node) and "dequantize_per_channel" not in str(node.target):
            return "dynamic quantization (scales computed at run time) is not lowered"
    return None


@register_op("quantize", sorted({qd.quantize_per_tensor.default}, key=str), support=_boundary_support,
             profiles=("INT",), quant_boundary=True)
def lower_quantize(ctx: LoweringContext, node: Node) -> Value:
    value = ctx.val(node.args[0])
    target = qparams_of(node)
    bounds = bounded_integer_cast(node.args[0]) if value.qparams is None else None
    if bounds is not None:
        return _quantize_bounded_integers(ctx, node, *bounds)
    if value.qparams is None:
        raise ValueError(f"{node.name}: quantizing a float value inside a partition is not lowered")
    if value.is_const:
        return requantize_constant(ctx, node, value, target)
    out = requantize(ctx, value, target)
    shape, dtype = ctx.out_meta(node)
    return Value(shape, dtype, tensor=ctx.tensor(out), perm=out.perm, qparams=target)


def _quantize_bounded_integers(ctx: LoweringContext, node: Node, lo: int, hi: int) -> Value:
    """quantize(float(p)) for integers p in [lo, hi] (`bounded_integer_cast`): the codes of lo..hi
    computed at compile time with the node's own op, then one GATHER at p - lo. A RESCALE of p would
    round ties (p / scale = 63.5 for p = 7 at scale 14 / 127) up where torch rounds half to even, and a
    1-code step in a RoPE position moves its cos/sin by many codes."""
    cast = node.args[0]
    reals = torch.arange(lo, hi + 1).to(cast.meta["val"].dtype)
    codes = node.target(reals, *node.args[1:], **node.kwargs)
    index = ctx.val(cast.args[0])
    if lo:  # int32 ADD: the index is p - lo (positions proved by a cache index are in [-size, size))
        t = index.tensor
        index = ctx.emit(Op.ADD, [t, ctx.scalar(-lo, DType.INT32, len(t.shape))], index.shape, index.dtype,
                         index.perm)
    picked = gather_dim(ctx, ctx.constant(codes), 0, index)
    shape, _ = ctx.out_meta(node)
    out = ctx.reshape(picked, shape)
    out.qparams = qparams_of(node)
    return out


def requantize_constant(ctx: LoweringContext, node: Node, value: Value, target: QParams) -> Value:
    """A quantized constant (e.g. a view of a weight) re-expressed with `target` qparams at compile time,
    rounding like torch's quantize_per_tensor (half to even)."""
    q = value.qparams
    shape, dtype = ctx.out_meta(node)
    if q.same_as(target):
        return Value(shape, dtype, const=value.const, qparams=target)
    if q.per_channel:
        raise ValueError(f"{node.name}: requantizing a per-channel constant is not lowered")
    real = (value.const.double() - q.zero_point) * float(q.scale)
    codes = torch.clamp(torch.round(real / float(target.scale)) + target.zero_point, target.qmin, target.qmax)
    return Value(shape, dtype, const=codes.to(target.dtype).reshape(shape), qparams=target)


@register_op("dequantize", sorted({qd.dequantize_per_tensor.default, qd.dequantize_per_channel.default},
                                  key=str), support=_boundary_support, profiles=("INT",), quant_boundary=True)
def lower_dequantize(ctx: LoweringContext, node: Node) -> Value:
    value = ctx.val(node.args[0])
    q = qparams_of(node, _const_of(ctx))
    shape, dtype = ctx.out_meta(node)
    dtype = value.dtype  # stays in its integer storage type; qparams say what it means
    if value.is_const:
        return Value(shape, dtype, const=value.const, qparams=q)
    # the same tensor under its dequantize's qparams: it shares the layouts already made of it (PT2E gives
    # each consumer its own dequantize; without sharing, each would TRANSPOSE the same bytes again)
    return Value(shape, dtype, tensor=value.tensor, perm=value.perm, qparams=q, _layouts=value._layouts)
