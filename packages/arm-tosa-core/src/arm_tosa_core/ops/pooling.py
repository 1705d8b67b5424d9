"""Pooling, run in NHWC like convolution: max_pool2d (dilated too) and avg_pool2d, FP and INT, and the
`pool` helper that adaptive pooling (`adaptive_pooling`) uses when the input divides evenly.

TOSA pools take the padding as an attribute and leave padded positions out of both the max and the
average divisor, and need `(size + pad_lo + pad_hi - kernel) % stride == 0`. The rule works out, per
spatial axis, how PyTorch's padding, ceil_mode and count_include_pad map onto that: which padding is
TOSA's (excluded), which must be an explicit zero PAD (counted), and how many trailing rows no window
reaches (sliced off). The output size always comes from the node's recorded shape.
"""

from __future__ import annotations

import torch
from torch.fx import Node

from .. import layout
from ..builder import Op, T
from ..context import LoweringContext, Value
from ..helpers.common import arg, nan_propagate
from ..helpers.qparams import QParams
from ..helpers.reduce import float_only, scale, values_only
from ..helpers.windows import (
    NHWC,
    batched_input,
    divide_per_position,
    pair,
    pool,
    pool_window,
    window_divisors,
    window_reason,
)
from ..registry import Quant, aten_target, register_int_rule, register_op, register_quant_aliases

aten = torch.ops.aten


# -- max_pool2d --------------------------------------------------------------------------------


def _max_pool_support(node: Node, spec) -> str | None:
    kernel, stride, _ = pool_window(node)
    # MAX_POOL2D takes int8 in PRO-INT (int16 in EXT-INT16): plain integer tensors need no quantization
    reason = float_only(node, "max_pool2d", spec, (torch.int8, torch.int16)) or window_reason(node, kernel, stride)
    if reason is None and aten_target(node.target) is aten.max_pool2d_with_indices.default:
        reason = values_only(node)
    return reason


@register_op("max_pool2d", [aten.max_pool2d_with_indices.default, aten.max_pool2d.default],
             support=_max_pool_support, quant=Quant.SHARED, preserve=True, preserve_for_speed=True)
def lower_max_pool2d(ctx: LoweringContext, node: Node):
    kernel, stride, padding = pool_window(node)
    dilation = pair(arg(node, 4, "dilation"), [1, 1])
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
    x, out_shape, dtype, batched, out4 = batched_input(ctx, node)
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
    return float_only(node, "avg_pool2d") or window_reason(node, kernel, stride)


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


@register_int_rule("avg_pool2d")
def lower_avg_pool2d_int(ctx: LoweringContext, node: Node) -> Value:
    """Quantized average pooling from the exact int32 window sum (see `_window_sum_int`), rounded once,
    by the following RESCALE (TOSA's int8 AVG_POOL2D rounds the average, then the RESCALE rounds
    again: up to 2 LSB off). Windows of one size fold 1/divisor into the sum's scale; windows that
    differ in size (ceil_mode overhang, count_include_pad=False with padding) multiply each position
    by its own reciprocal first (`divide_per_position`)."""
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
            return divide_per_position(ctx, y, divisors, max_sum)

    # sum / divisor: the exact int32 window sum, with the divisor folded into its scale
    y.qparams = QParams.accumulator(float(y.qparams.scale) / divisor)
    return y


# Export-time max_pool1d decomposes into max_pool2d: annotate it like that family.
register_quant_aliases("max_pool2d", aten.max_pool1d.default)
