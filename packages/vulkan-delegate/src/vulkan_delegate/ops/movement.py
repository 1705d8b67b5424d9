"""Data movement that is one strided copy (shader `copy`): repeat, flip, unfold (pixel_shuffle and
pixel_unshuffle reach the delegate already decomposed into view + permute, one copy).
A copy walks at most 6 dims; negative strides (flip) wrap in the shader's 32-bit index arithmetic."""

from __future__ import annotations

import torch
from torch.fx import Node

from ..graph import contiguous_strides
from ..lower import shape_of
from ..registry import MAX_RANK, float_tensors, register

aten = torch.ops.aten
def _repeat_plan(in_shape: list, repeats: list) -> tuple[list, list] | None:
    """(sizes, source strides) of the copy that writes `in_shape` repeated: per dim (repeat, size)
    with strides (0, stride), dims of 1 dropped; None when more than 6 dims remain."""
    shape = [1] * (len(repeats) - len(in_shape)) + list(in_shape)
    strides = contiguous_strides(shape)
    sizes, src = [], []
    for rep, size, stride in zip(repeats, shape, strides, strict=True):
        for s, st in ((rep, 0), (size, stride)):
            if not (isinstance(s, int) and s == 1):
                sizes.append(s)
                src.append(st)
    if len(sizes) > MAX_RANK:
        return None
    return sizes or [1], src or [0]


def _repeat_support(node: Node) -> str | None:
    shape = list(node.args[0].meta["val"].shape)
    if _repeat_plan(shape, list(node.args[1])) is None:
        return "repeat needing a copy over more than 6 dims"
    return float_tensors(node)


@register("repeat", [aten.repeat.default], ["copy"], support=_repeat_support, variants=())
def lower_repeat(ctx, node: Node) -> None:
    x = ctx.inp(node.args[0])
    y = ctx.out(node)
    sizes, strides = _repeat_plan(x.shape, list(node.args[1]))
    ctx.copy(x, y, sizes, strides, 0)


@register("flip", [aten.flip.default], ["copy"], support=float_tensors, variants=())
def lower_flip(ctx, node: Node) -> None:
    x = ctx.inp(node.args[0])
    y = ctx.out(node)
    if not x.shape:
        ctx.copy(x, y, [1], [0], 0)
        return
    rank = len(x.shape)
    flipped = {d % rank for d in node.args[1]}
    strides, offset = contiguous_strides(x.shape), 0
    for d in flipped:
        offset = offset + (x.shape[d] - 1) * strides[d]
        strides[d] = -strides[d]
    ctx.copy(x, y, x.shape, strides, offset)


def _unfold_support(node: Node) -> str | None:
    rank = node.args[0].meta["val"].dim()
    if rank == 0 or rank + 1 > MAX_RANK:
        return f"unfold of a rank-{rank} input (the copy walks 1 to 6 dims)"
    return float_tensors(node)


@register("unfold", [aten.unfold_copy.default], ["copy"], support=_unfold_support, variants=())
def lower_unfold(ctx, node: Node) -> None:
    """Windows of `size` every `step` along `dim`, as a new last dim."""
    x = ctx.inp(node.args[0])
    y = ctx.out(node, shape_of(node))
    dim, step = node.args[1], node.args[3]
    strides = contiguous_strides(x.shape)
    dim %= len(x.shape)
    src = list(strides)
    src[dim] = strides[dim] * step
    ctx.copy(x, y, y.shape, src + [strides[dim]], 0)
