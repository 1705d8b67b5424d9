"""Lower one partition (an edge-dialect ExportedProgram) to a TOSA 1.0 flatbuffer.

Assumes every call_function node passed `registry.unsupported_reason` for the spec (the partitioner
guarantees it). Guarantees: graph inputs and outputs are in PyTorch's order, each in the memory layout of
its tensor in the program (its dim order: a channels-last tensor crosses as NHWC, which is how the
ExecuTorch runtime hands its bytes to the delegate; see `layout.memory_layout`); int64 values cross the boundary
as INT32; the result lists each operator's originating torch node.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch._export.utils import (
    get_buffer,
    get_lifted_tensor_constant,
    get_param,
    is_buffer,
    is_lifted_tensor_constant,
    is_param,
)
from torch.export import ExportedProgram
from torch.fx import Node

from . import layout, registry
from .builder import Op, TosaGraphBuilder, tosa_dtype
from .constant_folding import fold_node
from .context import LoweringContext, Value
from .errors import LoweringError
from .half_math import lower_in_fp32, wants_fp32
from .helpers.intmath import lower_shared, lower_table
from .integer_float_math import lower_integers_in_float32, wants_float32_integers
from .quantized import mark_quantized_region
from .specification import TosaSpecification

if TYPE_CHECKING:
    from .compile_spec import TosaCompileSpec


@dataclass
class TosaGraph:
    """A lowered partition: the flatbuffer plus what a runtime and a report need to know.

    Files are written by `artifacts.ArtifactWriter`, not here: lowering is pure."""

    flatbuffer: bytes
    inputs: list[dict]
    outputs: list[dict]
    op_counts: dict[str, int]
    debug_map: list[dict]


def lower_partition(ep: ExportedProgram, spec: TosaCompileSpec) -> TosaGraph:
    """Lower one partition as every TOSA-based backend does (TOSA, Ethos-U, VGF).

    Pure: writes no file, and the same partition and spec give the same bytes. A backend gets `spec`
    with `TosaCompileSpec.from_list(compile_specs)` and writes files with an `ArtifactWriter`."""
    return lower_program(ep, spec.tosa_spec, fold_rescales=spec.fold_rescales,
                         int16_fc_rescale16=spec.int16_fc_rescale16)


def constant_of(ep: ExportedProgram, node: Node) -> torch.Tensor | None:
    for test, get in ((is_param, get_param), (is_buffer, get_buffer),
                      (is_lifted_tensor_constant, get_lifted_tensor_constant)):
        if test(ep, node):
            return get(ep, node)
    return None


def is_mutated_buffer(ep: ExportedProgram, node: Node) -> bool:
    """Whether the program writes the buffer `node` reads (its value then changes between calls)."""
    target = ep.graph_signature.inputs_to_buffers.get(node.name)
    return target is not None and target in ep.graph_signature.buffers_to_mutate.values()


def lower_program(ep: ExportedProgram, spec: TosaSpecification, fold_rescales: bool = False,
                  expose: Sequence[Node] = (), int16_fc_rescale16: bool = False) -> TosaGraph:
    """Lower every node of `ep` to TOSA; see module docstring.

    `expose` (a debugging aid, see `intermediates.py`): nodes whose values also become graph outputs,
    after the program's own, each described with `"exposed": True` (and `"qparams"` when quantized).
    """
    builder = TosaGraphBuilder()
    builder.fold_rescales = fold_rescales
    builder.int16_fc_rescale16 = int16_fc_rescale16
    ctx = LoweringContext(spec, builder)
    inputs: list[dict] = []
    if spec.support_integer():
        mark_quantized_region(ep.graph)
    for node in ep.graph.nodes:
        builder.current_node = node
        if node.op == "placeholder":
            const = constant_of(ep, node)
            registry.note_constant_range(node, const, is_mutated_buffer(ep, node))  # as the partitioner saw it
            if const is not None:
                ctx.values[node] = ctx.constant(const)
                continue
            meta = ctx.meta(node)
            perm = layout.memory_layout(meta)
            t = builder.input(layout.apply(tuple(meta.shape), perm), tosa_dtype(meta.dtype), node.name)
            ctx.values[node] = ctx.from_tensor(t, tuple(meta.shape), meta.dtype, perm)
            inputs.append({"name": node.name, "shape": list(meta.shape), "dtype": str(meta.dtype),
                           "tosa_dtype": t.dtype.name, **_layout_entry(perm)})
        elif node.op == "call_function":
            lower_node(ctx, node)
        elif node.op == "get_attr":
            continue  # a control-flow sub-graph: its cond / while_loop rule lowers it
        elif node.op == "output":
            builder.current_node = None
            outputs = emit_outputs(ctx, list(node.args[0]) + list(expose), in_memory_layout=len(node.args[0]))
            for entry in outputs[len(node.args[0]):]:
                entry["exposed"] = True
        else:
            raise LoweringError(f"unexpected node {node.format_node()} in a partition")
    return TosaGraph(
        flatbuffer=builder.serialize(),
        inputs=inputs,
        outputs=outputs,
        op_counts=builder.op_counts(),
        debug_map=[r.__dict__ for r in builder.records],
    )


def lower_node(ctx: LoweringContext, node: Node) -> None:
    """Lower one call_function node into `ctx.values[node]` with its registry rule.

    Raises LoweringError (naming the node in `.node`) for any failure, so callers can tell which node
    to leave on the CPU."""
    ctx.b.current_node = node
    if node.target is operator.getitem:
        source, index = node.args
        ctx.values[node] = ctx.values[source][index]
        return
    entry = registry.lookup(node.target)
    try:
        if entry is None:
            raise LoweringError(f"no lowering for {node.target} (node {node.name}); the partitioner "
                                "should have left it on the CPU")
        if entry.folds_constants and not entry.constant_output and not node.meta.get("arm_quantized"):
            folded = fold_node(ctx, node)
            if folded is not None:
                ctx.values[node] = folded
                return
        rule = _rule_for(entry, node)
        if wants_float32_integers(entry, node, ctx.spec):
            ctx.values[node] = lower_integers_in_float32(ctx, node, rule)
        elif wants_fp32(entry, node):
            ctx.values[node] = lower_in_fp32(ctx, node, rule)
        else:
            ctx.values[node] = rule(ctx, node)
    except LoweringError as exc:
        exc.node = node
        raise
    except Exception as exc:
        error = LoweringError(f"lowering {entry.name} failed on node {node.name} "
                              f"({node.format_node()}): {exc}")
        error.node = node
        raise error from exc


def _rule_for(entry: registry.OpEntry, node: Node):
    """The FP rule, or for a node in the quantized region its INT rule (own or by quant kind)."""
    if not node.meta.get("arm_quantized") or entry.quant_boundary:
        return entry.lower
    if entry.int_lower is not None:
        return entry.int_lower
    if entry.quant == registry.Quant.SHARED:
        return lambda ctx, n: lower_shared(ctx, n, entry.lower)
    if entry.quant == registry.Quant.TABLE:
        return lower_table
    raise LoweringError(f"{entry.name}: no INT rule for quant kind {entry.quant!r}")


def _layout_entry(perm: layout.Perm) -> dict:
    """The I/O description's "dim_order", only where it is not the identity (so old descriptions still hold)."""
    return {} if layout.is_identity(perm) else {"dim_order": list(perm)}


def emit_outputs(ctx: LoweringContext, nodes, in_memory_layout: int = 0) -> list[dict]:
    """Make the lowered values of `nodes` the graph's outputs, in order. The first `in_memory_layout` of
    them (a partition's own outputs) leave in their tensors' `layout.memory_layout` (what the runtime
    reads); the others (exposed intermediates, control-flow sub-graph results) in PyTorch's layout."""
    b = ctx.b
    outputs, used = [], set()
    for i, arg in enumerate(nodes):
        value: Value = ctx.val(arg)
        perm = layout.identity(value.rank)
        if i < in_memory_layout and isinstance(arg, Node):
            planned = layout.memory_layout(arg.meta.get("val"))
            perm = planned if len(planned) == value.rank else perm
        t = ctx.tensor(value, perm, None if not value.is_const else tosa_dtype(value.dtype))
        # A graph output must be produced by an operator and be distinct from inputs and other outputs.
        if value.is_const or t.name in used or t in b.inputs:
            t = b.op(Op.IDENTITY, [t], t.shape, t.dtype)
        used.add(t.name)
        b.output(t)
        entry = {"name": arg.name, "shape": list(value.shape), "dtype": str(value.dtype),
                 "tosa_dtype": t.dtype.name, **_layout_entry(perm)}
        q = value.qparams
        if q is not None and not q.per_channel and q.dtype != torch.int32:
            entry["qparams"] = {"scale": float(q.scale), "zero_point": int(q.zero_point)}
        outputs.append(entry)
    return outputs


registry.register_graph_lowering(lower_node, emit_outputs)  # control-flow families lower sub-graphs with it
