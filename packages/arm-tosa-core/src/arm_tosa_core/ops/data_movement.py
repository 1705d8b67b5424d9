"""More data movement: flip (REVERSE), slice_scatter / select_scatter (SLICE + CONCAT), and the
export-time ops the quantizer must annotate before exir decomposes them into families it knows
(stack -> cat, unflatten -> view, pixel_shuffle -> view/permute, max_pool1d -> max_pool2d ...)."""

from __future__ import annotations

import torch
from torch.fx import Node

from .. import layout
from ..builder import DType, Op, tosa_dtype
from ..context import LoweringContext, Value
from ..helpers.common import arg
from ..helpers.qparams import QParams
from ..helpers.shapes import slice_value
from ..registry import Quant, register_int_rule, register_op

aten = torch.ops.aten

@register_op("flip", [aten.flip.default], quant=Quant.SHARED,
             quant_aliases=[aten.fliplr.default, aten.flipud.default], folds_constants=True)
def lower_flip(ctx: LoweringContext, node: Node) -> Value:
    """One REVERSE per flipped dim, on the physical axis that holds it."""
    x = ctx.val(node.args[0])
    if x.is_const:
        return ctx.constant(x.const.flip(node.args[1]))
    t = x.tensor
    for dim in sorted({d % x.rank for d in node.args[1]}):
        if x.shape[dim] > 1:
            t = ctx.b.op(Op.REVERSE, [t], t.shape, t.dtype, x.perm.index(dim))
    return Value(x.shape, x.dtype, tensor=t, perm=x.perm, qparams=x.qparams)


def _shuffle_geometry(node: Node) -> tuple[int, int, int, int, int, bool]:
    """(folded batch B, channels C of the shuffled side, H, W of the unshuffled side, factor r,
    shuffle?) for pixel_shuffle / pixel_unshuffle: the pixels live in [B, C, r, r, H, W] on one side
    and [B, C, H, r, W, r] on the other."""
    shuffle = "pixel_shuffle" in str(node.target)
    r = node.args[1]
    small = node.args[0].meta["val"].shape if shuffle else node.meta["val"].shape  # [*, C*r*r, H, W]
    batch = 1
    for d in small[:-3]:
        batch *= d
    return batch, small[-3] // (r * r), small[-2], small[-1], r, shuffle


def _shuffle_support(node: Node, spec) -> str | None:
    if node.args[0].meta["val"].dim() < 3:
        return "pixel (un)shuffle needs a [*, C, H, W] input"
    return None


@register_op("pixel_shuffle", [aten.pixel_shuffle.default, aten.pixel_unshuffle.default], support=_shuffle_support,
             quant=Quant.SHARED, preserve=True)
def lower_pixel_shuffle(ctx: LoweringContext, node: Node) -> Value:
    """RESHAPE to rank 5 with batch and channels folded, one TRANSPOSE, RESHAPE back.

    Kept whole (`preserve`): exir's decomposition reshapes to rank 2 + 5 dims, which for a rank-5 input
    is rank 7, past TOSA's limit of 6."""
    x = ctx.val(node.args[0])
    shape, dtype = ctx.out_meta(node)
    batch, c, h, w, r, shuffle = _shuffle_geometry(node)
    blocks, pixels = [batch * c, r, r, h, w], [batch * c, h, r, w, r]
    source, order = (blocks, (0, 3, 1, 4, 2)) if shuffle else (pixels, (0, 2, 4, 1, 3))
    if x.is_const:
        return ctx.constant(x.const.reshape(source).permute(*order).reshape(shape))
    t = ctx.b.transpose(ctx.b.reshape(ctx.tensor(x, layout.identity(x.rank)), source), order)
    return ctx.from_tensor(ctx.b.reshape(t, shape), shape, dtype)


def _scatter_window(node: Node) -> tuple[int, int, int]:
    """(dim, start, end) of the slice that slice_scatter/select_scatter overwrite."""
    shape = node.args[0].meta["val"].shape
    dim = arg(node, 2, "dim", 0) % len(shape)
    size = shape[dim]
    if aten.select_scatter.default in (node.target, getattr(node.target, "_op", None)):
        index = node.args[3] % size
        return dim, index, index + 1
    start, end = arg(node, 3, "start", None), arg(node, 4, "end", None)
    start = 0 if start is None else max(0, min(start + size if start < 0 else start, size))
    end = size if end is None else max(start, min(end + size if end < 0 else end, size))
    return dim, start, end


def _scatter_support(node: Node, spec) -> str | None:
    step = arg(node, 5, "step", 1) if "slice_scatter" in str(node.target) else 1
    if step != 1:
        return (f"slice_scatter with step {step} is not lowered: TOSA 1.0 has no strided write (SCATTER "
                "needs an index per row); only step 1 becomes SLICE + CONCAT")
    return None


@register_op("scatter_slice", [aten.slice_scatter.default, aten.select_scatter.default],
             support=_scatter_support, quant=Quant.SHARED, shared_inputs=2, preserve=True, folds_constants=True)
def lower_slice_scatter(ctx: LoweringContext, node: Node) -> Value:
    """x[..., start:end, ...] = src as CONCAT(x before, src, x after) along dim.

    Kept whole (`preserve`): exir would otherwise decompose select_scatter into arange + eq + where, whose
    arange has no INT lowering (a quantized select_scatter would then stay on the CPU)."""
    x, src = ctx.val(node.args[0]), ctx.val(node.args[1])
    shape, dtype = ctx.out_meta(node)
    dim, start, end = _scatter_window(node)
    sizes = list(shape)
    sizes[dim] = end - start
    parts = []
    if start > 0:
        parts.append(slice_value(ctx, x, [0] * len(shape), sizes[:dim] + [start] + sizes[dim + 1:], dtype))
    parts.append(ctx.reshape(src, sizes) if src.rank != len(shape) else src)
    if end < shape[dim]:
        starts = [0] * len(shape)
        starts[dim] = end
        parts.append(slice_value(ctx, x, starts, sizes[:dim] + [shape[dim] - end] + sizes[dim + 1:], dtype))
    perm = ctx.common_layout(parts, len(shape))
    tensors = [ctx.tensor(v, perm, tosa_dtype(dtype)) for v in parts]
    if len(tensors) == 1:
        return ctx.from_tensor(tensors[0], shape, dtype, perm)
    return ctx.emit(Op.CONCAT, tensors, shape, dtype, perm, perm.index(dim))


def _strided_view(node: Node) -> tuple[int, list[int], list[int]] | None:
    """as_strided as a view of the contiguous input: (offset, dims ordered by stride, their sizes)
    when the result is a permuted contiguous block of the storage, else None."""
    size, stride = list(node.args[1]), list(node.args[2])
    offset = arg(node, 3, "storage_offset", 0) or 0
    numel = node.args[0].meta["val"].numel()
    dims = sorted((d for d in range(len(size)) if size[d] != 1), key=lambda d: -stride[d])
    expected = 1
    for d in reversed(dims):
        if stride[d] != expected:
            return None
        expected *= size[d]
    return (offset, dims, [size[d] for d in dims]) if offset + expected <= numel else None


def _as_strided_support(node: Node, spec) -> str | None:
    if _strided_view(node) is None:
        return ("as_strided with overlapping or gapped strides is not a view (it would need a GATHER per "
                "element); only permuted contiguous blocks are lowered")
    return None


@register_op("as_strided", [aten.as_strided_copy.default, aten.as_strided.default], support=_as_strided_support,
             quant=Quant.SHARED)
def lower_as_strided(ctx: LoweringContext, node: Node) -> Value:
    """SLICE of the flattened input, RESHAPE to the dims in stride order, then a layout-only permute."""
    x = ctx.val(node.args[0])
    shape, dtype = ctx.out_meta(node)
    offset, dims, sizes = _strided_view(node)
    count = 1
    for n in sizes:
        count *= n
    flat = ctx.reshape(x, (x.const.numel() if x.is_const else _numel(x.shape),))
    block = ctx.reshape(slice_value(ctx, flat, [offset], [count], dtype), sizes)
    order = sorted(range(len(dims)), key=lambda i: dims[i])  # block dim for each output dim, in order
    if block.is_const:
        permuted = ctx.constant(block.const.permute(*order))
    else:
        permuted = Value(tuple(sizes[i] for i in order), dtype, tensor=block.tensor,
                         perm=layout.after_permute(block.perm, order), qparams=block.qparams)
    return ctx.reshape(permuted, shape)


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _unfold_support(node: Node, spec) -> str | None:
    x = node.args[0].meta["val"]
    dim, size, step = node.args[1] % max(x.dim(), 1), node.args[2], node.args[3]
    windows = (x.shape[dim] - size) // step + 1 if x.dim() else 1
    if windows > 64:
        return f"unfold into {windows} windows is not lowered (one SLICE per window; at most 64)"
    return None


@register_op("unfold", [aten.unfold_copy.default, aten.unfold.default], support=_unfold_support,
             quant=Quant.SHARED)
def lower_unfold(ctx: LoweringContext, node: Node) -> Value:
    """One SLICE per window, CONCAT along dim, then the window axis moves last (layout only)."""
    x = ctx.val(node.args[0])
    shape, dtype = ctx.out_meta(node)
    dim, size, step = node.args[1] % x.rank, node.args[2], node.args[3]
    windows = shape[dim]
    sizes = list(x.shape)
    sizes[dim] = size
    # [..., windows * size, ...] -> [..., windows, size, ...] -> window axis (dim + 1) to the end
    parts = []
    for w in range(windows):
        starts = [0] * x.rank
        starts[dim] = w * step
        parts.append(slice_value(ctx, x, starts, sizes, dtype))
    perm = ctx.common_layout(parts, x.rank)
    tensors = [ctx.tensor(v, perm, tosa_dtype(dtype)) for v in parts]
    cat_shape = list(x.shape)
    cat_shape[dim] = windows * size
    joined = (ctx.from_tensor(tensors[0], cat_shape, dtype, perm) if len(tensors) == 1 else
              ctx.emit(Op.CONCAT, tensors, cat_shape, dtype, perm, perm.index(dim)))
    split = ctx.reshape(joined, cat_shape[:dim] + [windows, size] + cat_shape[dim + 1:])
    order = [d for d in range(x.rank + 1) if d != dim + 1] + [dim + 1]
    if split.is_const:
        return ctx.constant(split.const.permute(*order))
    return Value(tuple(shape), dtype, tensor=split.tensor, perm=layout.after_permute(split.perm, order),
                 qparams=split.qparams)


_CUMSUM_MAX = 1024  # the triangular constant is L x L floats


def _cumsum_support(node: Node, spec) -> str | None:
    val = node.meta["val"]
    if val.dtype != torch.float32 or node.args[0].meta["val"].dtype != torch.float32:
        return (f"cumsum on {node.args[0].meta['val'].dtype} -> {val.dtype} is not lowered: only float32 "
                "or quantized int8 (a MATMUL with a triangular constant; TOSA has no scan operator)")
    if val.dim() == 0 or val.shape[node.args[1] % val.dim()] > _CUMSUM_MAX:
        return f"cumsum over more than {_CUMSUM_MAX} elements (or of a scalar) is not lowered"
    return None


@register_op("cumsum", [aten.cumsum.default], support=_cumsum_support, quant=Quant.REDUCE, int16=False, folds_constants=True)
def lower_cumsum(ctx: LoweringContext, node: Node) -> Value:
    """TOSA has no scan: y[..., j] = sum_i x[..., i] * T[i, j] with T upper-triangular ones (one MATMUL).

    Quantized (int8): the same MATMUL on the int8 codes with the input zero point and an int8 triangle,
    accumulated exactly in int32 (scale = the input's); the following RESCALE is the only rounding."""
    x = ctx.val(node.args[0])
    shape, dtype = ctx.out_meta(node)
    if x.is_const:
        return ctx.constant(x.const.cumsum(node.args[1]))
    dim = node.args[1] % x.rank
    order = tuple(d for d in range(x.rank) if d != dim) + (dim,)  # the scanned dim innermost
    length = shape[dim]
    rows = _numel(shape) // length
    b = ctx.b
    a = b.reshape(ctx.tensor(x, order), [1, rows, length])
    quantized = x.qparams is not None
    elem = DType.INT8 if quantized else DType.FP32
    tri = b.const(torch.triu(torch.ones(length, length)).reshape(1, length, length), elem)
    zps = [b.zero_point(elem, x.qparams.zero_point if quantized else 0), b.zero_point(elem)]
    y = b.op(Op.MATMUL, [a, tri, *zps], [1, rows, length], DType.INT32 if quantized else DType.FP32)
    out = ctx.from_tensor(b.reshape(y, layout.apply(shape, order)), shape,
                          torch.int32 if quantized else dtype, order)
    if quantized:
        out.qparams = QParams.accumulator(float(x.qparams.scale))
    return out


register_int_rule("cumsum")(lower_cumsum)
