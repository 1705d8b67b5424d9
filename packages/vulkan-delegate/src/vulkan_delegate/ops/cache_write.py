"""Writes into a tensor at given positions: the in-place update of a static KV cache.

torch.export makes `cache.index_copy_(dim, pos, new)`, `cache[:, :, pos] = new` (index_put) and
`cache[:, :, a:b] = new` (slice_scatter of a copy) functional ops on a mutated buffer, plus a
BUFFER_MUTATION output. The buffer is not tagged into the delegate (exir keeps mutable buffers in the
program), so it enters the partition as an input and the new value leaves as an output that the
ExecuTorch runtime writes back into the buffer: the next call, of any method sharing the buffer,
reads it. Shader `index_write` writes all of y in one pass (rows at the index, else x's);
slice_scatter is two strided copies."""

from __future__ import annotations

import torch
from torch.fx import Node

from ..graph import VARIANT, contiguous_strides, numel
from ..lower import dim_of, shape_of
from ..registry import INT_VARIANTS, any_tensors, aten_key, register
from .elementwise import broadcast_strides

aten = torch.ops.aten
INDEX_COPY, INDEX_PUT = aten.index_copy.default, aten.index_put.default


def _write_form(node: Node) -> tuple[Node, int, Node, Node] | str:
    """(x, dim, index, values) of an index_copy or single-index index_put, or the reason it is not one."""
    if aten_key(node.target) == INDEX_COPY:
        x, dim, idx, src = node.args[:4]
        return x, dim % max(x.meta["val"].dim(), 1), idx, src
    x, indices, src = node.args[:3]
    accumulate = node.args[3] if len(node.args) > 3 else node.kwargs.get("accumulate", False)
    if accumulate:
        return "index_put with accumulate=True (the Vulkan delegate overwrites; only a cache write is lowered)"
    tensors = [(d, i) for d, i in enumerate(indices) if i is not None]
    if len(tensors) != 1:
        return "index_put with several index tensors (one is lowered, e.g. cache[:, :, pos] = v)"
    return x, tensors[0][0], tensors[0][1], src


def _strip_ones(shape: list) -> list:
    while shape and str(shape[0]) == "1":
        shape = shape[1:]
    return shape


def _write_support(node: Node) -> str | None:
    form = _write_form(node)
    if isinstance(form, str):
        return form
    x, dim, idx, src = form
    if not isinstance(idx, Node) or idx.meta["val"].dtype not in (torch.int32, torch.int64):
        return "a write index that is not an int32/int64 tensor (a bool mask: use torch.where)"
    if idx.meta["val"].dim() != 1:
        return "a write index of rank != 1 (a list of positions is lowered)"
    if not isinstance(src, Node):
        return "written values that are not a tensor"
    xs, ss = list(x.meta["val"].shape), list(src.meta["val"].shape)
    want = xs[:dim] + [idx.meta["val"].shape[0]] + xs[dim + 1:]
    if [str(d) for d in _strip_ones(ss)] != [str(d) for d in _strip_ones(want)]:  # leading 1s: same layout
        return f"written values of shape {ss} that would broadcast to {want} (write full rows)"
    if src.meta["val"].dtype != x.meta["val"].dtype:
        return "written values of another dtype than the tensor written"
    return any_tensors(node)


@register("index_write", [INDEX_COPY, INDEX_PUT], ["index_write"], support=_write_support, variants=INT_VARIANTS,
          preserve=[INDEX_COPY])
def lower_index_write(ctx, node: Node) -> None:
    x_node, dim, idx_node, src_node = _write_form(node)
    x, idx, src = ctx.inp(x_node), ctx.inp(idx_node), ctx.inp(src_node)
    xs = shape_of(x_node) or [1]
    y = ctx.out(node)
    n = numel(y.shape or [1])
    ctx.dispatch("index_write", [x, idx, src, y], [n, numel(idx.shape), numel(xs[dim + 1:]), xs[dim]], (n,),
                 variant=VARIANT[x.dtype])


def _slice_scatter_support(node: Node) -> str | None:
    step = node.args[5] if len(node.args) > 5 else node.kwargs.get("step", 1)
    if not isinstance(step, int) or step < 1:
        return "slice_scatter with a non-constant or non-positive step"
    return any_tensors(node)


@register("slice_scatter", [aten.slice_scatter.default], ["copy"], support=_slice_scatter_support, variants=())
def lower_slice_scatter(ctx, node: Node) -> None:
    """y = x, then src into y[..., start:end:step, ...] (`cache[:, :, a:b] = new`)."""
    x, src = ctx.inp(node.args[0]), ctx.inp(node.args[1])
    xs = shape_of(node.args[0]) or [1]
    dim = (node.args[2] if len(node.args) > 2 else 0) % len(xs)
    start = dim_of(node.args[3]) if len(node.args) > 3 and node.args[3] is not None else 0
    if isinstance(start, int) and start < 0:
        start += xs[dim]
    step = node.args[5] if len(node.args) > 5 else 1
    y = ctx.out(node)
    strides = contiguous_strides(xs)
    ctx.copy(x, y, xs, strides, 0)
    dst = list(strides)
    dst[dim] = strides[dim] * step
    ctx.copy(src, y, src.shape or [1], contiguous_strides(src.shape or [1]), 0, dst_strides=dst,
             dst_off=start * strides[dim])


def _copy_support(node: Node) -> str | None:
    if node.args[1].meta["val"].dtype != node.meta["val"].dtype:
        return "copy_ between dtypes"
    return any_tensors(node)


@register("copy", [aten.copy.default], ["copy"], support=_copy_support, variants=())
def lower_copy(ctx, node: Node) -> None:
    """aten.copy(self, src): src broadcast to self's shape (the value a slice assignment writes)."""
    src = ctx.inp(node.args[1])
    y = ctx.out(node)
    shape = y.shape or [1]
    ctx.copy(src, y, shape, broadcast_strides(src.shape, shape)[6 - len(shape):], 0)
