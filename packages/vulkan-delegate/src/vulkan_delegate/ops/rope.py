"""Rotary position embedding: the chain `x * cos + rotate_half(x) * sin` (Llama's half-split layout) as
one `rope` dispatch.

exir leaves rotate_half as slice, slice (or a split), neg and cat (two copies), so the chain is 8 dispatches per
tensor, each moving a few KB in a decode step. The add that ends the chain is lowered as `rope` when its
operands match the pattern; the chain's own dispatches are then unread and `Graph.prune_unread` drops
them (any that another node reads stay, so the match never changes a result).
"""

from __future__ import annotations

import operator

import torch
from torch.fx import Node

from ..graph import numel
from ..lower import shape_of
from ..registry import aten_key
from .elementwise import broadcast_strides

aten = torch.ops.aten
_SLICE, _NEG, _CAT, _MUL = aten.slice_copy.Tensor, aten.neg.default, aten.cat.default, aten.mul.Tensor
_SPLIT = aten.split_with_sizes_copy.default


def _is(node, target) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and aten_key(node.target) == target


def _last_dim_slice(node, rank: int, size: int) -> tuple[Node, int, int] | None:
    """(source, start, end) of a step-1 slice along the last dim, bounds clamped to `size`."""
    if not _is(node, _SLICE):
        return None
    args = list(node.args) + [None] * (5 - len(node.args))
    src, dim, start, end, step = args[:5]
    if dim is None or dim % rank != rank - 1 or step not in (None, 1):
        return None
    start, end = 0 if start is None else start, size if end is None else end
    if not (isinstance(start, int) and isinstance(end, int)):
        return None
    return src, min(max(start + size if start < 0 else start, 0), size), min(max(end + size if end < 0 else end, 0), size)


def _last_dim_part(node, rank: int, size: int) -> tuple[Node, int, int] | None:
    """(source, start, end) of a last-dim slice, or of one part of a last-dim split_with_sizes_copy (exir's
    form of torch.split / chunk, read through getitem)."""
    if not (isinstance(node, Node) and node.target is operator.getitem and _is(node.args[0], _SPLIT)):
        return _last_dim_slice(node, rank, size)
    split, k = node.args
    src, sizes = split.args[0], list(split.args[1])
    dim = split.args[2] if len(split.args) > 2 else 0
    if dim % rank != rank - 1 or not all(isinstance(v, int) for v in sizes) or sum(sizes) != size:
        return None
    return src, sum(sizes[:k]), sum(sizes[:k + 1])


def rotate_half_source(node) -> Node | None:
    """x where `node` is cat([-x[..., h:], x[..., :h]], -1) with x's last dim 2h (static; the halves sliced or
    split), else None."""
    if not _is(node, _CAT) or len(node.args[0]) != 2:
        return None
    shape = shape_of(node)
    rank, size = len(shape), shape[-1] if shape else None
    dim = node.args[1] if len(node.args) > 1 else 0
    if not rank or dim % rank != rank - 1 or not isinstance(size, int) or size % 2:
        return None
    neg, low = node.args[0]
    if not _is(neg, _NEG):
        return None
    hi, lo = _last_dim_part(neg.args[0], rank, size), _last_dim_part(low, rank, size)
    h = size // 2
    if hi is None or lo is None or hi[0] is not lo[0] or hi[1:] != (h, size) or lo[1:] != (0, h):
        return None
    return hi[0] if shape_of(hi[0]) == shape else None


def _split_mul(mul, pick) -> tuple[Node, Node] | None:
    """(the factor `pick` accepts, the other factor) of a mul node, else None."""
    if not _is(mul, _MUL) or len(mul.args) != 2 or mul.kwargs:
        return None
    for a, b in (mul.args, mul.args[::-1]):
        if isinstance(b, Node) and pick(a):
            return a, b
    return None


def match_rope(add: Node) -> tuple[Node, Node, Node] | None:
    """(x, cos, sin) when `add` is x * cos + rotate_half(x) * sin (either order of every product and of
    the sum), x of the add's shape, cos and sin float tensors broadcast to it; else None."""
    if len(add.args) != 2 or add.kwargs or not all(isinstance(a, Node) for a in add.args):
        return None
    out = shape_of(add)
    for first, second in (add.args, add.args[::-1]):
        rot = _split_mul(second, lambda a: rotate_half_source(a) is not None)
        if rot is None:
            continue
        x = rotate_half_source(rot[0])
        direct = _split_mul(first, lambda a, x=x: a is x)
        if direct is None or shape_of(x) != out:
            continue
        cos, sin = direct[1], rot[1]
        if all(n.meta["val"].dtype.is_floating_point and len(shape_of(n)) <= len(out) for n in (cos, sin)):
            return x, cos, sin
    return None


def lower_rope(ctx, node: Node) -> bool:
    """One `rope` dispatch for an add that ends the rotary chain; False (nothing emitted) otherwise."""
    found = match_rope(node) if ctx.g.compute_dtype == ctx.dtype(node.meta["val"].dtype) else None
    if found is None:
        return False
    x, cos, sin = (ctx.inp(a) for a in found)
    ctx.g.source = ctx.g.source.rsplit(": ", 1)[0] + ": rope"  # the profile's label: not the chain's last op
    y = ctx.out(node)
    shape = y.shape
    n = numel(shape)
    sizes = [1] * (6 - len(shape)) + list(shape)
    ctx.dispatch("rope", [x, cos, sin, y], [n, *sizes, *broadcast_strides(cos.shape, shape),
                                           *broadcast_strides(sin.shape, shape), shape[-1] // 2], (n,))
    return True
