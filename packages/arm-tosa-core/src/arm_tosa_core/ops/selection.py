"""Selection in the INT profile: minimum, maximum and clamp with tensor bounds on quantized values.

The quantizer gives every operand and the result one shared set of qparams (`Quant.SHARED`), so the
order of the int8 codes is the order of the real values and min/max of codes is the code of min/max.
TOSA 1.0 has MAXIMUM/MINIMUM for int32 only: the codes are CAST to int32 and back (exact both ways).
FP: clamp(x, lo, hi) with tensor bounds is MINIMUM(MAXIMUM(x, lo), hi), as torch defines it.
"""

from __future__ import annotations

import torch
from torch.fx import Node

from ..builder import DType, Op, tosa_dtype
from ..context import LoweringContext, Value
from ..helpers.common import COMPARE_OPS, arg, nan_propagate
from ..registry import Quant, aten_target, register_int_rule, register_op

aten = torch.ops.aten


def _extreme(ctx: LoweringContext, op: Op, a: Value, b: Value, work: DType, dtype: torch.dtype) -> Value:
    """MAXIMUM/MINIMUM of two values broadcast to a shared rank, in TOSA type `work`."""
    rank = max(a.rank, b.rank)
    (ta, tb), perm = ctx.broadcast([a, b], rank, work)
    shape = torch.broadcast_shapes(a.shape, b.shape)
    return ctx.emit(op, [ta, tb], shape, dtype, perm, nan_propagate(), tosa_type=work)


def _as_int32(ctx: LoweringContext, v: Value) -> Value:
    """An int8/int16 quantized value's codes as int32 (CAST: exact)."""
    if v.is_const:
        return ctx.constant(v.const.to(torch.int32))
    t = ctx.b.op(Op.CAST, [ctx.tensor(v)], v.tensor.shape, DType.INT32)
    return Value(v.shape, torch.int32, tensor=t, perm=v.perm)


def _quantized_extremes(ctx: LoweringContext, node: Node, steps: list[tuple[Op, Node]]) -> Value:
    """Apply MAXIMUM/MINIMUM steps to node.args[0] on int32 codes, then CAST back to the storage type."""
    x = ctx.val(node.args[0])
    q = x.qparams
    others = [ctx.val(other) for _, other in steps]
    if q is None or any(v.qparams is None or not v.qparams.same_as(q) for v in others):
        raise ValueError(f"{node.name}: quantized min/max needs operands with one shared quantization")
    acc = _as_int32(ctx, x)
    for (op, _), other in zip(steps, others, strict=True):
        acc = _extreme(ctx, op, acc, _as_int32(ctx, other), DType.INT32, torch.int32)
    shape, _ = ctx.out_meta(node)
    t = ctx.tensor(acc)
    if tuple(acc.shape) != tuple(shape):  # the result broadcasts over a bound's shape
        raise ValueError(f"{node.name}: result shape {acc.shape}, expected {shape}")
    out = ctx.b.op(Op.CAST, [t], t.shape, tosa_dtype(q.dtype))
    return Value(tuple(shape), q.dtype, tensor=out, perm=acc.perm, qparams=q)


@register_int_rule("maximum")
def lower_maximum_int(ctx: LoweringContext, node: Node) -> Value:
    return _quantized_extremes(ctx, node, [(Op.MAXIMUM, node.args[1])])


@register_int_rule("minimum")
def lower_minimum_int(ctx: LoweringContext, node: Node) -> Value:
    return _quantized_extremes(ctx, node, [(Op.MINIMUM, node.args[1])])


def _bounds(node: Node) -> list[tuple[Op, Node]]:
    lo, hi = arg(node, 1, "min"), arg(node, 2, "max")
    return [(op, b) for op, b in ((Op.MAXIMUM, lo), (Op.MINIMUM, hi)) if b is not None]


def _clamp_tensor_support(node: Node, spec) -> str | None:
    dtypes = {a.meta["val"].dtype for a in node.all_input_nodes}
    if len(dtypes) > 1:
        return f"clamp with bounds of another dtype ({sorted(map(str, dtypes))}) is not lowered"
    return None


@register_op("clamp_tensor", [aten.clamp.Tensor], support=_clamp_tensor_support, quant=Quant.SHARED, folds_constants=True)
def lower_clamp_tensor(ctx: LoweringContext, node: Node) -> Value:
    shape, dtype = ctx.out_meta(node)
    acc = ctx.val(node.args[0])
    for op, bound in _bounds(node):
        acc = _extreme(ctx, op, acc, ctx.val(bound), tosa_dtype(dtype), dtype)
    return acc


@register_int_rule("clamp_tensor")
def lower_clamp_tensor_int(ctx: LoweringContext, node: Node) -> Value:
    return _quantized_extremes(ctx, node, _bounds(node))


def _threshold_compare(ctx: LoweringContext, node: Node, x: Value, number: float) -> Value:
    """`x <op> number` on x's codes: torch's comparison evaluated on every code's dequantized value
    (as fake-quant computes it) gives the codes for which it holds, one threshold (or one code for ==)."""
    q, target = x.qparams, aten_target(node.target)
    codes = torch.arange(q.qmin, q.qmax + 1)
    holds = target(((codes.to(torch.float32) - q.zero_point) * float(q.scale)), number)
    x32 = _as_int32(ctx, x)
    name = target.__name__.split(".")[0]
    true_codes = codes[holds]
    if name in ("gt", "ge"):
        k, op, first = (int(true_codes.min()) if len(true_codes) else q.qmax + 1), Op.GREATER_EQUAL, True
    elif name in ("lt", "le"):
        k, op, first = (int(true_codes.max()) if len(true_codes) else q.qmin - 1), Op.GREATER_EQUAL, False
    else:  # eq / ne: the code(s) equal to the number (none when it lies between two codes)
        equal = codes[~holds] if name == "ne" else true_codes
        k, op, first = (int(equal[0]) if len(equal) else q.qmax + 1), Op.EQUAL, True
    k_value = ctx.constant(torch.full([1] * x.rank, k, dtype=torch.int32))
    shape, _ = ctx.out_meta(node)
    a, b = (x32, k_value) if first else (k_value, x32)
    (ta, tb), perm = ctx.broadcast([a, b], len(shape), DType.INT32)
    out = ctx.emit(op, [ta, tb], shape, torch.bool, perm)
    return ctx.emit(Op.LOGICAL_NOT, [out.tensor], shape, torch.bool, perm) if name == "ne" else out


@register_int_rule("compare")
@register_int_rule("ne")
def lower_compare_int(ctx: LoweringContext, node: Node) -> Value:
    """Comparisons of quantized values: with shared qparams the codes compare as the real values do
    (on int32: TOSA 1.0 compares int32 only); against a number, one threshold code."""
    x, other = ctx.val(node.args[0]), node.args[1]
    if not isinstance(other, Node):
        return _threshold_compare(ctx, node, x, other)
    y = ctx.val(other)
    if x.qparams is None or y.qparams is None or not x.qparams.same_as(y.qparams):
        raise ValueError(f"{node.name}: quantized comparison needs operands with one shared quantization")
    target = aten_target(node.target)
    op, swap = COMPARE_OPS.get(target, (Op.EQUAL, False))
    a, b = _as_int32(ctx, x), _as_int32(ctx, y)
    a, b = (b, a) if swap else (a, b)
    shape, _ = ctx.out_meta(node)
    (ta, tb), perm = ctx.broadcast([a, b], len(shape), DType.INT32)
    out = ctx.emit(op, [ta, tb], shape, torch.bool, perm)
    if target in (aten.ne.Tensor, aten.ne.Scalar):
        return ctx.emit(Op.LOGICAL_NOT, [out.tensor], shape, torch.bool, perm)
    return out
