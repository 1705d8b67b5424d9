"""Quantize/dequantize folding and the INT rules shared by whole quant kinds.

Kinds with a generic integer lowering: SHARED (data movement runs on int8 as is), TABLE (a 256-entry
lookup computed by evaluating the op itself on every int8 code), ACTIVATION (a clamp in the output's
integer range, dropped when the range already implies it). Families of other kinds bring their own
INT rule (`register_int_rule`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch.fx import Node

from ..builder import DType, Op, scalar_bytes, tosa_dtype
from ..context import LoweringContext, Value
from ..quantized import QParams, is_quantize, qd, qparams_of, requantize
from ..registry import aten_target, register_op
from .elementwise import nan_propagate

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
    if value.qparams is None:
        raise ValueError(f"{node.name}: quantizing a float value inside a partition is not lowered")
    if value.is_const:
        return requantize_constant(ctx, node, value, target)
    out = requantize(ctx, value, target)
    shape, dtype = ctx.out_meta(node)
    return Value(shape, dtype, tensor=ctx.tensor(out), perm=out.perm, qparams=target)


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
    return Value(shape, dtype, tensor=value.tensor, perm=value.perm, qparams=q)


# -- generic INT rules by kind ----------------------------------------------------------------
def output_qparams(node: Node) -> QParams:
    """The qparams a node's result must have: those of the quantize node consuming it."""
    for user in node.users:
        if is_quantize(user):
            return qparams_of(user)
    raise ValueError(f"{node.name} has no quantize user; it is not in a quantized region")


def lower_shared(ctx: LoweringContext, node: Node, fp_rule) -> Value:
    """Data movement on quantized values: the FP rule runs on the int8 tensors; qparams pass through."""
    inputs = [ctx.val(a) for a in node.all_input_nodes]
    q = next((v.qparams for v in inputs if v.qparams is not None), None)
    if q is not None:
        node.meta["arm_storage_dtype"] = q.dtype
    result = fp_rule(ctx, node)
    for r in result if isinstance(result, tuple) else (result,):
        if r is not None:
            r.qparams = q
    return result


def _table_operand(ctx: LoweringContext, node: Node):
    """(the one quantized operand's Value, `real -> the node's op on it`, what that function computes
    besides the operand: its position and the other arguments, table16's cache key). The other
    arguments are numbers or compile-time constants: exir lifts the number of `x // 3.0` or `2.0 // x`
    into a tensor constant, whose value is passed as is (so the operand need not come first)."""
    index = next(i for i, a in enumerate(node.args) if isinstance(a, Node) and not ctx.val(a).is_const)
    args = [ctx.val(a).const if isinstance(a, Node) and i != index else a for i, a in enumerate(node.args)]
    target = aten_target(node.target)
    fn = lambda real: target(*args[:index], real, *args[index + 1:], **node.kwargs)  # noqa: E731
    return ctx.val(node.args[index]), fn, (index, *args[:index], *args[index + 1:])


def lower_table(ctx: LoweringContext, node: Node, fp_rule=None) -> Value:
    """A unary op as TOSA TABLE: out[q] = quantize(f(dequantize(q))) for all 256 int8 codes (int16: see
    `_table_int16`)."""
    x, fn, fn_args = _table_operand(ctx, node)
    qin, qout = x.qparams, output_qparams(node)
    if qin.dtype == torch.int16 and qout.dtype == torch.int16:
        return _table_int16(ctx, node, x, qout, fn, fn_args)
    if qin.dtype != torch.int8 or qout.dtype != torch.int8:
        raise ValueError(f"TABLE lowering takes int8 -> int8 or int16 -> int16, not {qin.dtype} -> {qout.dtype}")
    codes = torch.arange(-128, 128, dtype=torch.float32)
    real = (codes - qin.zero_point) * float(qin.scale)
    y = fn(real).float()
    table = torch.clamp(torch.round(y / float(qout.scale)) + qout.zero_point, qout.qmin, qout.qmax)
    t_table = ctx.b.const(table.to(torch.int8).numpy(), DType.INT8)
    shape, dtype = ctx.out_meta(node)
    out = ctx.emit(Op.TABLE, [ctx.tensor(x), t_table], shape, dtype, x.perm, tosa_type=DType.INT8)
    out.qparams = qout
    return out


def _table_int16(ctx: LoweringContext, node: Node, x: Value, qout: QParams, fn, fn_args: tuple) -> Value:
    """int16 TABLE (TOSA EXT-INT16): 513 int16 entries at every 128th input code; TOSA interpolates
    between neighbours into an int32 with 7 fractional bits, and a RESCALE (x 1/128) rounds that to the
    output's int16 codes. The entries are built and checked on every code by `table16` (the support
    rule keeps a node whose table would be more than 1 LSB off fake-quant on the CPU)."""
    from ..quantized import rescale
    from .table16 import MAX_LSB, int16_table

    table, error = int16_table(node, x.qparams, qout, fn, fn_args)
    if error > MAX_LSB:
        raise ValueError(f"the int16 TABLE would be {error:.0f} LSB off fake-quant")
    t_table = ctx.b.const(table.numpy(), DType.INT16)
    xt = ctx.tensor(x)
    interpolated = ctx.b.op(Op.TABLE, [xt, t_table], xt.shape, DType.INT32)
    out = rescale(ctx.b, interpolated, 1 / 128, 0, 0, DType.INT16)  # entries hold the zero point
    shape, dtype = ctx.out_meta(node)
    return Value(shape, dtype, tensor=out, perm=x.perm, qparams=qout)


def clamp_quantized(ctx: LoweringContext, node: Node, lo: float | None, hi: float | None) -> Value:
    """A clamp on a quantized value: RESCALE an accumulator to the output qparams, then CLAMP in the
    integer domain; the CLAMP is dropped when the output range already lies inside [lo, hi]."""
    x = ctx.val(node.args[0])
    qout = output_qparams(node)
    x = requantize(ctx, x, qout)
    scale = float(qout.scale)
    qlo = qout.qmin if lo is None else max(qout.qmin, int(np.round(lo / scale)) + qout.zero_point)
    qhi = qout.qmax if hi is None else min(qout.qmax, int(np.round(hi / scale)) + qout.zero_point)
    shape, dtype = ctx.out_meta(node)
    if qlo <= qout.qmin and qhi >= qout.qmax:
        t = ctx.tensor(x)
        # the RESCALE's saturation now does the clamp: it must never be folded away
        ctx.b.rescales.pop(t.name, None)
        return Value(shape, dtype, tensor=t, perm=x.perm, qparams=qout)
    tdt = tosa_dtype(qout.dtype)
    out = ctx.emit(Op.CLAMP, [ctx.tensor(x)], shape, dtype, x.perm, scalar_bytes(qlo, tdt),
                   scalar_bytes(qhi, tdt), nan_propagate(), tosa_type=tdt)
    out.qparams = qout
    return out


def accumulator_value(shape, dtype, tensor, perm, scale, axis=None) -> Value:
    """An int32 result whose real value is `scale * q` (scale may be per channel along `axis`)."""
    q = QParams.accumulator(scale)
    if axis is not None:
        q = QParams(q.scale, 0, torch.int32, q.qmin, q.qmax, axis)
    return Value(tuple(shape), dtype, tensor=tensor, perm=tuple(perm), qparams=q)



def bias_for_accumulator(ctx: LoweringContext, bias: Node | None, acc_scale) -> Value | None:
    """A quantized constant bias as int32 codes at the accumulator's scale (None without a bias).

    PT2E derives a bias' scale from the input and weight observers of the op it feeds; a bias shared by
    two ops (a GRU's weights at every time step) gets one of those scales, so the codes are re-expressed
    here (rounded to nearest) when they differ from `acc_scale` (per channel)."""
    if bias is None:
        return None
    value = ctx.val(bias)
    if not value.is_const or value.qparams is None:
        return None
    scale = np.broadcast_to(np.asarray(acc_scale, dtype=np.float64), (value.const.numel(),))
    b_scale = np.broadcast_to(np.asarray(value.qparams.scale, dtype=np.float64), scale.shape)
    if np.allclose(b_scale, scale, rtol=1e-6, atol=0):
        return None
    real = value.const.double().reshape(-1) * torch.from_numpy(b_scale.copy())
    codes = torch.round(real / torch.from_numpy(scale.copy())).clamp(-(2**31) + 1, 2**31 - 1)
    return ctx.constant(codes.to(torch.int32).reshape(value.const.shape))
