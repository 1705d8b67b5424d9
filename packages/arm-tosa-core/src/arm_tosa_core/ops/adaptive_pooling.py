"""Adaptive average/max pooling (2-d, and the 1-d forms export turns into 2-d), FP and INT.

Output position i of an axis of size `n` pooled to `out` reads rows [floor(i*n/out), ceil((i+1)*n/out)).
When `out` divides `n` every window has one size and stride: one TOSA pool. Otherwise windows differ
in size (and overlap), which no TOSA pool expresses, so:

- max: separable. Per output row a SLICE + REDUCE_MAX over H, CONCAT; then the same over W. In INT
  the max runs on the int8 codes (order-preserving), the quantize that follows rescales once.
- average: one MATMUL of the flattened H*W plane with a constant [H*W, OH*OW] matrix (the Kronecker
  product of the per-axis window matrices). FP: the matrix holds 1/window size. INT: it holds ones,
  so the int8 MATMUL gives each window's exact int32 sum; each position is then divided by its own
  window size with one int32 MUL (as avg_pool2d's uneven windows, `pooling._divide_per_position`), so
  the following RESCALE is the only rounding that matters.

INT averages over even windows are exact too: up to 3x3, int32 window sums from an all-ones depthwise
convolution (Ethos-U55/U65 stride limit), beyond that the MATMUL above (windows of one size fold 1/size
into the scale), and only planes too large for its matrix an int8 AVG_POOL2D (which rounds twice).

A 1x1 adaptive average of a rank-4 value (global average pooling) is lowered by `reductions` as a
mean over H, W; the quantizer gives it its input's qparams (`helpers.windows.is_global_average`).
"""

from __future__ import annotations

import torch
from torch.fx import Node

from .. import layout
from ..builder import DType, Op, tosa_dtype
from ..context import LoweringContext, Value
from ..helpers.common import nan_propagate
from ..helpers.qparams import QParams
from ..helpers.reduce import float_only, reduce, values_only
from ..helpers.shapes import slice_value
from ..helpers.windows import (
    ADAPTIVE_AVG_POOLS,
    divide_per_position,
    is_global_average,
    pool,
    window_reason,
)
from ..registry import (
    Quant,
    aten_target,
    family,
    register_int_rule,
    register_op,
    register_quant_aliases,
)

aten = torch.ops.aten
MAX_WINDOWS = 64  # uneven max pooling: one SLICE + REDUCE_MAX per output row/column
MAX_AVG_MATRIX = 1 << 18  # uneven average pooling: the constant H*W x OH*OW matrix (elements)
# INT window sums as an all-ones depthwise convolution strided by the window: Ethos-U55/U65 run depthwise
# strides up to 3 only, so larger even windows take the MATMUL form too
MAX_SUM_STRIDE = 3


def _adaptive_window(node: Node) -> tuple[list[int], list[int]]:
    """(input H, W), (output H, W) of an adaptive pool (output 0's shape when it returns indices too)."""
    out = node.meta["val"]
    out = out[0] if isinstance(out, (tuple, list)) else out
    return list(node.args[0].meta["val"].shape[-2:]), list(out.shape[-2:])


def windows(size: int, out: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive windows along one axis: [start, end) of each output position."""
    return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]


def _is_max(node: Node) -> bool:
    return aten_target(node.target) is aten.adaptive_max_pool2d.default


def _even(in_hw, out_hw) -> bool:
    return all(o and i % o == 0 for i, o in zip(in_hw, out_hw, strict=True))


def _adaptive_support(node: Node, spec) -> str | None:
    in_hw, out_hw = _adaptive_window(node)
    rank = node.args[0].meta["val"].dim()
    if rank not in (3, 4):
        return f"adaptive pooling of a rank-{rank} tensor is not lowered (only [N,]C,H,W)"
    if 0 in out_hw:
        return "adaptive pooling to an empty output is not lowered"
    reason = float_only(node, "adaptive pooling")
    if reason is None and _is_max(node):
        reason = values_only(node)
    if reason is not None:
        return reason
    if _even(in_hw, out_hw):
        kernel = [i // o for i, o in zip(in_hw, out_hw, strict=True)]
        return window_reason(node, kernel, kernel)
    if _is_max(node) and max(out_hw) > MAX_WINDOWS:
        return (f"adaptive max pooling to {out_hw[0]}x{out_hw[1]} with windows of different sizes is not "
                f"lowered beyond {MAX_WINDOWS} windows per axis (one SLICE + REDUCE_MAX each)")
    if not _is_max(node) and in_hw[0] * in_hw[1] * out_hw[0] * out_hw[1] > MAX_AVG_MATRIX:
        return (f"adaptive average pooling {in_hw[0]}x{in_hw[1]} -> {out_hw[0]}x{out_hw[1]} with windows of "
                f"different sizes is not lowered: its averaging matrix would exceed {MAX_AVG_MATRIX} elements")
    return None


def _is_global(ctx: LoweringContext, node: Node) -> bool:
    """An adaptive pool of a rank-4 value to 1x1: the mean over H and W (see reductions)."""
    return _adaptive_window(node)[1] == [1, 1] and ctx.val(node.args[0]).rank == 4


@register_op("adaptive_pool2d", list(ADAPTIVE_AVG_POOLS), support=_adaptive_support, quant=Quant.REDUCE,
             preserve=True, preserve_for_speed=True, int16=False, fp32_opmath=True,
             shares_qparams=is_global_average)
def lower_adaptive_avg_pool2d(ctx: LoweringContext, node: Node) -> Value:
    in_hw, out_hw = _adaptive_window(node)
    if _is_global(ctx, node):
        # global average: lowered like the mean exir would make of it (no TRANSPOSE on NCHW input)
        return family("sum_mean").lower(ctx, node)
    if _even(in_hw, out_hw):
        kernel = [i // o for i, o in zip(in_hw, out_hw, strict=True)]
        return pool(ctx, node, Op.AVG_POOL2D, kernel, kernel, [0, 0], "exclude")
    return _uneven_average(ctx, ctx.val(node.args[0]), in_hw, out_hw)


@register_int_rule("adaptive_pool2d")
def lower_adaptive_avg_pool2d_int(ctx: LoweringContext, node: Node) -> Value:
    in_hw, out_hw = _adaptive_window(node)
    if _is_global(ctx, node):
        # global average: the same exact integer lowering as the spatial mean exir makes of it
        return family("sum_mean").int_lower(ctx, node)
    kernel = [i // o for i, o in zip(in_hw, out_hw, strict=True)]
    if _even(in_hw, out_hw) and max(kernel) <= MAX_SUM_STRIDE:
        # exact int32 window sums (TOSA's int8 AVG_POOL2D would round the average before the RESCALE
        # rounds again), the 1/area folded into the sum's scale: one rounding

        y = pool(ctx, node, Op.AVG_POOL2D, kernel, kernel, [0, 0], "sum")
        y.qparams = QParams.accumulator(float(y.qparams.scale) / (kernel[0] * kernel[1]))
        return y
    if in_hw[0] * in_hw[1] * out_hw[0] * out_hw[1] <= MAX_AVG_MATRIX:
        return _uneven_average(ctx, ctx.val(node.args[0]), in_hw, out_hw)
    return lower_adaptive_avg_pool2d(ctx, node)  # a large even plane: int8 AVG_POOL2D (rounds twice)


# The max is order-preserving: quantized, it runs on the int8 codes with the input's qparams (SHARED).
@register_op("adaptive_max_pool2d", [aten.adaptive_max_pool2d.default], support=_adaptive_support,
             quant=Quant.SHARED, preserve=True, preserve_for_speed=True)
def lower_adaptive_max_pool2d(ctx: LoweringContext, node: Node):
    in_hw, out_hw = _adaptive_window(node)
    if _even(in_hw, out_hw):
        kernel = [i // o for i, o in zip(in_hw, out_hw, strict=True)]
        return (pool(ctx, node, Op.MAX_POOL2D, kernel, kernel, [0, 0], "exclude"), None)
    return (_uneven_max(ctx, ctx.val(node.args[0]), out_hw), None)  # the indices: refused by support


def _uneven_max(ctx: LoweringContext, x: Value, out_hw) -> Value:
    """Separable max over windows of different sizes: per axis, SLICE + REDUCE_MAX per window, CONCAT."""
    for axis, out in zip((x.rank - 2, x.rank - 1), out_hw, strict=True):
        parts = []
        for start, end in windows(x.shape[axis], out):
            starts, sizes = [0] * x.rank, list(x.shape)
            starts[axis], sizes[axis] = start, end - start
            part = slice_value(ctx, x, starts, sizes, x.dtype)
            parts.append(reduce(ctx, part, Op.REDUCE_MAX, [axis], nan_propagate()))
        shape = list(x.shape)
        shape[axis] = out
        tensors = [ctx.tensor(p, x.perm) for p in parts]
        joined = tensors[0] if len(tensors) == 1 else ctx.b.op(
            Op.CONCAT, tensors, layout.apply(shape, x.perm), tensors[0].dtype, x.perm.index(axis))
        x = Value(tuple(shape), x.dtype, tensor=joined, perm=x.perm, qparams=x.qparams)
    return x


def _window_matrix(in_hw, out_hw) -> tuple[torch.Tensor, torch.Tensor]:
    """(0/1 matrix [H*W, OH*OW] marking each output's window, window sizes [OH, OW])."""
    per_axis = []
    for size, out in zip(in_hw, out_hw, strict=True):
        m = torch.zeros(size, out)
        for i, (start, end) in enumerate(windows(size, out)):
            m[start:end, i] = 1
        per_axis.append(m)
    counts = torch.outer(per_axis[0].sum(0), per_axis[1].sum(0))
    return torch.kron(per_axis[0], per_axis[1]), counts


def _uneven_average(ctx: LoweringContext, x: Value, in_hw, out_hw) -> Value:
    """One MATMUL of the flattened H*W plane with the window matrix (see module docstring)."""
    ones, counts = _window_matrix(in_hw, out_hw)
    quantized = x.qparams is not None
    if not quantized:
        return _plane_matmul(ctx, x, ones / counts.reshape(-1), out_hw, DType.FP32, 0)
    sums = _plane_matmul(ctx, x, ones, out_hw, DType.INT8, x.qparams.zero_point)

    sums.qparams = QParams.accumulator(float(x.qparams.scale))
    if bool((counts == counts[0, 0]).all()):  # windows of one size: 1/size folds into the scale
        sums.qparams = QParams.accumulator(float(x.qparams.scale) / float(counts[0, 0]))
        return sums
    max_sum = (x.qparams.qmax - x.qparams.qmin) * int(counts.max())
    return divide_per_position(ctx, sums, counts.double(), max_sum)


def _plane_matmul(ctx: LoweringContext, x: Value, matrix: torch.Tensor, out_hw, elem: DType,
                  zero_point: int) -> Value:
    """y[..., OH, OW] = x[..., H, W] flattened over H*W, times `matrix` [H*W, OH*OW].

    With H, W innermost in x's layout the plane is MATMUL's K axis as it lies; with channels last and a
    single image (NHWC after a convolution) the constant goes on the left instead, so no TRANSPOSE."""
    b = ctx.b
    h, w = x.rank - 2, x.rank - 1
    hw, ohow = matrix.shape
    out_shape = (*x.shape[:-2], *out_hw)
    acc = DType.INT32 if elem == DType.INT8 else DType.FP32
    out_dtype = torch.int32 if elem == DType.INT8 else x.dtype
    lead = [p for p in x.perm if p not in (h, w)]
    channels_last = (not x.is_const and list(x.perm[-3:-1]) == [h, w]
                     and all(x.shape[p] == 1 for p in x.perm[:-3]))
    if channels_last:
        c = x.shape[x.perm[-1]]
        right = b.reshape(ctx.tensor(x), [1, hw, c])
        left = b.const(matrix.t().reshape(1, ohow, hw), elem)
        zps = [b.zero_point(elem), b.zero_point(elem, zero_point)]
        y = b.op(Op.MATMUL, [left, right, *zps], [1, ohow, c], acc)
        perm = x.perm
    else:
        perm = (*lead, h, w)
        rows = 1
        for p in lead:
            rows *= x.shape[p]
        left = b.reshape(ctx.tensor(x, perm, None if not x.is_const else tosa_dtype(x.dtype)), [1, rows, hw])
        right = b.const(matrix.reshape(1, hw, ohow), elem)
        zps = [b.zero_point(elem, zero_point), b.zero_point(elem)]
        y = b.op(Op.MATMUL, [left, right, *zps], [1, rows, ohow], acc)
    return ctx.from_tensor(b.reshape(y, layout.apply(out_shape, perm)), out_shape, out_dtype, perm)


# Export-time 1-d adaptive pools decompose into the 2-d families: annotate them like those.
register_quant_aliases("adaptive_pool2d", aten.adaptive_avg_pool1d.default)
register_quant_aliases("adaptive_max_pool2d", aten.adaptive_max_pool1d.default)
