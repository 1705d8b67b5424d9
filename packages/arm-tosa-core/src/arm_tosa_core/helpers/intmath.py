"""Integer arithmetic of the INT profile: RESCALE, accumulators, and the INT rules shared by whole quant
kinds (SHARED: data movement on the integer codes as is; TABLE: a lookup computed by evaluating the op on
every code; clamps in the output's integer range)."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch.fx import Node

from ..builder import DType, Op, T, scalar_bytes, tosa_dtype
from ..context import LoweringContext, Value
from .common import aten_target, nan_propagate
from .qparams import QParams, is_quantize, qparams_of
from .table16 import MAX_LSB, int16_table


def weight_type(ctx: LoweringContext, w: Value, input_type: DType) -> DType:
    """The TOSA type of a convolution's weight operand: INT4 for 4-bit weights (int8 codes in -8..7, e.g.
    `get_symmetric_a8w4_quantization_config`) under a spec with "+int4" (EXT-INT4: CONV2D, CONV3D,
    DEPTHWISE_CONV2D and TRANSPOSE_CONV2D take int8 x int4; the serializer packs two per byte), else the
    tensor's own type (int8 holding the same values: exact, only less compact). EXT-INT4 pairs int4 weights
    with int8 inputs only, so an int16 input keeps int8 weights."""
    q = w.qparams
    if (w.is_const and q is not None and q.dtype == torch.int8 and q.qmin >= -8 and q.qmax <= 7
            and input_type == DType.INT8 and ctx.spec.support_extension("int4")):
        return DType.INT4
    return tosa_dtype(w.dtype) if w.is_const else w.tensor.dtype


def multiplier_shift(scale: float, scale32: bool = True) -> tuple[int, int]:
    """TOSA's (multiplier, shift) with multiplier * 2^-shift == scale, shift in [2, 62]."""
    if scale <= 0:
        return 0, 2
    bits = 31 if scale32 else 15
    mantissa, exponent = math.frexp(scale)
    multiplier = round(mantissa * (1 << bits))
    shift = bits - exponent
    if multiplier == 1 << bits:
        multiplier //= 2
        shift -= 1
    while shift > 62:  # tiny scales: lose precision rather than break the range rule
        multiplier >>= 1
        shift -= 1
    while shift < 2:
        raise ValueError(f"rescale factor {scale} is too large for TOSA RESCALE")
    return multiplier, shift


def rescale(b, x: T, scale, in_zp: int, out_zp: int, out_dtype: DType,
            input_unsigned: bool = False) -> T:
    """Emit RESCALE: out = round(scale * (x - in_zp)) + out_zp, saturated to `out_dtype`.

    `scale` may be an array (per channel along the tensor's last axis).
    """
    import tosa_serializer as ts

    scales = np.atleast_1d(np.asarray(scale, dtype=np.float64))
    per_part = _rescale_concat_parts(b, x, scales, in_zp, out_zp, out_dtype, input_unsigned)
    if per_part is not None:
        return per_part
    folded = _fold_widening(b, x, scales, in_zp, out_dtype)
    if folded is not None:  # RESCALE(acc -> int8) then RESCALE(int8 -> int32): one RESCALE from acc
        x, scales, in_zp = folded
    per_channel = scales.size > 1
    scale32 = x.dtype != DType.INT48
    pairs = [multiplier_shift(float(s), scale32) for s in scales]
    mult = b.const(np.array([p[0] for p in pairs]), DType.INT32 if scale32 else DType.INT16)
    shift = b.const(np.array([p[1] for p in pairs]), DType.INT8)
    zps = [b.const(np.array([in_zp]), x.dtype if x.dtype != DType.INT48 else DType.INT48),
           b.const(np.array([out_zp]), out_dtype)]
    out = b.op(Op.RESCALE, [x, mult, shift, *zps], x.shape, out_dtype, scale32,
               ts.RoundingMode.SINGLE_ROUND, per_channel, input_unsigned, False)
    b.rescales[out.name] = (x, scales, in_zp, out_zp)
    return out


def _rescale_concat_parts(b, x: T, scales: np.ndarray, in_zp: int, out_zp: int, out_dtype: DType,
                          input_unsigned: bool) -> T | None:
    """A per-channel RESCALE of a CONCAT on the channel (last) axis, possibly seen through a RESHAPE that
    keeps that axis (a grouped conv1d), emitted as one RESCALE per concatenated part, then the CONCAT.

    Exact: RESCALE is elementwise per channel, so slicing the scales with the parts changes no value.
    Why: vela 5.2 (U55/U65) and regor (U85) fuse a RESCALE that follows a CONCAT into every part's
    producer, with the multipliers of the first part's channels for every part (read from the scale
    stream of a grouped convolution's command stream, which is one CONV per group and a CONCAT: group 1
    came out up to 8 LSB off on the NPU simulator). Rescaled parts give them one RESCALE per producer."""
    if scales.size <= 1:
        return None
    inner, src = x, b.producer(x)
    if src is not None and src.op == Op.RESHAPE and src.inputs[0].shape[-1:] == x.shape[-1:]:
        inner = src.inputs[0]
        src = b.producer(inner)
    if src is None or src.op != Op.CONCAT or src.attr_args[0] != len(inner.shape) - 1:
        return None
    parts, start = [], 0
    for part in src.inputs:
        channels = part.shape[-1]
        parts.append(rescale(b, part, scales[start:start + channels], in_zp, out_zp, out_dtype, input_unsigned))
        start += channels
    joined = b.op(Op.CONCAT, parts, inner.shape, out_dtype, len(inner.shape) - 1)
    return joined if inner is x else b.reshape(joined, x.shape)


def _fold_widening(b, x: T, scales: np.ndarray, in_zp: int, out_dtype: DType):
    """When `x` is itself a RESCALE of a wide accumulator and this RESCALE widens back to int32, return
    (accumulator, combined scales, its zero point). The int8 intermediate is skipped (it stays in the
    graph only if something else reads it), so the result may differ from a two-step rescale by the
    intermediate's rounding: at most one output LSB."""
    if not b.fold_rescales or out_dtype != DType.INT32 or x.dtype not in (DType.INT8, DType.INT16):
        return None
    info = b.rescales.get(x.name)
    if info is None:
        return None
    source, first_scales, first_in_zp, first_out_zp = info
    if source.dtype not in (DType.INT32, DType.INT48) or first_out_zp != in_zp:
        return None
    if scales.size > 1 and first_scales.size > 1 and scales.size != first_scales.size:
        return None
    return source, first_scales * scales, first_in_zp


def requantize(ctx, value, target: QParams):
    """`value` (int8/int16 with qparams, or an int32 accumulator) expressed with `target` qparams."""
    q = value.qparams
    if q is None:
        raise ValueError("value is not quantized")
    if q.same_as(target):
        return value
    t = ctx.tensor(value)
    scale = np.asarray(q.scale, dtype=np.float64) / float(target.scale)
    if q.per_channel and (q.axis is None or value.perm[-1] != q.axis):
        t = ctx.tensor(value, _channel_last(value.perm, q.axis))
        perm = _channel_last(value.perm, q.axis)
    else:
        perm = value.perm
    out = rescale(ctx.b, t, scale, q.zero_point, target.zero_point, tosa_dtype(target.dtype))
    return Value(value.shape, value.dtype, tensor=out, perm=perm, qparams=target)


def _channel_last(perm, axis):
    rest = [p for p in perm if p != axis]
    return tuple(rest + [axis])


def to_int32(ctx, value, scale_factor: float = 1.0):
    """Rescale a quantized int8/int16 value to int32 with the zero point removed.

    Returns (tensor, scale of one int32 unit). `scale_factor` > 1 keeps fractional precision
    (e.g. 2^20 for additions).
    """
    q = value.qparams
    t = ctx.tensor(value)
    out = rescale(ctx.b, t, scale_factor, q.zero_point, 0, DType.INT32)
    return out, float(q.scale) / scale_factor


def acc_type(dtype: DType) -> DType:
    return DType.INT32 if dtype in (DType.INT8,) else DType.INT48 if dtype == DType.INT16 else DType.FP32


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
