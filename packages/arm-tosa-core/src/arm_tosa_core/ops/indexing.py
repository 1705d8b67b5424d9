"""Indexing: embedding, index_select and single-tensor `aten.index` as TOSA GATHER, index_copy and
single-tensor index_put (a static KV cache's update) as TOSA SCATTER, plus the tensor factories (full,
zeros, arange, ...) that become compile-time constants.

GATHER reads values [N, K, C] at indices [N, W] (int32) into [N, W, C]. Each rule reshapes its operand
so that the indexed dim is K (in the operand's physical layout, so no TRANSPOSE is added), and the
index tensor so that it is [N, W]. int64 indices: constants are narrowed to int32 here after a range
check; runtime ones already cross the delegate boundary as INT32 (see lowering.py).
"""

from __future__ import annotations

import math

import torch
from torch.fx import Node

from .. import layout
from ..builder import Op, tosa_dtype
from ..context import LoweringContext, Value
from ..helpers.gather import gather_dim, gather_indices
from ..helpers.shapes import _FACTORIES, _INDEX_DTYPES, is_compile_time, values_support
from ..registry import Quant, aten_target, register_op

aten = torch.ops.aten


def _index_support(index: Node) -> str | None:
    dtype = index.meta["val"].dtype
    if dtype not in _INDEX_DTYPES:
        return f"indices of dtype {dtype} are not lowered (only int32/int64 index tensors)"
    return None


# -- embedding ----------------------------------------------------------------------------------
def _embedding_support(node: Node, spec) -> str | None:
    return values_support(node.args[0], spec, node) or _index_support(node.args[1])


@register_op("embedding", [aten.embedding.default], support=_embedding_support,
             quant=Quant.SHARED, fp_index_math=True, folds_constants=True,
             index_operand=lambda n: (n.args[1], n.args[0].meta["val"].shape[0]))  # GATHER: float (FP), int8/16/32 (INT; quantized codes too)
def lower_embedding(ctx: LoweringContext, node: Node) -> Value:
    weight, index = ctx.val(node.args[0]), ctx.val(node.args[1])
    shape, _ = ctx.out_meta(node)
    rows = gather_dim(ctx, weight, 0, index)  # [W, D]
    return ctx.reshape(rows, shape)


# -- index_select -------------------------------------------------------------------------------
def _index_select_support(node: Node, spec) -> str | None:
    return values_support(node.args[0], spec, node) or _index_support(node.args[2])


@register_op("index_select", [aten.index_select.default], support=_index_select_support,
             quant=Quant.SHARED, fp_index_math=True, folds_constants=True,
             index_operand=lambda n: (n.args[2], n.args[0].meta["val"].shape[n.args[1]]))  # GATHER: float (FP), int8/16/32 (INT; quantized codes too)
def lower_index_select(ctx: LoweringContext, node: Node) -> Value:
    x, index = ctx.val(node.args[0]), ctx.val(node.args[2])
    shape, _ = ctx.out_meta(node)
    out = gather_dim(ctx, x, node.args[1] % max(x.rank, 1), index)
    return ctx.reshape(out, shape)  # a 0-d index drops nothing for index_select; shapes already agree


# -- index_copy / index_put: SCATTER ------------------------------------------------------------
def scatter_dim(ctx: LoweringContext, x: Value, dim: int, index: Value, src: Value) -> Value:
    """x with the entries of logical dim `dim` that `index` names replaced by `src`'s: one SCATTER.

    SCATTER writes input [N, W, C] into values [N, K, C] at indices [N, W]; like `gather_dim` it works
    in x's physical layout (dims before `dim` are N, after it C), and `src` is brought to that layout.
    TOSA leaves a repeated index within one SCATTER undefined (torch keeps one of the writes): the
    positions a KV cache writes are distinct."""
    shape = list(x.shape)
    perm = layout.identity(x.rank) if x.is_const else x.perm
    dtype = tosa_dtype(x.dtype) if x.is_const else x.tensor.dtype
    xt = ctx.tensor(x, perm, dtype)
    axis = perm.index(dim)
    physical = list(xt.shape)
    n, k, c = math.prod(physical[:axis]), physical[axis], math.prod(physical[axis + 1:])
    width = index.const.numel() if index.is_const else math.prod(index.shape)
    if list(src.shape) != shape[:dim] + [width] + shape[dim + 1:]:  # setitem drops leading size-1 dims
        src = ctx.reshape(src, shape[:dim] + [width] + shape[dim + 1:])
    st = ctx.tensor(src, perm, dtype)
    values = ctx.b.reshape(xt, [n, k, c])
    written = ctx.b.op(Op.SCATTER, [values, gather_indices(ctx, index, k, n), ctx.b.reshape(st, [n, width, c])],
                       [n, k, c], dtype)
    return ctx.from_tensor(ctx.b.reshape(written, physical), shape, x.dtype, perm)


def _scatter_values_support(node: Node, spec, values: Node, source: Node, index: Node, dim: int) -> str | None:
    if not is_compile_time(index) and index.meta["val"].dim() != 1:
        return "a scatter index of rank > 1 is not lowered (index_copy/index_put take a 1-d position list)"
    want = list(values.meta["val"].shape)
    want[dim] = index.meta["val"].numel()
    have = list(source.meta["val"].shape)
    if math.prod(have) != math.prod(want) or list(torch.broadcast_shapes(have, want)) != want:
        return (f"the written values have shape {have}, not {want}: broadcasting into a scatter is not "
                "lowered (only leading size-1 dims may be missing, as `cache[:, :, pos] = v` exports)")
    reason = values_support(values, spec, node) or _index_support(index)
    if reason:
        return reason.replace("gathering", "scattering").replace("GATHER", "SCATTER")
    return None


def _index_copy_support(node: Node, spec) -> str | None:
    dim = node.args[1] % node.args[0].meta["val"].dim()
    return _scatter_values_support(node, spec, node.args[0], node.args[3], node.args[2], dim)


@register_op("index_copy", [aten.index_copy.default], support=_index_copy_support, quant=Quant.SHARED,
             shared_inputs=4, preserve=True, fp_index_math=True,
             quant_aliases=(aten.index_copy_.default,),  # positions index the cache: torch raises on others
             index_operand=lambda n: (n.args[2], n.args[0].meta["val"].shape[n.args[1]]))
def lower_index_copy(ctx: LoweringContext, node: Node) -> Value:
    """`cache.index_copy_(dim, pos, new)` (kept whole: exir would make it an index_put)."""
    x, index, src = ctx.val(node.args[0]), ctx.val(node.args[2]), ctx.val(node.args[3])
    return scatter_dim(ctx, x, node.args[1] % max(x.rank, 1), index, src)


def _put_dim(node: Node) -> int | None:
    """The dim of an index_put's single index tensor (`x[:, :, pos] = v`), or None for other forms."""
    given = [i for i, t in enumerate(node.args[1]) if t is not None]
    return given[0] if len(given) == 1 else None


def _index_put_support(node: Node, spec) -> str | None:
    dim = _put_dim(node)
    if dim is None:
        return "index_put with several index tensors is not lowered (only one, e.g. cache[:, :, pos] = v)"
    if len(node.args) > 3 and node.args[3]:
        return "index_put with accumulate=True is not lowered (SCATTER overwrites; use index_add)"
    index = node.args[1][dim]
    if index.meta["val"].dtype == torch.bool:
        return "boolean-mask index_put is not lowered (where(mask, v, x) is)"
    return _scatter_values_support(node, spec, node.args[0], node.args[2], index, dim)


def _put_index_operand(node: Node) -> tuple[Node, int, bool] | None:
    """The one index tensor of `cache[:, :, pos] = v` and its dim's size; torch also takes -size..-1."""
    dim = _put_dim(node)
    if dim is None or not isinstance(node.args[1][dim], Node):
        return None
    return node.args[1][dim], node.args[0].meta["val"].shape[dim], True


@register_op("index_put", [aten.index_put.default], support=_index_put_support, quant=Quant.SHARED,
             shared_inputs=3, preserve=True, fp_index_math=True,
             quant_aliases=(aten.index_put_.default,), index_operand=lambda n: _put_index_operand(n))
def lower_index_put(ctx: LoweringContext, node: Node) -> Value:
    """`cache[:, :, pos] = new` with one index tensor, accumulate=False."""
    dim = _put_dim(node)
    x, src = ctx.val(node.args[0]), ctx.val(node.args[2])
    return scatter_dim(ctx, x, dim, ctx.val(node.args[1][dim]), src)


# -- aten.index.Tensor with one index tensor ----------------------------------------------------


def _index_tensor_support(node: Node, spec) -> str | None:
    indices = node.args[1]
    given = [i for i in indices if i is not None]
    if len(given) != 1:
        return f"indexing with {len(given)} index tensors is not lowered (only one, e.g. x[:, idx])"
    index = given[0]
    if index.meta["val"].dtype == torch.bool:
        return "boolean-mask indexing is not lowered (its output shape depends on the data)"
    if not is_compile_time(index):
        return ("indexing with a runtime index tensor is not lowered (negative indices would need wrapping); "
                "use torch.index_select")
    return values_support(node.args[0], spec, node) or _index_support(index)


@register_op("index_tensor", [aten.index.Tensor], support=_index_tensor_support,
             quant=Quant.SHARED, fp_index_math=True, folds_constants=True)  # GATHER: float (FP), int8/16/32 (INT; quantized codes too)
def lower_index_tensor(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    dim = next(i for i, idx in enumerate(node.args[1]) if idx is not None)
    shape, _ = ctx.out_meta(node)
    out = gather_dim(ctx, x, dim, ctx.val(node.args[1][dim]), wrap_negative=True)
    return ctx.reshape(out, shape)


# -- tensor factories: compile-time constants ---------------------------------------------------


def _factory_support(node: Node, spec) -> str | None:
    for a in list(node.args) + list(node.kwargs.values()):
        if isinstance(a, (list, tuple)) and any(isinstance(x, Node) for x in a):
            return "a tensor factory with a data-dependent size is not lowered"
    dtype = node.meta["val"].dtype
    if dtype == torch.int64:
        values = _evaluate(node)
        if values.numel() and (values.max() > torch.iinfo(torch.int32).max
                               or values.min() < torch.iinfo(torch.int32).min):
            return "int64 constant does not fit in int32, which TOSA uses for it"
    return None


def _evaluate(node: Node) -> torch.Tensor:
    """Run the factory eagerly; tensor inputs of *_like ops only give their shape and dtype."""
    def concrete(a):
        if isinstance(a, Node):
            meta = a.meta["val"]
            return torch.zeros(tuple(int(d) for d in meta.shape), dtype=meta.dtype)
        return a

    kwargs = {k: v for k, v in node.kwargs.items() if k not in ("device", "pin_memory")}
    return aten_target(node.target)(*[concrete(a) for a in node.args], **kwargs)


@register_op("tensor_factory", sorted(_FACTORIES, key=str), support=_factory_support,
             folds_constants=True, constant_output=True, fp_index_math=True)
def lower_tensor_factory(ctx: LoweringContext, node: Node) -> Value:
    shape, dtype = ctx.out_meta(node)
    return ctx.constant(_evaluate(node).to(dtype).reshape(shape))
