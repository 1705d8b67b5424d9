"""Pooling, run in NHWC like convolution: max_pool2d (dilated too) and avg_pool2d, FP and INT, and the
`pool` helper that adaptive pooling (`adaptive_pooling`) uses when the input divides evenly.

TOSA pools take the padding as an attribute and leave padded positions out of both the max and the
average divisor, and need `(size + pad_lo + pad_hi - kernel) % stride == 0`. The rule works out, per
spatial axis, how PyTorch's padding, ceil_mode and count_include_pad map onto that: which padding is
TOSA's (excluded), which must be an explicit zero PAD (counted), and how many trailing rows no window
reaches (sliced off). The output size always comes from the node's recorded shape.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch.fx import Node

from .. import layout
from ..builder import DType, Op, T
from ..context import LoweringContext, Value
from ..registry import Quant, aten_target, register_int_rule, register_op
from .common import arg
from .elementwise import nan_propagate
from .reductions import (
    float_only,
    scale,
    values_only,
)

aten = torch.ops.aten
NHWC = layout.NCHW_TO_NHWC
MAX_KERNEL = 8192  # TOSA level 8K: kernel and stride limits


def _pair(value, default) -> list[int]:
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        return list(default)
    value = list(value) if isinstance(value, (list, tuple)) else [value]
    return value * 2 if len(value) == 1 else value


class AxisPlan(NamedTuple):
    """How one spatial axis is padded: explicit zero PAD (counted), TOSA pad (excluded), rows dropped."""

    pad_lo: int
    pad_hi: int
    tosa_lo: int
    tosa_hi: int
    drop: int


def plan_axis(size: int, kernel: int, stride: int, padding: int, out: int, mode: str) -> AxisPlan:
    """Padding plan for one axis producing `out` windows.

    mode "exclude": padding never counts (max pool, count_include_pad=False);
    "include": torch's `padding` counts, the ceil_mode overhang past it does not (count_include_pad=True);
    "sum": everything is zero-padded so the TOSA average times kernel area is the window sum.
    """
    needed_hi = (out - 1) * stride + kernel - size - padding  # padding after the input, < kernel
    drop = max(0, -needed_hi)
    hi = max(0, needed_hi)
    if mode == "exclude":
        return AxisPlan(0, 0, padding, hi, drop)
    if mode == "include":
        counted = min(padding, hi)
        return AxisPlan(padding, counted, 0, hi - counted, drop)
    return AxisPlan(padding, hi, 0, 0, drop)


def _prepare_input(ctx: LoweringContext, x: Value, plans: list[AxisPlan]) -> T:
    """x in NHWC with unreachable trailing rows/columns sliced off and explicit zero padding added."""
    t = ctx.tensor(x, NHWC)
    zero = x.qparams.zero_point if x.qparams is not None else 0.0  # real 0 in the integer domain
    n, h, w, c = t.shape
    if plans[0].drop or plans[1].drop:
        size = [n, h - plans[0].drop, w - plans[1].drop, c]
        t = ctx.b.op(Op.SLICE, [t, ctx.b.shape_const([0, 0, 0, 0]), ctx.b.shape_const(size)], size, t.dtype)
    pads = [0, 0, plans[0].pad_lo, plans[0].pad_hi, plans[1].pad_lo, plans[1].pad_hi, 0, 0]
    if any(pads):
        n, h, w, c = t.shape
        shape = [n, h + pads[2] + pads[3], w + pads[4] + pads[5], c]
        t = ctx.b.op(Op.PAD, [t, ctx.b.shape_const(pads), ctx.scalar(zero, t.dtype, 1)], shape, t.dtype)
    return t


def pool(ctx: LoweringContext, node: Node, op: Op, kernel, stride, padding, mode: str) -> Value:
    """MAX_POOL2D / AVG_POOL2D of node.args[0] (rank 3 or 4) producing the node's output shape, in NHWC."""
    x = ctx.val(node.args[0])
    out_shape, dtype = ctx.out_meta(node)
    batched = x.rank == 4
    if not batched:
        x = ctx.reshape(x, (1, *x.shape))
    out4 = out_shape if batched else (1, *out_shape)
    plans = [plan_axis(x.shape[2 + i], kernel[i], stride[i], padding[i], out4[2 + i], mode) for i in range(2)]
    t = _prepare_input(ctx, x, plans)
    pads = [plans[0].tosa_lo, plans[0].tosa_hi, plans[1].tosa_lo, plans[1].tosa_hi]
    if op == Op.AVG_POOL2D and mode == "sum" and x.qparams is not None:
        return _window_sum_int(ctx, x, t, kernel, stride, pads, out4, out_shape, dtype, batched)
    if op == Op.AVG_POOL2D:
        # int8 averages keep the input's scale and zero point; integers accumulate in INT32
        quantized = x.qparams is not None
        zp = ctx.b.zero_point(t.dtype, x.qparams.zero_point if quantized else 0)
        y = ctx.b.op(op, [t, zp, zp], layout.apply(out4, NHWC), t.dtype, list(kernel), list(stride), pads,
                     DType.INT32 if quantized else DType.FP32)
    else:
        y = ctx.b.op(op, [t], layout.apply(out4, NHWC), t.dtype, list(kernel), list(stride), pads,
                     nan_propagate())
    value = Value(tuple(out4), dtype, tensor=y, perm=NHWC, qparams=x.qparams)
    return value if batched else ctx.reshape(value, out_shape)


def _window_sum_int(ctx: LoweringContext, x: Value, t: T, kernel, stride, pads, out4, out_shape, dtype,
                    batched: bool) -> Value:
    """Exact window sums of a quantized value: DEPTHWISE_CONV2D with all-ones int8 weights, an int32
    accumulator (INT48 for int16 input) in units of the input scale (TOSA's integer AVG_POOL2D would round
    the average first)."""
    from ..quantized import QParams

    channels = t.shape[3]
    acc = DType.INT48 if t.dtype == DType.INT16 else DType.INT32  # TOSA's int16 x int8 accumulator
    ones = ctx.b.const(torch.ones(kernel[0], kernel[1], channels, 1, dtype=torch.int8), DType.INT8)
    bias = ctx.b.const(torch.zeros(channels, dtype=torch.int64 if acc == DType.INT48 else torch.int32), acc)
    zps = [ctx.b.zero_point(t.dtype, x.qparams.zero_point), ctx.b.zero_point(DType.INT8)]
    y = ctx.b.op(Op.DEPTHWISE_CONV2D, [t, ones, bias, *zps], layout.apply(out4, NHWC), acc, pads,
                 list(stride), [1, 1], False, acc)
    value = Value(tuple(out4), torch.int32, tensor=y, perm=NHWC, qparams=QParams.accumulator(x.qparams.scale))
    return value if batched else ctx.reshape(value, out_shape)


def global_avg_pool(ctx: LoweringContext, x: Value) -> Value:
    """AVG_POOL2D over all of H x W of a rank-4 [N, C, H, W] value: [N, C, 1, 1], stored NHWC.

    A quantized value's average keeps its qparams (TOSA's integer average rounds once).
    """
    t = ctx.tensor(x, NHWC)
    n, h, w, c = t.shape
    quantized = x.qparams is not None
    zp = ctx.b.zero_point(t.dtype, x.qparams.zero_point if quantized else 0)
    y = ctx.b.op(Op.AVG_POOL2D, [t, zp, zp], [n, 1, 1, c], t.dtype, [h, w], [1, 1], [0, 0, 0, 0],
                 DType.INT32 if quantized else DType.FP32)
    return Value((n, c, 1, 1), x.dtype, tensor=y, perm=NHWC, qparams=x.qparams)


def _window_reason(node: Node, kernel, stride) -> str | None:
    rank = node.args[0].meta["val"].dim()
    if rank not in (3, 4):
        return f"pooling a rank-{rank} tensor is not lowered (only [N,]C,H,W)"
    if max(kernel) > MAX_KERNEL or max(stride) > MAX_KERNEL:
        return f"pooling kernel {kernel} / stride {stride} exceed the TOSA 8K level limit {MAX_KERNEL}"
    return None


def pool_window(node: Node) -> tuple[list[int], list[int], list[int]]:
    """(kernel, stride, padding) of max_pool2d/avg_pool2d; stride defaults to the kernel."""
    kernel = _pair(arg(node, 1, "kernel_size"), [1, 1])
    return kernel, _pair(arg(node, 2, "stride"), kernel), _pair(arg(node, 3, "padding"), [0, 0])


# -- max_pool2d --------------------------------------------------------------------------------


def _max_pool_support(node: Node, spec) -> str | None:
    kernel, stride, _ = pool_window(node)
    # MAX_POOL2D takes int8 in PRO-INT (int16 in EXT-INT16): plain integer tensors need no quantization
    reason = float_only(node, "max_pool2d", spec, (torch.int8, torch.int16)) or _window_reason(node, kernel, stride)
    if reason is None and aten_target(node.target) is aten.max_pool2d_with_indices.default:
        reason = values_only(node)
    return reason


@register_op("max_pool2d", [aten.max_pool2d_with_indices.default, aten.max_pool2d.default],
             support=_max_pool_support, quant=Quant.SHARED, preserve=True, preserve_for_speed=True)
def lower_max_pool2d(ctx: LoweringContext, node: Node):
    kernel, stride, padding = pool_window(node)
    dilation = _pair(arg(node, 4, "dilation"), [1, 1])
    if any(d != 1 for d in dilation):
        y = _dilated_max_pool(ctx, node, kernel, stride, padding, dilation)
    else:
        y = pool(ctx, node, Op.MAX_POOL2D, kernel, stride, padding, "exclude")
    if aten_target(node.target) is aten.max_pool2d_with_indices.default:
        return (y, None)  # the indices are refused by the support rule
    return y


def _gather_taps(ctx: LoweringContext, t: T, axis: int, kernel: int, stride: int, dilation: int,
                 out: int) -> T:
    """Along NHWC `axis` (1 = H, 2 = W): the `kernel` dilated taps of each of the `out` windows, side by
    side ([.., out * kernel, ..]), so that a MAX_POOL2D with kernel = stride = `kernel` finishes the job.

    Tap j of window i is row i * stride + j * dilation: a SLICE from j * dilation, and for stride > 1 a
    RESHAPE that puts each window's `stride` rows side by side and a SLICE that keeps the first."""
    n, h, w, c = t.shape
    taps = []
    for j in range(kernel):
        start = [0, 0, 0, 0]
        size = [n, h, w, c]
        start[axis], size[axis] = j * dilation, out * stride
        tap = ctx.b.op(Op.SLICE, [t, ctx.b.shape_const(start), ctx.b.shape_const(size)], size, t.dtype)
        if stride > 1:  # keep rows 0, stride, 2 * stride, ...
            wide = [n, out, stride * w, c] if axis == 1 else [n, h, out, stride * c]
            keep = [n, out, w, c] if axis == 1 else [n, h, out, c]
            tap = ctx.b.op(Op.SLICE, [ctx.b.reshape(tap, wide), ctx.b.shape_const([0, 0, 0, 0]),
                                      ctx.b.shape_const(keep)], keep, t.dtype)
        # one window's taps adjacent: [N, out, 1, W*C] (H) or [N*H, out, 1, C] (W), concatenated on axis 2
        taps.append(ctx.b.reshape(tap, [n, out, 1, w * c] if axis == 1 else [n * h, out, 1, c]))
    stacked = ctx.b.op(Op.CONCAT, taps, [*taps[0].shape[:2], kernel, taps[0].shape[3]], t.dtype, 2)
    return ctx.b.reshape(stacked, [n, out * kernel, w, c] if axis == 1 else [n, h, out * kernel, c])


def _dilated_max_pool(ctx: LoweringContext, node: Node, kernel, stride, padding, dilation) -> Value:
    """max_pool2d with dilation: padded with the lowest value, each dilated axis' taps gathered side by
    side (`_gather_taps`), then one MAX_POOL2D (kernel = stride = taps on those axes)."""
    x = ctx.val(node.args[0])
    out_shape, dtype = ctx.out_meta(node)
    batched = x.rank == 4
    if not batched:
        x = ctx.reshape(x, (1, *x.shape))
    out4 = out_shape if batched else (1, *out_shape)
    t = ctx.tensor(x, NHWC)
    lowest = x.qparams.qmin if x.qparams is not None else float("-inf")
    pads, pool_kernel, pool_stride = [0, 0], [], []
    for i in range(2):
        size, o = x.shape[2 + i], out4[2 + i]
        gathered = dilation[i] > 1
        needed = (kernel[i] - 1) * dilation[i] + (o * stride[i] if gathered else (o - 1) * stride[i] + 1)
        pads += [padding[i], max(0, needed - size - padding[i])]
        pool_kernel.append(kernel[i])
        pool_stride.append(kernel[i] if gathered else stride[i])
    n, h, w, c = t.shape
    if any(pads):
        shape = [n, h + pads[2] + pads[3], w + pads[4] + pads[5], c]
        t = ctx.b.op(Op.PAD, [t, ctx.b.shape_const([*pads, 0, 0]), ctx.scalar(lowest, t.dtype, 1)], shape,
                     t.dtype)
    for i in range(2):
        if dilation[i] > 1:
            t = _gather_taps(ctx, t, 1 + i, kernel[i], stride[i], dilation[i], out4[2 + i])
        else:  # MAX_POOL2D needs (size - kernel) % stride == 0: drop rows no window reads
            keep = (out4[2 + i] - 1) * stride[i] + kernel[i]
            if t.shape[1 + i] > keep:
                size = list(t.shape)
                size[1 + i] = keep
                t = ctx.b.op(Op.SLICE, [t, ctx.b.shape_const([0, 0, 0, 0]), ctx.b.shape_const(size)], size,
                             t.dtype)
    y = ctx.b.op(Op.MAX_POOL2D, [t], layout.apply(out4, NHWC), t.dtype, pool_kernel, pool_stride, [0, 0, 0, 0],
                 nan_propagate())
    value = Value(tuple(out4), dtype, tensor=y, perm=NHWC, qparams=x.qparams)
    return value if batched else ctx.reshape(value, out_shape)


# -- avg_pool2d --------------------------------------------------------------------------------
def _avg_pool_support(node: Node, spec) -> str | None:
    kernel, stride, _ = pool_window(node)
    divisor = arg(node, 6, "divisor_override")
    if divisor is not None and divisor <= 0:
        return f"avg_pool2d divisor_override={divisor} must be positive"
    return float_only(node, "avg_pool2d") or _window_reason(node, kernel, stride)


@register_op("avg_pool2d", [aten.avg_pool2d.default], support=_avg_pool_support, quant=Quant.REDUCE,
             quant_aliases=[aten.avg_pool1d.default], fp32_opmath=True)  # avg_pool1d: unsqueeze + avg_pool2d after export
def lower_avg_pool2d(ctx: LoweringContext, node: Node) -> Value:
    kernel, stride, padding = pool_window(node)
    divisor = arg(node, 6, "divisor_override")
    if divisor is not None:
        # every window position then holds data or a zero: average * area / divisor = sum / divisor
        y = pool(ctx, node, Op.AVG_POOL2D, kernel, stride, padding, "sum")
        return scale(ctx, y, kernel[0] * kernel[1] / divisor)
    mode = "include" if arg(node, 5, "count_include_pad", True) else "exclude"
    return pool(ctx, node, Op.AVG_POOL2D, kernel, stride, padding, mode)


def window_divisors(node: Node, in_hw, out_hw) -> torch.Tensor:
    """Torch's divisor of every output position of avg_pool2d (float64 [OH, OW]): its window's data
    count (an all-ones window sum) over its average of ones (that count / the divisor)."""
    kernel, stride, padding = pool_window(node)
    ones = torch.ones(1, 1, *in_hw, dtype=torch.float64)
    window = (kernel, stride, padding, arg(node, 4, "ceil_mode", False))
    valid = torch.nn.functional.avg_pool2d(ones, *window, True, 1)[0, 0]
    mean = torch.nn.functional.avg_pool2d(ones, *window, arg(node, 5, "count_include_pad", True))[0, 0]
    if list(valid.shape) != list(out_hw):
        raise ValueError(f"avg_pool2d windows {list(valid.shape)} do not match the recorded output {out_hw}")
    return torch.where(mean > 0, valid / mean.clamp_min(1e-30), torch.ones_like(valid))


RECIPROCAL_BITS = 30  # per-position 1/divisor as an int32 fraction of 2^30


def _divide_per_position(ctx: LoweringContext, y: Value, divisors: torch.Tensor, max_sum: int) -> Value:
    """y (an int32 window sum) / a per-position divisor: one int32 MUL by round(2^30 / divisor) with a
    shift that keeps the product in int32; the rest of 2^30 goes into the accumulator's scale, so the
    following RESCALE is still the only rounding that matters (the MUL's is ~2^-18 of an input LSB)."""
    from ..quantized import QParams

    shift = max(0, min(RECIPROCAL_BITS, max_sum.bit_length()))
    multipliers = torch.round(2.0**RECIPROCAL_BITS / divisors).to(torch.int32)
    c = ctx.constant(multipliers.reshape([1] * (y.rank - 2) + list(divisors.shape)))
    tensors, perm = ctx.broadcast([y, c], y.rank, DType.INT32)
    shift_t = ctx.b.const(np.full([1], shift, dtype=np.int8), DType.INT8)
    out = ctx.emit(Op.MUL, [*tensors, shift_t], y.shape, torch.int32, perm)
    out.qparams = QParams.accumulator(float(y.qparams.scale) * 2.0**shift / 2.0**RECIPROCAL_BITS)
    return out


@register_int_rule("avg_pool2d")
def lower_avg_pool2d_int(ctx: LoweringContext, node: Node) -> Value:
    """Quantized average pooling from the exact int32 window sum (see `_window_sum_int`), rounded once,
    by the following RESCALE (TOSA's int8 AVG_POOL2D rounds the average, then the RESCALE rounds
    again: up to 2 LSB off). Windows of one size fold 1/divisor into the sum's scale; windows that
    differ in size (ceil_mode overhang, count_include_pad=False with padding) multiply each position
    by its own reciprocal first (`_divide_per_position`)."""
    kernel, stride, padding = pool_window(node)
    divisor = arg(node, 6, "divisor_override")
    if divisor is None and not arg(node, 4, "ceil_mode", False) and (
            arg(node, 5, "count_include_pad", True) or not any(padding)):
        divisor = kernel[0] * kernel[1]  # every window divides by its area: an exact sum, one rounding
    x_qparams = ctx.val(node.args[0]).qparams
    y = pool(ctx, node, Op.AVG_POOL2D, kernel, stride, padding, "sum")
    if divisor is None:
        in_hw = list(node.args[0].meta["val"].shape[-2:])
        divisors = window_divisors(node, in_hw, list(y.shape[-2:]))
        if bool((divisors == divisors.flatten()[0]).all()):
            divisor = float(divisors.flatten()[0])
        else:
            max_sum = (x_qparams.qmax - x_qparams.qmin) * kernel[0] * kernel[1]
            return _divide_per_position(ctx, y, divisors, max_sum)
    from ..quantized import QParams

    # sum / divisor: the exact int32 window sum, with the divisor folded into its scale
    y.qparams = QParams.accumulator(float(y.qparams.scale) / divisor)
    return y
