"""Reading by index tensors (int32/int64 indices, computed as int32; their values are bounded by the
indexed size, or torch would raise): embedding, index_select and index.Tensor with one index tensor
(shader `take`: whole rows along one dim), gather (shader `gather`: one element per index)."""

from __future__ import annotations

import torch
from torch.fx import Node

from ..graph import VARIANT, numel
from ..lower import shape_of
from ..registry import INT_VARIANTS, any_tensors, aten_key, register

aten = torch.ops.aten
EMBEDDING, INDEX_SELECT, INDEX = aten.embedding.default, aten.index_select.default, aten.index.Tensor


def _index_dtype(idx: Node) -> str | None:
    if not isinstance(idx, Node) or idx.meta["val"].dtype not in (torch.int32, torch.int64):
        return "an index that is not an int32/int64 tensor"
    return None


def _take_form(node: Node) -> tuple[Node, int, Node] | None:
    """(x, dim, index) of a node that reads whole rows of x along dim."""
    t = aten_key(node.target)
    if t == EMBEDDING:
        return node.args[0], 0, node.args[1]
    if t == INDEX_SELECT:
        x = node.args[0]
        return x, node.args[1] % max(x.meta["val"].dim(), 1), node.args[2]
    tensors = [(d, i) for d, i in enumerate(node.args[1]) if i is not None]
    if len(tensors) != 1:
        return None
    return node.args[0], tensors[0][0], tensors[0][1]


def _take_support(node: Node) -> str | None:
    form = _take_form(node)
    if form is None:
        return "index with more than one index tensor"
    why = _index_dtype(form[2])
    return why or any_tensors(node)


@register("take", [EMBEDDING, INDEX_SELECT, INDEX], ["take"], support=_take_support, variants=INT_VARIANTS)
def lower_take(ctx, node: Node) -> None:
    x_node, dim, idx_node = _take_form(node)
    x, idx = ctx.inp(x_node), ctx.inp(idx_node)
    xs = shape_of(x_node) or [1]
    y = ctx.out(node)
    n = numel(y.shape)
    ctx.dispatch("take", [x, idx, y], [n, numel(xs[:dim]), numel(idx.shape), numel(xs[dim + 1:]), xs[dim]], (n,),
                 variant=VARIANT[x.dtype])


def _gather_support(node: Node) -> str | None:
    if node.kwargs.get("sparse_grad") or (len(node.args) > 3 and node.args[3]):
        return "gather with sparse_grad"
    return _index_dtype(node.args[2]) or any_tensors(node)


@register("gather", [aten.gather.default], ["gather"], support=_gather_support, variants=INT_VARIANTS)
def lower_gather(ctx, node: Node) -> None:
    x_node, dim, idx_node = node.args[:3]
    x, idx = ctx.inp(x_node), ctx.inp(idx_node)
    xs = shape_of(x_node) or [1]
    rank = len(xs)
    dim %= rank
    y = ctx.out(node)
    ys = idx.shape or [1]
    if len(ys) != rank:
        raise ValueError("gather index of another rank than its input")
    strides = [numel(xs[d + 1:]) for d in range(rank)]
    pad = 6 - rank
    n = numel(ys)
    ctx.dispatch("gather", [x, idx, y], [n, *([1] * pad + list(ys)), *([0] * pad + strides), pad + dim, xs[dim]],
                 (n,), variant=VARIANT[x.dtype])
