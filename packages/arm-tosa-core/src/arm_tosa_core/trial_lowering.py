"""Lowering tried at partition time, so a node the partitioner claims is one that lowers.

A support rule decides ahead of time; where it and the lowering rule cannot agree (an attribute
combination, a layout, a constant the rule needs), the partitioner asks the lowering itself:

- `trial_reason(ep, node, spec)`: runs the node's registry rule (the same entry the backend uses) on a
  throwaway builder, with the constants and dequantizes feeding it, and returns the failure text.
  Cheap: one node, nothing serialized.
- `partition_failure(ep, nodes, spec)`: lowers and serializes a whole proposed partition as the backend
  will; on failure, returns the node to send back to the CPU (or all of them) with the reason. This is
  the net under the per-node trial: whatever fails here never reaches `TOSABackend.preprocess`.
"""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily
from torch.export import ExportedProgram
from torch.fx import Node

from . import registry
from .builder import DType, TosaGraphBuilder, tosa_dtype
from .context import LoweringContext, Value
from .errors import LoweringError
from .lowering import constant_of, emit_outputs, lower_node
from .quantized import is_dequantize, is_quantize
from .specification import TosaSpecification


def _external_value(ep: ExportedProgram, ctx: LoweringContext, node: Node, int_fill: int = 0):
    """The value a node from outside the lowered set has inside it: its constant, or a graph input."""
    if node.op == "placeholder":
        const = constant_of(ep, node)
        if const is not None:
            return ctx.constant(_real(const, int_fill))
    meta = node.meta.get("val")
    if not isinstance(meta, torch.Tensor):
        raise LoweringError(f"input {node.name} of the partition is not a tensor ({type(meta).__name__})")
    shape = tuple(int(d) for d in meta.shape)
    t = ctx.b.input(shape, tosa_dtype(meta.dtype), node.name)
    return ctx.from_tensor(t, shape, meta.dtype)


def _real(tensor: torch.Tensor, int_fill: int = 0) -> torch.Tensor:
    """A real tensor for a constant. exir hands partitioners a program whose parameters and buffers
    are FakeTensors (it spares copying them), so those get a stand-in of the same shape and dtype:
    ones for floats (scales, variances and divisors stay non-zero), `int_fill` for integers (0 keeps
    zero points, indices and codes in range; `lower_nodes` retries with 1 for integer divisors).
    Rules fail on shapes, dtypes and attributes, not on these values; where a value matters (a folded
    int64 constant must fit INT32) it is the real one: lifted scalars keep theirs in the FakeTensor, and
    the partitioner restores integer buffers it recorded before exir faked them.
    """
    if not isinstance(tensor, FakeTensor):
        return tensor
    if tensor.constant is not None:  # a lifted scalar (exir's scalar-to-tensor): fake mode keeps its value
        return tensor.constant
    shape, dtype = tuple(tensor.shape), tensor.dtype
    with unset_fake_temporarily():
        if dtype.is_floating_point:
            return torch.ones(shape, dtype=dtype)
        return torch.full(shape, int_fill, dtype=dtype)


def _uses_stand_ins(ep: ExportedProgram, nodes: list[Node]) -> bool:
    """Whether lowering `nodes` reads a FakeTensor constant (so a stand-in value)."""
    return any(a.op == "placeholder" and isinstance(constant_of(ep, a), FakeTensor)
               for n in nodes for a in n.all_input_nodes)


def lower_nodes(ep: ExportedProgram, nodes: list[Node], spec: TosaSpecification,
                serialize: bool = True) -> bytes | None:
    """Lower `nodes` (in graph order) as one TOSA graph, as the backend would lower them as a
    partition: inputs from outside become graph inputs (constants stay constants), results used
    outside become outputs. Raises LoweringError with `.node` set to the failing node (None when the
    failure is not one node's, e.g. in serialization). Integer stand-ins for FakeTensor constants
    are zeros; a failure with them is retried once with ones (an integer divisor), and only a failure
    with both counts."""
    try:
        return _lower_nodes(ep, nodes, spec, serialize, int_fill=0)
    except Exception:
        if not _uses_stand_ins(ep, nodes):
            raise
        return _lower_nodes(ep, nodes, spec, serialize, int_fill=1)


def _lower_nodes(ep: ExportedProgram, nodes: list[Node], spec: TosaSpecification, serialize: bool,
                 int_fill: int) -> bytes | None:
    members = set(nodes)
    ctx = LoweringContext(spec, TosaGraphBuilder())
    ctx.outside_value = lambda n: None if n in members else _external_value(ep, ctx, n, int_fill)
    for node in nodes:
        for arg in node.all_input_nodes:
            if arg.op == "get_attr":
                continue  # a control-flow sub-graph: its cond / while_loop rule reads it itself
            if arg not in members and arg not in ctx.values:
                ctx.values[arg] = _external_value(ep, ctx, arg, int_fill)
        lower_node(ctx, node)
    ctx.b.current_node = None
    results = [n for n in nodes if any(u not in members for u in n.users) or not n.users]
    outputs = [n for n in results if _is_tensor_value(ctx.values.get(n))]
    if not serialize:
        # a node trial stops at the node's own result; an INT48 accumulator (int16 conv) is only ever
        # read by the RESCALE of the quantize after it, which the partition claims with it
        outputs = [n for n in outputs if not _is_int48_accumulator(ctx.values[n])]
        # a folded constant costs no operator: whether it fits the graph is checked where a rule uses it
        outputs = [n for n in outputs if not ctx.values[n].is_const]
    try:
        emit_outputs(ctx, outputs)
        return ctx.b.serialize() if serialize else None
    except LoweringError as exc:
        exc.node = None
        raise
    except Exception as exc:
        error = LoweringError(f"serializing the TOSA graph failed: {exc}")
        error.node = None
        raise error from exc


def _is_tensor_value(value) -> bool:
    return isinstance(value, Value)


def _is_int48_accumulator(value) -> bool:
    tensor = getattr(value, "tensor", None)
    return tensor is not None and tensor.dtype == DType.INT48


def _trial_nodes(node: Node) -> list[Node] | None:
    """`node` with the dequantizes, compile-time constants and complex values feeding it (topological order), or None
    when a trial cannot stand in for the real lowering (an input carried as integers whose qparams
    come from a node outside this set)."""
    order: list[Node] = []
    seen: set[Node] = set()

    def visit(n: Node) -> bool:
        for a in n.all_input_nodes:
            if a in seen:
                continue
            seen.add(a)
            if a.op == "call_function" and (is_dequantize(a) or registry.is_compile_time_constant(a)
                                            or _is_complex(a)):
                if not visit(a):
                    return False
                order.append(a)
            elif a.meta.get("arm_quantized") and a.op == "call_function" and not is_quantize(a):
                return False
        return True

    return order + [node] if visit(node) else None


def _is_complex(node: Node) -> bool:
    """A complex value (an FFT's result) is never a graph input: its producer joins the trial."""
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.dtype.is_complex


def trial_reason(ep: ExportedProgram, node: Node, spec: TosaSpecification) -> str | None:
    """Why `node`'s own lowering rule fails on it (None when it lowers, or when no trial applies)."""
    if node.op != "call_function" or is_quantize(node) or is_dequantize(node):
        return None
    nodes = _trial_nodes(node)
    if nodes is None:
        return None
    try:
        lower_nodes(ep, nodes, spec, serialize=False)
    except Exception as exc:  # noqa: BLE001 - any failure means "not this node on this backend"
        return f"its lowering failed, so it runs on the CPU: {exc}"
    return None


def partition_failure(ep: ExportedProgram, nodes: list[Node], spec: TosaSpecification) -> dict[Node, str]:
    """{} when `nodes` lower as one partition; else the node(s) to leave on the CPU, with the reason."""
    try:
        lower_nodes(ep, nodes, spec)
    except Exception as exc:  # noqa: BLE001
        failed = getattr(exc, "node", None)
        reason = f"lowering its partition failed, so it runs on the CPU: {exc}"
        if failed is not None and failed in nodes:
            return {failed: reason}
        return {n: reason for n in nodes}
    return {}
