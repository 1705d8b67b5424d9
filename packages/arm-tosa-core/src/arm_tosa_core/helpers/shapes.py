"""Slices, edge padding and index values shared by the data-movement, resize and gather families."""

from __future__ import annotations

import torch
from torch.fx import Node

from .. import layout
from ..builder import Op, T
from ..context import LoweringContext, Value
from .common import aten_target

aten = torch.ops.aten


def slice_value(ctx: LoweringContext, x: Value, starts: list[int], sizes: list[int], dtype) -> Value:
    """SLICE in x's layout; `starts`/`sizes` are logical."""
    if x.is_const:
        index = tuple(slice(s, s + n) for s, n in zip(starts, sizes, strict=True))
        return ctx.constant(x.const[index])
    if list(sizes) == list(x.shape):
        return x
    t = ctx.b.op(Op.SLICE, [x.tensor, ctx.b.shape_const(layout.apply(starts, x.perm)),
                            ctx.b.shape_const(layout.apply(sizes, x.perm))],
                 layout.apply(sizes, x.perm), x.tensor.dtype)
    return Value(tuple(sizes), dtype, tensor=t, perm=x.perm, qparams=x.qparams)


MODES = ("reflect", "replicate", "circular")


def slice_axis(ctx: LoweringContext, t: T, axis: int, start: int, length: int) -> T:
    """Rows [start, start + length) of physical `axis` of `t`."""
    begin = [0] * len(t.shape)
    size = list(t.shape)
    begin[axis], size[axis] = start, length
    return ctx.b.op(Op.SLICE, [t, ctx.b.shape_const(begin), ctx.b.shape_const(size)], size, t.dtype)


def pad_axis(ctx: LoweringContext, t: T, axis: int, lo: int, hi: int, mode: str) -> T:
    """`t` padded by `lo`/`hi` rows on physical `axis`, the new rows copied from `t` per `mode`."""
    if lo == 0 and hi == 0:
        return t
    n = t.shape[axis]
    if mode == "circular":
        before = [slice_axis(ctx, t, axis, n - lo, lo)] if lo else []
        after = [slice_axis(ctx, t, axis, 0, hi)] if hi else []
    elif mode == "reflect":  # x[lo], ..., x[1] | x | x[n-2], ..., x[n-1-hi]
        before = [slice_axis(ctx, t, axis, i, 1) for i in range(lo, 0, -1)]
        after = [slice_axis(ctx, t, axis, n - 2 - i, 1) for i in range(hi)]
    else:  # replicate
        before = [slice_axis(ctx, t, axis, 0, 1)] * lo
        after = [slice_axis(ctx, t, axis, n - 1, 1)] * hi
    shape = list(t.shape)
    shape[axis] = n + lo + hi
    return ctx.b.op(Op.CONCAT, [*before, t, *after], shape, t.dtype, axis)


_INDEX_DTYPES = (torch.int32, torch.int64)


def values_support(values: Node, spec, node: Node | None = None) -> str | None:
    """GATHER's value types: float needs the FP profile, int8/16/32 the INT profile (quantized values
    are int8 codes)."""
    if node is not None and node.meta.get("arm_quantized"):
        return None
    dtype = values.meta["val"].dtype
    if dtype.is_floating_point and spec.support_float():
        return None
    if dtype in (torch.int8, torch.int16, torch.int32) and spec.support_integer():
        return None
    return f"gathering {dtype} values is not lowered for {spec} (TOSA GATHER takes float (FP) or int8/16/32 (INT))"


_PASS_THROUGH = {aten.clone.default, aten._to_copy.default, aten.view_copy.default, aten.alias_copy.default}


def is_compile_time(node) -> bool:
    """Whether `node` is a parameter/buffer/constant or a factory/copy of one (decided before lowering)."""
    seen = 0
    while isinstance(node, Node) and seen < 8:
        if node.op == "placeholder":
            return bool(node.meta.get("arm_constant", False))
        target = aten_target(node.target)
        if target in _FACTORIES:
            return True
        name = getattr(target, "__name__", str(target))
        if target not in _PASS_THROUGH and "_clone_dim_order" not in name and "_to_dim_order_copy" not in name:
            return False
        node, seen = node.args[0], seen + 1
    return False


_FACTORIES = {
    aten.full.default, aten.full_like.default, aten.zeros.default, aten.ones.default,
    aten.zeros_like.default, aten.ones_like.default, aten.scalar_tensor.default, aten.arange.default,
    aten.arange.start, aten.arange.start_step,
}
