"""Pooling windows: kernel/stride/padding plans per axis, TOSA pools over them, per-position divisors."""

from __future__ import annotations

from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import NamedTuple

import numpy as np
import torch
from torch.fx import Node

from .. import layout
from ..builder import DType, Op, T
from ..context import LoweringContext, Value
from .common import arg, aten_target, nan_propagate
from .lowering_choice import choose
from .qparams import QParams
from .reduce import reduce_dims

aten = torch.ops.aten


NHWC = layout.NCHW_TO_NHWC


MAX_KERNEL = 8192  # TOSA level 8K: kernel and stride limits


def pair(value, default) -> list[int]:
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


def batched_input(ctx: LoweringContext, node: Node) -> tuple[Value, tuple, torch.dtype, bool, tuple]:
    """(x, out_shape, dtype, batched, out4) of a pool: a rank-3 input gets a batch of 1, and out4 is the
    output shape with that batch."""
    x = ctx.val(node.args[0])
    out_shape, dtype = ctx.out_meta(node)
    batched = x.rank == 4
    if not batched:
        x = ctx.reshape(x, (1, *x.shape))
    out4 = out_shape if batched else (1, *out_shape)
    return x, out_shape, dtype, batched, out4


def pool(ctx: LoweringContext, node: Node, op: Op, kernel, stride, padding, mode: str) -> Value:
    """MAX_POOL2D / AVG_POOL2D of node.args[0] (rank 3 or 4) producing the node's output shape, in NHWC."""
    x, out_shape, dtype, batched, out4 = batched_input(ctx, node)
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
        y = _max_pool(ctx, t, layout.apply(out4, NHWC), kernel, stride, pads)
    value = Value(tuple(out4), dtype, tensor=y, perm=NHWC, qparams=x.qparams)
    return value if batched else ctx.reshape(value, out_shape)


#: How a stride-1 max pool is written: "whole" (one MAX_POOL2D, the default) or "separable" (see `_max_pool`).
MAX_POOL_FORMS = ("whole", "separable")
_max_pool_form: ContextVar[str] = ContextVar("arm_tosa_core_max_pool_form", default="whole")


def max_pool_form(form: str) -> AbstractContextManager[None]:
    """Lower the stride-1 max pools inside this block in `form` (one of `MAX_POOL_FORMS`). Ethos-U sets
    "separable" on U55 (`arm_ethosu.compile_spec.default_max_pool_form`)."""
    return choose(_max_pool_form, form, MAX_POOL_FORMS, "max pool form")


def _max_pool(ctx: LoweringContext, t: T, out: list[int], kernel, stride, pads: list[int]) -> T:
    """MAX_POOL2D of NHWC `t` to `out`. In the "separable" form a stride-1 window of k x k (k > 1 both ways)
    is two pools, k x 1 then 1 x k, each padding its own axis: the max of maxes over the same (unpadded)
    positions, so the same integers. vela 5.2, U55-128, 3x3 stride 1 pad 1: 16x16x480 246,440 NPU cycles
    split against 278,184 whole, 32x32x192 394,448 against 444,154 (total cycles the same); 5x5 on 16x16x64
    41,688 against 105,040. A stride-2 window is never split (148,320 split against 112,866 whole at
    32x32x192)."""
    if _max_pool_form.get() == "separable" and list(stride) == [1, 1] and min(kernel) > 1:
        n, _, w, c = t.shape
        rows = ctx.b.op(Op.MAX_POOL2D, [t], [n, out[1], w, c], t.dtype, [kernel[0], 1], [1, 1],
                        [pads[0], pads[1], 0, 0], nan_propagate())
        return ctx.b.op(Op.MAX_POOL2D, [rows], out, t.dtype, [1, kernel[1]], [1, 1], [0, 0, pads[2], pads[3]],
                        nan_propagate())
    return ctx.b.op(Op.MAX_POOL2D, [t], out, t.dtype, list(kernel), list(stride), pads, nan_propagate())


def _window_sum_int(ctx: LoweringContext, x: Value, t: T, kernel, stride, pads, out4, out_shape, dtype,
                    batched: bool) -> Value:
    """Exact window sums of a quantized value: DEPTHWISE_CONV2D with all-ones int8 weights, an int32
    accumulator (INT48 for int16 input) in units of the input scale (TOSA's integer AVG_POOL2D would round
    the average first)."""
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


def window_reason(node: Node, kernel, stride) -> str | None:
    rank = node.args[0].meta["val"].dim()
    if rank not in (3, 4):
        return f"pooling a rank-{rank} tensor is not lowered (only [N,]C,H,W)"
    if max(kernel) > MAX_KERNEL or max(stride) > MAX_KERNEL:
        return f"pooling kernel {kernel} / stride {stride} exceed the TOSA 8K level limit {MAX_KERNEL}"
    return None


def pool_window(node: Node) -> tuple[list[int], list[int], list[int]]:
    """(kernel, stride, padding) of max_pool2d/avg_pool2d; stride defaults to the kernel."""
    kernel = pair(arg(node, 1, "kernel_size"), [1, 1])
    return kernel, pair(arg(node, 2, "stride"), kernel), pair(arg(node, 3, "padding"), [0, 0])


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


def divide_per_position(ctx: LoweringContext, y: Value, divisors: torch.Tensor, max_sum: int) -> Value:
    """y (an int32 window sum) / a per-position divisor: one int32 MUL by round(2^30 / divisor) with a
    shift that keeps the product in int32; the rest of 2^30 goes into the accumulator's scale, so the
    following RESCALE is still the only rounding that matters (the MUL's is ~2^-18 of an input LSB)."""
    shift = max(0, min(RECIPROCAL_BITS, max_sum.bit_length()))
    multipliers = torch.round(2.0**RECIPROCAL_BITS / divisors).to(torch.int32)
    c = ctx.constant(multipliers.reshape([1] * (y.rank - 2) + list(divisors.shape)))
    tensors, perm = ctx.broadcast([y, c], y.rank, DType.INT32)
    shift_t = ctx.b.const(np.full([1], shift, dtype=np.int8), DType.INT8)
    out = ctx.emit(Op.MUL, [*tensors, shift_t], y.shape, torch.int32, perm)
    out.qparams = QParams.accumulator(float(y.qparams.scale) * 2.0**shift / 2.0**RECIPROCAL_BITS)
    return out


# the adaptive average pools (pooling's family); with a 1x1 output one is the mean over H, W with
# keepdim, which pooling's rules hand to this module's
ADAPTIVE_AVG_POOLS = (aten._adaptive_avg_pool2d.default, aten.adaptive_avg_pool2d.default)


def is_global_average(node: Node) -> bool:
    """A global average pool of a float [N, C, H, W] tensor: a mean over H and W, or a 1x1 adaptive
    average (the quantizer's `shares_qparams` for both families).

    Quantized, its output takes the input's qparams, as max pooling's does: the INT lowering is then one
    int8 AVG_POOL2D (TOSA rounds the average once, ties up), which vela runs in fewer NPU cycles than the
    int32 sum and RESCALE that other output qparams need (regor: a TRANSPOSE and a reduction). The cost:
    the average's values keep the input's step, though their range is narrower than the input's.
    """
    x, out = node.args[0].meta.get("val") if isinstance(node.args[0], Node) else None, node.meta.get("val")
    if not isinstance(x, torch.Tensor) or not isinstance(out, torch.Tensor) or x.dim() != 4:
        return False
    target = aten_target(node.target)
    if target in ADAPTIVE_AVG_POOLS:
        return list(out.shape[-2:]) == [1, 1]
    return target is aten.mean.dim and reduce_dims(arg(node, 1, "dim"), 4) == [2, 3]
