"""Layout ops. Views of contiguous tensors are free (same storage, new shape); permute, slice,
select, expand, cat and split are strided copies (shader `copy`)."""

from __future__ import annotations

import torch
from torch.fx import Node

from ..graph import I32, LoweringError, contiguous_strides
from ..lower import dim_of, shape_of
from ..registry import FLOATS, INTS, any_tensors, aten_key, register

aten = torch.ops.aten

# the forms exir's edge graphs hold (views are functionalized to *_copy; clone and _to_copy become the
# dim-order ops unless dim order is skipped)
VIEWS = [aten.view_copy.default, aten.squeeze_copy.dims, aten.unsqueeze_copy.default, aten.alias_copy.default,
         aten.clone.default, aten._to_copy.default, torch.ops.dim_order_ops._clone_dim_order.default,
         torch.ops.dim_order_ops._to_dim_order_copy.default]


def _view_support(node: Node) -> str | None:
    dtype = node.kwargs.get("dtype")
    if dtype is not None and dtype not in FLOATS + INTS:
        return f"cast to {dtype}"
    if dtype == torch.int64 and node.args[0].meta["val"].dtype.is_floating_point:
        return "a float to int64 cast (values may exceed the int32 the delegate computes integers in)"
    # a copy to another dim order (x.to(memory_format=torch.channels_last)) is a logical identity: the
    # delegate computes on contiguous tensors and lays out only its partition's I/O as planned (lower.py)
    return any_tensors(node)


@register("view", VIEWS, ["copy"], support=_view_support, variants=())
def lower_view(ctx, node: Node) -> None:
    """Views and same-kind casts (float<->float computes in the compute dtype, int64<->int32 is int32)
    share storage; float<->int and casts to bool copy (float -> int truncates, -> bool is x != 0)."""
    src, dst = node.args[0].meta["val"].dtype, node.meta["val"].dtype
    x = ctx.inp(node.args[0])
    if ctx.dtype(src) == ctx.dtype(dst) and (dst != torch.bool or src == torch.bool):
        ctx.values[node] = ctx.g.alias(x, shape_of(node))
        return
    if x.dtype != ctx.dtype(src):
        raise LoweringError(f"cast input of device dtype {x.dtype}")
    y = ctx.out(node)
    shape = y.shape or [1]
    ctx.copy(x, y, shape, contiguous_strides(shape), 0, to_bool=dst == torch.bool and y.dtype == I32)


def _copy_from(ctx, node: Node, dims: list, src_strides: list, src_off=0) -> None:
    x = ctx.inp(node.args[0])
    y = ctx.out(node)
    ctx.copy(x, y, y.shape if y.shape else [1], src_strides if y.shape else [0], src_off)
    del dims


@register("permute", [aten.permute_copy.default], ["copy"], support=any_tensors, variants=())
def lower_permute(ctx, node: Node) -> None:  # exir turns t and transpose into permute_copy
    x_shape = shape_of(node.args[0])
    rank = len(x_shape)
    perm = [d % rank for d in node.args[1]]
    moved = [p for p in perm if not (isinstance(x_shape[p], int) and x_shape[p] == 1)]
    if moved == sorted(moved):  # only dims of size 1 move (a decode step's [1, 1, H, D] -> [1, H, 1, D]): a view
        ctx.values[node] = ctx.g.alias(ctx.inp(node.args[0]), shape_of(node))
        return
    s = contiguous_strides(x_shape)
    _copy_from(ctx, node, perm, [s[p] for p in perm])


def _norm_index(i, size):
    if i is None:
        return 0
    i = dim_of(i) if not isinstance(i, Node) else dim_of(i.meta["val"])
    return i + size if isinstance(i, int) and i < 0 else i


@register("slice", [aten.slice_copy.Tensor, aten.select_copy.int], ["copy"], support=any_tensors,
          variants=())
def lower_slice(ctx, node: Node) -> None:
    x_shape = shape_of(node.args[0])
    rank = len(x_shape)
    dim = (node.args[1] if len(node.args) > 1 else 0) % rank
    s = contiguous_strides(x_shape)
    t = aten_key(node.target)
    if t == aten.select_copy.int:
        start = _norm_index(node.args[2], x_shape[dim])
        strides = s[:dim] + s[dim + 1:]
        _copy_from(ctx, node, [], strides, start * s[dim])
        return
    start = _norm_index(node.args[2] if len(node.args) > 2 else 0, x_shape[dim])
    step = node.args[4] if len(node.args) > 4 else 1
    strides = list(s)
    strides[dim] = s[dim] * step
    _copy_from(ctx, node, [], strides, start * s[dim])


@register("expand", [aten.expand_copy.default], ["copy"], support=any_tensors,
          variants=())
def lower_expand(ctx, node: Node) -> None:
    x_shape = shape_of(node.args[0])
    out = shape_of(node)
    s = contiguous_strides(x_shape)
    pad = len(out) - len(x_shape)
    strides = [0] * pad + [0 if (d == 1 and o != 1) else st for d, o, st in zip(x_shape, out[pad:], s, strict=True)]
    _copy_from(ctx, node, [], strides)


def _as_strided_support(node: Node) -> str | None:
    """as_strided reads the input's storage: that storage is the delegate's contiguous buffer only when
    the input is contiguous, and every addressed element must lie inside it (static sizes only)."""
    x = node.args[0].meta["val"]
    size, stride = node.args[1], node.args[2]
    offset = node.args[3] if len(node.args) > 3 and node.args[3] is not None else 0
    if not all(isinstance(v, int) for v in [*size, *stride, offset, *x.shape]):
        return "as_strided with a dynamic size, stride or offset"
    if not x.is_contiguous():
        return "as_strided of a non-contiguous input"
    if min(stride, default=0) < 0 or offset < 0:
        return "as_strided with a negative stride or offset"
    if any(n == 0 for n in size):
        return "as_strided to an empty tensor"
    if offset + sum((n - 1) * st for n, st in zip(size, stride, strict=True)) >= x.numel():
        return "as_strided reaching past its input's elements"
    return any_tensors(node)


@register("as_strided", [aten.as_strided_copy.default], ["copy"], support=_as_strided_support, variants=())
def lower_as_strided(ctx, node: Node) -> None:
    """One strided copy (exir writes a layout restride, e.g. ConvNeXt's pooled NHWC view, this way)."""
    offset = node.args[3] if len(node.args) > 3 and node.args[3] is not None else 0
    _copy_from(ctx, node, [], list(node.args[2]) or [0], offset)


def _cat_support(node: Node) -> str | None:
    if len({a.meta["val"].dtype for a in node.args[0]}) > 1:
        return "cat of tensors of different dtypes"
    return any_tensors(node)


@register("cat", [aten.cat.default], ["copy"], support=_cat_support, variants=())
def lower_cat(ctx, node: Node) -> None:
    y = ctx.out(node)
    rank = len(y.shape)
    dim = (node.args[1] if len(node.args) > 1 else 0) % rank
    ys = contiguous_strides(y.shape)
    offset = 0
    for arg in node.args[0]:
        x = ctx.inp(arg)
        if x.shape[dim] == 0:
            continue
        ctx.copy(x, y, x.shape, contiguous_strides(x.shape), 0, ys, offset * ys[dim])
        offset = offset + x.shape[dim]


@register("split", [aten.split_with_sizes_copy.default, aten.split_copy.Tensor, aten.unbind_copy.int],
          ["copy"], support=any_tensors, variants=())
def lower_split(ctx, node: Node) -> None:
    x = ctx.inp(node.args[0])
    rank = len(x.shape)
    t = aten_key(node.target)
    dim = (node.args[2] if t != aten.unbind_copy.int and len(node.args) > 2 else
           node.args[1] if t == aten.unbind_copy.int and len(node.args) > 1 else 0) % rank
    s = contiguous_strides(x.shape)
    outs, offset = [], 0
    for v in node.meta["val"]:
        shape = [dim_of(d) for d in v.shape]
        y = ctx.g.new_tensor(shape, x.dtype)
        strides = s if t != aten.unbind_copy.int else s[:dim] + s[dim + 1:]
        ctx.copy(x, y, shape or [1], strides or [0], offset * s[dim])
        offset = offset + (shape[dim] if t != aten.unbind_copy.int else 1)
        outs.append(y)
    ctx.values[node] = outs
