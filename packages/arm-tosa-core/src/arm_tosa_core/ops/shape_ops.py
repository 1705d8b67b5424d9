"""Data movement: view/reshape, permute, squeeze/unsqueeze, expand/repeat, cat, split, slice, select, pad,
clone and dtype casts. Permutes only change a value's layout (no operator until a rule needs another
layout); views keep the layout when only size-1 dims move."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.fx import Node

from .. import layout
from ..builder import DType, Op, tosa_dtype
from ..context import LoweringContext, Value
from ..errors import LoweringError
from ..helpers.common import arg
from ..helpers.shapes import slice_value
from ..registry import (
    INDEX_INTEGERS,
    OpEntry,
    Quant,
    exact_in_float32,
    fp_movable_integers,
    lowered_metas,
    register_op,
    register_quant_aliases,
)
from ..specification import TosaSpecification

aten = torch.ops.aten
import executorch.exir.passes.dim_order_ops_registry  # noqa: E402,F401  (registers dim_order_ops)

edge_dim_order = torch.ops.dim_order_ops


@register_op("view", [aten.view_copy.default, aten.view.default, aten._unsafe_view.default,
                      aten.reshape.default, aten.squeeze_copy.dims, aten.squeeze_copy.dim,
                      aten.squeeze_copy.default, aten.unsqueeze_copy.default, aten.alias_copy.default], quant=Quant.SHARED, quant_aliases=[aten.flatten.using_ints, aten.dropout.default, aten.squeeze.dim, aten.squeeze.dims, aten.unsqueeze.default, aten.contiguous.default],
             folds_constants=True, fp_index_math=True, fp_integer_rule=fp_movable_integers)
def lower_view(ctx: LoweringContext, node: Node) -> Value:
    shape, _ = ctx.out_meta(node)
    x = ctx.val(node.args[0])
    if not x.is_const and x.tensor.dtype == DType.INT32 and not ctx.spec.support_integer():
        # TOSA FP has no int32 RESHAPE: move the values as float32, exact within +-2^24, which the
        # support rule proved (`registry.int_range`: e.g. token ids bounded by the vocabulary)
        as_float = ctx.from_tensor(ctx.b.op(Op.CAST, [x.tensor], x.tensor.shape, DType.FP32), x.shape,
                                   torch.float32, x.perm)
        moved = ctx.reshape(as_float, shape)
        return ctx.emit(Op.CAST, [moved.tensor], shape, x.dtype, moved.perm)
    return ctx.reshape(x, shape)


@register_op("permute", [aten.permute_copy.default, aten.permute.default], quant=Quant.SHARED, folds_constants=True)
def lower_permute(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    dims = [d % x.rank for d in node.args[1]]
    shape, dtype = ctx.out_meta(node)
    if x.is_const:
        return ctx.constant(x.const.permute(*dims))
    return Value(shape, dtype, tensor=x.tensor, perm=layout.after_permute(x.perm, dims), qparams=x.qparams)


@register_op("transpose", [aten.transpose_copy.int, aten.t_copy.default], quant=Quant.SHARED, quant_aliases=[aten.transpose.int, aten.t.default],
             folds_constants=True)
def lower_transpose(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    d0, d1 = (node.args[1] % x.rank, node.args[2] % x.rank) if len(node.args) > 2 else (0, 1)
    dims = list(range(x.rank))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    shape, dtype = ctx.out_meta(node)
    if x.is_const:
        return ctx.constant(x.const.permute(*dims))
    return Value(shape, dtype, tensor=x.tensor, perm=layout.after_permute(x.perm, dims), qparams=x.qparams)


def _fp_cast_rule(node: Node, entry: OpEntry, spec: TosaSpecification) -> str | None:
    """A cast under TOSA FP: int32 <-> float is a CAST (int64 <-> int32 no operator at all), but a
    cast between bool and an integer type is INT-profile only."""
    metas = lowered_metas(node)
    dtype = next(m.dtype for m in metas if m.dtype in INDEX_INTEGERS)
    kinds = {"float" if m.dtype.is_floating_point else "bool" if m.dtype == torch.bool else "int"
             for m in metas}
    if "bool" not in kinds:
        return None  # CAST between int32 and float, or no operator at all (int64 <-> int32)
    return (f"casting between bool and {dtype} needs the INT profile; under {spec} it runs on the CPU")


def _cast_support(node: Node, spec: TosaSpecification) -> str | None:
    """A float -> int64 cast of a computed tensor: TOSA computes it as int32, whose CAST saturates at +-2^31
    (1e10 came back 2147483647), so it stays on the CPU; an int32 or bool target is what torch computes."""
    src = node.args[0].meta.get("val")
    out = node.meta.get("val")
    if (isinstance(src, torch.Tensor) and isinstance(out, torch.Tensor) and src.dtype.is_floating_point
            and out.dtype == torch.int64 and not node.meta.get("arm_quantized")):
        return ("a float to int64 cast: TOSA computes int64 as int32, whose CAST saturates at 2^31 where torch "
                "keeps the value; cast to int32 in the model if its values fit")
    return None


@register_op("clone_cast", [aten.clone.default, aten._to_copy.default, edge_dim_order._clone_dim_order.default,
                            edge_dim_order._to_dim_order_copy.default], support=_cast_support, quant=Quant.SHARED,
             # export-time `x.to(dtype)` (Llama/T5 RMS norms: `hidden.to(torch.float32)`): annotated as a cast too, so
             # its output shares its input's qparams; unannotated, the next op's input observer requantized it
             quant_aliases=[aten.to.dtype], folds_constants=True, fp_index_math=True, fp_integer_rule=_fp_cast_rule)
def lower_clone_cast(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    shape, dtype = ctx.out_meta(node)
    if x.is_const:
        return ctx.constant(x.const.to(dtype))
    if node.meta.get("arm_quantized") and dtype.is_floating_point and not x.dtype.is_floating_point:
        return x  # bounded integers, quantized by a lookup (`registry.bounded_integer_cast`): no float
    if tosa_dtype(dtype) == x.tensor.dtype:
        return Value(shape, dtype, tensor=x.tensor, perm=x.perm, qparams=x.qparams)
    t = x.tensor
    # TOSA 1.0 has no CAST between bool and float (1.1 adds it): compose it from FP-profile operators
    if t.dtype == DType.BOOL and dtype.is_floating_point:
        dt = tosa_dtype(dtype)
        one, zero = ctx.scalar(1.0, dt, len(t.shape)), ctx.scalar(0.0, dt, len(t.shape))
        return ctx.emit(Op.SELECT, [t, one, zero], shape, dtype, x.perm)
    if t.dtype in _FLOAT_TOSA and dtype == torch.bool:
        zero = ctx.scalar(0.0, t.dtype, len(t.shape))
        is_zero = ctx.b.op(Op.EQUAL, [t, zero], t.shape, DType.BOOL)  # NaN != 0: true, as in torch
        return ctx.emit(Op.LOGICAL_NOT, [is_zero], shape, dtype, x.perm)
    if t.dtype in _FLOAT_TOSA and not dtype.is_floating_point:
        t = _truncate(ctx, t)  # torch truncates toward zero; TOSA CAST rounds to nearest
    return ctx.emit(Op.CAST, [t], shape, dtype, x.perm)


_FLOAT_TOSA = (DType.FP32, DType.FP16, DType.BF16)


def _truncate(ctx: LoweringContext, t):
    """Round toward zero: FLOOR for x >= 0, CEIL below."""
    b = ctx.b
    zero = ctx.scalar(0.0, t.dtype, len(t.shape))
    positive = b.op(Op.GREATER_EQUAL, [t, zero], t.shape, DType.BOOL)
    down, up = b.op(Op.FLOOR, [t], t.shape, t.dtype), b.op(Op.CEIL, [t], t.shape, t.dtype)
    return b.op(Op.SELECT, [positive, down, up], t.shape, t.dtype)


@register_op("expand", [aten.expand_copy.default, aten.expand.default], quant=Quant.SHARED, folds_constants=True)
def lower_expand(ctx: LoweringContext, node: Node) -> Value:
    shape, dtype = ctx.out_meta(node)
    x = ctx.with_rank(ctx.val(node.args[0]), len(shape))
    if x.is_const:
        return ctx.constant(x.const.expand(shape).contiguous())
    multiples = [o // i for o, i in zip(layout.apply(shape, x.perm), x.tensor.shape, strict=True)]
    if all(m == 1 for m in multiples):
        return x
    return ctx.emit(Op.TILE, [x.tensor, ctx.b.shape_const(multiples)], shape, dtype, x.perm)


def detach_copy_destinations(ep: ExportedProgram) -> ExportedProgram:
    """A program that overwrites a buffer or an input with `copy_`, with each functional `copy(dst, src)`
    given a zero tensor of dst's shape and dtype as `dst` (a compile-time constant): the copy's value is
    `src` cast and broadcast (`lower_copy` reads only dst's shape), but a partition holding it would take
    `dst` as an input no operator reads. vela drops such a TOSA input, and the Ethos-U payload then had
    fewer inputs than the delegate is called with (transformers' StaticCache runs
    `cumulative_length.copy_(cache_position[0])`: "assembled from different compiles" at load).

    exir's partitioners may not change the edge graph, so this runs before exir decomposes: the program
    is functionalized first (`run_decompositions({})`, which decomposes nothing), only when it has such
    a `copy_`. Returns `ep` itself otherwise."""
    if not any(_overwrites_placeholder(n, aten.copy_.default) for n in ep.graph.nodes):
        return ep
    ep = ep.run_decompositions({})
    graph = ep.graph
    for node in [n for n in graph.nodes if _overwrites_placeholder(n, aten.copy.default)]:
        dst = node.args[0]
        meta = dst.meta["val"]
        with graph.inserting_before(node):
            zeros = graph.call_function(aten.full.default, ([int(d) for d in meta.shape], 0),
                                        {"dtype": meta.dtype, "device": meta.device})
        zeros.meta["val"] = meta.new_zeros(meta.shape)
        node.replace_input_with(dst, zeros)
    graph.lint()
    ep.graph_module.recompile()
    return ep


def _overwrites_placeholder(node: Node, target) -> bool:
    return node.op == "call_function" and node.target is target and isinstance(node.args[0], Node) \
        and node.args[0].op == "placeholder"


@register_op("copy", [aten.copy.default], quant=Quant.SHARED, shared_inputs=2, folds_constants=True,
             fp_index_math=True, fp_integer_rule=exact_in_float32(moves=True), prepare_program=detach_copy_destinations)
def lower_copy(ctx: LoweringContext, node: Node) -> Value:
    """`self.copy_(src)` as a value (slice assignment `x[:, a:b] = v` exports as slice + copy +
    slice_scatter): `src` cast to self's dtype and broadcast to its shape; self's values are not read."""
    shape, dtype = ctx.out_meta(node)
    src = ctx.with_rank(ctx.val(node.args[1]), len(shape))
    if src.is_const:
        return ctx.constant(src.const.to(dtype).expand(shape).contiguous())
    if tosa_dtype(dtype) != src.tensor.dtype:
        raise LoweringError(f"copy from {src.dtype} into a {dtype} tensor is not lowered (only the same dtype)")
    multiples = [o // i for o, i in zip(layout.apply(shape, src.perm), src.tensor.shape, strict=True)]
    if all(m == 1 for m in multiples):
        return Value(shape, dtype, tensor=src.tensor, perm=src.perm, qparams=src.qparams)
    return ctx.emit(Op.TILE, [src.tensor, ctx.b.shape_const(multiples)], shape, dtype, src.perm)


@register_op("repeat", [aten.repeat.default], quant=Quant.SHARED, folds_constants=True)
def lower_repeat(ctx: LoweringContext, node: Node) -> Value:
    shape, dtype = ctx.out_meta(node)
    x = ctx.with_rank(ctx.val(node.args[0]), len(shape))
    if x.is_const:
        return ctx.constant(x.const.repeat(*node.args[1]))
    reps = list(node.args[1])
    multiples = [reps[p] for p in x.perm]
    return ctx.emit(Op.TILE, [x.tensor, ctx.b.shape_const(multiples)], shape, dtype, x.perm)


@register_op("cat", [aten.cat.default, aten.concat.default], quant=Quant.SHARED, quant_aliases=[aten.stack.default],
             folds_constants=True)
def lower_cat(ctx: LoweringContext, node: Node) -> Value:
    shape, dtype = ctx.out_meta(node)
    parts = [ctx.val(v) for v in node.args[0] if v.meta["val"].numel() > 0]
    dim = arg(node, 1, "dim", 0) % len(shape)
    perm = ctx.common_layout(parts, len(shape))
    tensors = [ctx.tensor(v, perm, tosa_dtype(dtype)) for v in parts]
    if len(tensors) == 1:
        return ctx.from_tensor(tensors[0], shape, dtype, perm)
    return ctx.emit(Op.CONCAT, tensors, shape, dtype, perm, perm.index(dim))


def _slice_support(node: Node, spec) -> str | None:
    step = arg(node, 4, "step", 1)
    if not isinstance(step, int) or step < 1:
        return f"slice with step {step} is not lowered"
    return None


@register_op("slice", [aten.slice_copy.Tensor, aten.slice.Tensor], support=_slice_support, quant=Quant.SHARED,
             quant_aliases=[aten.narrow.default], folds_constants=True)
def lower_slice(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    shape, dtype = ctx.out_meta(node)
    dim = arg(node, 1, "dim", 0) % x.rank
    start = arg(node, 2, "start", 0) or 0
    start = max(0, min(start + x.shape[dim] if start < 0 else start, x.shape[dim]))
    starts = [0] * x.rank
    starts[dim] = start
    step = arg(node, 4, "step", 1)
    if step != 1:
        return _strided_slice(ctx, x, dim, start, step, shape[dim], dtype)
    return slice_value(ctx, x, starts, list(shape), dtype)


def _strided_slice(ctx: LoweringContext, x: Value, dim: int, start: int, step: int, count: int, dtype) -> Value:
    """x[start::step][:count] along `dim` (TOSA SLICE has no step): the `count * step` elements from
    `start` RESHAPEd to [count, step] keep column 0; when the last window runs past the end, it is
    taken on its own and CONCATenated."""
    if x.is_const:
        index = [slice(None)] * x.rank
        index[dim] = slice(start, start + count * step, step)
        return ctx.constant(x.const[tuple(index)])
    whole = count if start + count * step <= x.shape[dim] else count - 1
    parts = []

    def cut(value: Value, axis: int, begin: int, size: int) -> Value:
        starts, sizes = [0] * value.rank, list(value.shape)
        starts[axis], sizes[axis] = begin, size
        return slice_value(ctx, value, starts, sizes, dtype)

    outer, inner = x.shape[:dim], x.shape[dim + 1:]
    if whole:
        windows = ctx.reshape(cut(x, dim, start, whole * step), (*outer, whole, step, *inner))
        parts.append(ctx.reshape(cut(windows, dim + 1, 0, 1), (*outer, whole, *inner)))
    if whole < count:
        parts.append(cut(x, dim, start + whole * step, 1))
    if len(parts) == 1:
        return parts[0]
    identity = tuple(range(x.rank))
    out = ctx.emit(Op.CONCAT, [ctx.tensor(p, identity) for p in parts], (*outer, count, *inner), dtype, identity, dim)
    out.qparams = x.qparams
    return out


@register_op("select", [aten.select_copy.int, aten.select.int], quant=Quant.SHARED, folds_constants=True,
             fp_index_math=True, fp_integer_rule=exact_in_float32(moves=True))
def lower_select(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    shape, dtype = ctx.out_meta(node)
    dim, index = node.args[1] % x.rank, node.args[2] % x.shape[node.args[1] % x.rank]
    starts = [0] * x.rank
    starts[dim] = index
    sizes = list(x.shape)
    sizes[dim] = 1
    return ctx.reshape(slice_value(ctx, x, starts, sizes, dtype), shape)


@register_op("split", [aten.split_with_sizes_copy.default, aten.split_copy.Tensor,
                       aten.split_with_sizes.default, aten.split.Tensor], quant=Quant.SHARED, quant_aliases=[aten.chunk.default],
             folds_constants=True)
def lower_split(ctx: LoweringContext, node: Node) -> tuple[Value, ...]:
    x = ctx.val(node.args[0])
    dim = arg(node, 2, "dim", 0) % x.rank
    outs, start = [], 0
    for meta in node.meta["val"]:
        starts = [0] * x.rank
        starts[dim] = start
        outs.append(slice_value(ctx, x, starts, list(meta.shape), x.dtype))
        start += meta.shape[dim]
    return tuple(outs)


@register_op("unbind", [aten.unbind_copy.int, aten.unbind.int], quant=Quant.SHARED, folds_constants=True)
def lower_unbind(ctx: LoweringContext, node: Node) -> tuple[Value, ...]:
    x = ctx.val(node.args[0])
    dim = arg(node, 1, "dim", 0) % x.rank
    outs = []
    for i, meta in enumerate(node.meta["val"]):
        starts = [0] * x.rank
        starts[dim] = i
        sizes = list(x.shape)
        sizes[dim] = 1
        outs.append(ctx.reshape(slice_value(ctx, x, starts, sizes, x.dtype), tuple(meta.shape)))
    return tuple(outs)


@register_op("constant_pad", [aten.constant_pad_nd.default], quant=Quant.SHARED, quant_aliases=[aten.pad.default],
             folds_constants=True)
def lower_constant_pad(ctx: LoweringContext, node: Node) -> Value:
    """PAD; negative pads crop, so those come first as one SLICE (TOSA PAD takes no negative pads)."""
    x = ctx.val(node.args[0])
    pads, value = node.args[1], arg(node, 2, "value", 0)
    shape, dtype = ctx.out_meta(node)
    logical = [[0, 0] for _ in range(x.rank)]
    for i in range(len(pads) // 2):  # torch lists pads from the last dim backwards
        logical[x.rank - 1 - i] = [pads[2 * i], pads[2 * i + 1]]
    if x.is_const:
        return ctx.constant(torch.nn.functional.pad(x.const, pads, value=value))
    t = x.tensor
    if any(p < 0 for p in pads):
        begin = [max(-logical[d][0], 0) for d in x.perm]
        size = [x.shape[d] - max(-logical[d][0], 0) - max(-logical[d][1], 0) for d in x.perm]
        t = ctx.b.op(Op.SLICE, [t, ctx.b.shape_const(begin), ctx.b.shape_const(size)], size, t.dtype)
        logical = [[max(lo, 0), max(hi, 0)] for lo, hi in logical]
    physical = [p for d in x.perm for p in logical[d]]
    if x.qparams is not None:  # the pad value in the integer domain
        value = int(round(value / float(x.qparams.scale))) + x.qparams.zero_point
    pad_const = ctx.scalar(value, x.tensor.dtype, 1)
    return ctx.emit(Op.PAD, [t, ctx.b.shape_const(physical), pad_const], shape, dtype, x.perm)


# Export-time ops that decompose into these families: annotate them like those families.
register_quant_aliases("cat", aten.stack.default)
register_quant_aliases("view", aten.unflatten.int, aten.squeeze.default, aten.unfold.default)
register_quant_aliases("expand", aten.repeat_interleave.self_int)
