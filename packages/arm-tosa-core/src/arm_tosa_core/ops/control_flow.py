"""torch.cond -> COND_IF and torch.while_loop -> WHILE_LOOP (TOSA 1.0's controlflow extension, "+cf").

The branches and loop functions are GraphModules (get_attr arguments of the HOP node). Each is lowered
with the same registry into a basic block of its own (`TosaGraphBuilder.sub_block`), its placeholders
becoming the block's inputs, its results the block's outputs, all in PyTorch's layout. The operand
lists follow the TOSA 1.0 spec:

- COND_IF(condition, *inputs) -> outputs: condition is a rank-0 bool; both blocks take `inputs` and
  return tensors of the outputs' shapes and types.
- WHILE_LOOP(*inputs) -> outputs, outputs matching inputs: the cond block takes every input and
  returns a rank-0 bool, the body takes every input and returns the next values of all of them.
  torch's while_loop passes `additional_inputs` to both functions but its body returns only the
  carried values, so the body block hands the additional inputs back unchanged.

A HOP is claimed only with the extension and when every node of its sub-graphs is itself claimable
(otherwise it stays on the CPU with that node's reason). The partitioner puts the HOP's get_attr
nodes into its partition (see partitioner.py), so the delegated program carries the sub-graphs.
"""

from __future__ import annotations

import operator

import torch
from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily
from torch.fx import GraphModule, Node

from .. import layout, registry
from ..builder import DType, Op, T, TosaGraphBuilder, tosa_dtype
from ..context import LoweringContext, Value
from ..errors import LoweringError
from ..helpers.common import aten_target
from ..specification import TosaSpecification

_TOSA_OP = registry.CONTROL_FLOW_OPS


def sub_graphs(node: Node) -> list[tuple[str, GraphModule]]:
    """The (role, GraphModule) pairs a cond / while_loop node runs, from its get_attr arguments."""
    roles = ("true branch", "false branch") if node.target is torch.ops.higher_order.cond else (
        "loop condition", "loop body")
    first = 1 if node.target is torch.ops.higher_order.cond else 0
    owner = node.graph.owning_module
    graphs = []
    for role, arg in zip(roles, node.args[first:first + 2], strict=True):
        if not (isinstance(arg, Node) and arg.op == "get_attr"):
            raise LoweringError(f"{node.name}: its {role} is {arg!r}, not a get_attr of a sub-graph")
        graphs.append((role, getattr(owner, arg.target)))
    return graphs


def control_flow_reason(node: Node, spec: TosaSpecification) -> str | None:
    """Why a cond / while_loop node cannot be lowered for `spec`: no "+cf", or a node of one of its
    sub-graphs that cannot (named, with its own reason); None when it can."""
    name, op = node.target.__name__, _TOSA_OP[node.target]
    if not spec.control_flow:
        return (f"{name} needs TOSA's control-flow extension ({op}); {spec} lacks it: "
                f"use \"{spec}+cf\" to target it, otherwise it runs on the CPU")
    legal = registry.legal_dtypes(spec) | ({torch.int32, torch.int64} if spec.support_float() else set())
    for where, meta in registry.tensor_metas(node):
        if meta.dtype in legal:
            continue
        if meta.dtype.is_floating_point and not spec.support_float():
            return (f"{name} -> {op}: {where} is {meta.dtype}. PT2E (torchao) quantizes no cond branch and "
                    "keeps a while_loop's carried values in float between iterations, so the operator "
                    f"needs the FP profile; under {spec} it runs on the CPU (use \"TOSA-1.0+FP+INT+cf\" to "
                    "lower it with a quantized predicate and float branches)")
        return f"{name} -> {op}: {where} has dtype {meta.dtype}, not legal for {spec}"
    counters = loop_counters(node) if node.target is torch.ops.higher_order.while_loop else set()
    for role, gm in sub_graphs(node):
        for inner in gm.graph.nodes:
            if inner.op != "call_function" or inner.target is operator.getitem:
                continue
            reason = registry.unsupported_reason(inner, spec, proven_int32=counters)
            if reason is not None and "quantize_per" in str(inner.target):
                reason += (" (PT2E quantizes a while_loop body at its entry and dequantizes at its exit: "
                           "the loop carries float values, and TOSA INT has no float to quantize)")
            if reason is not None:
                return f"{name} -> {op}: node {inner.name} of its {role} cannot be lowered: {reason}"
    return None


_aten = torch.ops.aten
_ADD_SUB = {_aten.add.Tensor: 1, _aten.add.Scalar: 1, _aten.sub.Tensor: -1, _aten.sub.Scalar: -1}
_BELOW = {_aten.lt.Scalar: -1, _aten.lt.Tensor: -1, _aten.le.Scalar: 0, _aten.le.Tensor: 0}
_ABOVE = {_aten.gt.Scalar: 1, _aten.gt.Tensor: 1, _aten.ge.Scalar: 0, _aten.ge.Tensor: 0}


def _results_of(gm: GraphModule) -> list:
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _step(body_result: Node, carried: Node) -> int | None:
    """k where `body_result` is `carried + k` (add/sub of a python int or a bounded one-value constant)."""
    target = aten_target(body_result.target) if isinstance(body_result, Node) else None
    if target not in _ADD_SUB or body_result.args[0] is not carried:
        return None
    bounds = registry.int_range(body_result.args[1])
    alpha = body_result.kwargs.get("alpha", 1)
    if bounds is None or bounds[0] != bounds[1] or not isinstance(alpha, int):
        return None
    return _ADD_SUB[target] * bounds[0] * alpha


def loop_counters(node: Node) -> set[Node]:
    """The body nodes of while_loop `node` that step a counter its condition bounds, so their int64 result
    provably stays in int32 (`int_range` sees neither the loop nor its condition).

    A counter is carried value j whose body result is `c_j + k` (k > 0) while the condition is exactly
    `c_j < n` or `c_j <= n`, or `c_j - k` while it is `c_j > n` / `c_j >= n`, with n an int and the loop's
    initial value bounded by `int_range`. The body runs only while the condition holds, so `c_j + k` stays
    below n + k, and c_j never moves past its initial value the other way. Every other int64 arithmetic of
    the loop must be bounded by `int_range`, else the loop runs on the CPU (TOSA carries int64 as int32:
    `acc * 1000` in a body would wrap where torch does not)."""
    _, _, carried, _ = node.args[:4]
    (_, cond_gm), (_, body_gm) = sub_graphs(node)
    (flag,) = _results_of(cond_gm)
    cond_inputs = [n for n in cond_gm.graph.nodes if n.op == "placeholder"]
    body_inputs = [n for n in body_gm.graph.nodes if n.op == "placeholder"]
    compare = aten_target(flag.target) if isinstance(flag, Node) and flag.op == "call_function" else None
    if compare not in _BELOW and compare not in _ABOVE or flag.args[0] not in cond_inputs[:len(carried)]:
        return set()
    j = cond_inputs.index(flag.args[0])
    result = _results_of(body_gm)[j]
    step, limit, init = _step(result, body_inputs[j]), registry.int_range(flag.args[1]), registry.int_range(carried[j])
    if step is None or limit is None or init is None or limit[0] != limit[1]:
        return set()
    if compare in _BELOW and step > 0:
        reach = (init[0], limit[0] + _BELOW[compare] + step)
    elif compare in _ABOVE and step < 0:
        reach = (limit[0] + _ABOVE[compare] + step, init[1])
    else:
        return set()
    return {result} if -(1 << 31) <= reach[0] and reach[1] < 1 << 31 else set()


def _constant(value) -> torch.Tensor:
    """A sub-graph's get_attr tensor (a FakeTensor in the partitioner's copy: a stand-in of ones)."""
    if isinstance(value, FakeTensor):
        with unset_fake_temporarily():
            return torch.ones(tuple(value.shape), dtype=value.dtype)
    return value


def lower_sub_graph(ctx: LoweringContext, gm: GraphModule, block: TosaGraphBuilder,
                    passthrough: int = 0) -> list[Value]:
    """Lower `gm` into `block`: one block input per placeholder, one block output per result, then
    the last `passthrough` placeholders again (WHILE_LOOP's additional inputs). Returns the values
    of the block's results (for their shapes and types)."""
    lower_node, emit_outputs = registry.graph_lowering()  # lowering.py sits above ops/
    sub = LoweringContext(ctx.spec, block)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for ph in placeholders:
        meta = ph.meta["val"]
        shape = tuple(int(d) for d in meta.shape)
        sub.values[ph] = sub.from_tensor(block.input(shape, tosa_dtype(meta.dtype), ph.name), shape,
                                         meta.dtype)
    results: list = []
    for inner in gm.graph.nodes:
        if inner.op == "get_attr":
            attr = getattr(gm, inner.target)
            if isinstance(attr, torch.Tensor):  # a nested cond / while_loop's sub-graph is read by its rule
                sub.values[inner] = sub.constant(_constant(attr))
        elif inner.op == "call_function":
            lower_node(sub, inner)
        elif inner.op == "output":
            out = inner.args[0]
            results = list(out) if isinstance(out, (tuple, list)) else [out]
    block.current_node = None
    results += placeholders[len(placeholders) - passthrough:] if passthrough else []
    emit_outputs(sub, results)
    return [sub.val(r) for r in results]


def _operands(ctx: LoweringContext, args) -> list[T]:
    """HOP operands as tensors in PyTorch's layout (a constant becomes a CONST of the parent block)."""
    tensors = []
    for a in args:
        value = ctx.val(a)
        tensors.append(ctx.tensor(value, layout.identity(value.rank),
                                  tosa_dtype(value.dtype) if value.is_const else None))
    return tensors


def _results(ctx: LoweringContext, op: Op, inputs: list[T], blocks: list[TosaGraphBuilder],
             values: list[Value]) -> list[Value]:
    for block in blocks:  # e.g. an int8 operand (a quantized value) for a branch written in float
        given = [(t.shape, t.dtype) for t in inputs[len(inputs) - len(block.inputs):]]
        wanted = [(t.shape, t.dtype) for t in block.inputs]
        if given != wanted:
            raise LoweringError(f"{op.name} operands {given} do not match its block {block.name}'s inputs "
                                f"{wanted}")
    outs = ctx.b.control_flow(op, inputs, blocks, [(v.shape, tosa_dtype(v.dtype)) for v in values])
    return [ctx.from_tensor(t, v.shape, v.dtype) for t, v in zip(outs, values, strict=True)]


@registry.register_op("cond", [torch.ops.higher_order.cond], support=control_flow_reason, u55=False)
def lower_cond(ctx: LoweringContext, node: Node):
    pred, _, _, operands = node.args[:4]
    condition = ctx.val(pred)
    if condition.dtype != torch.bool or len(condition.shape) and condition.shape != (1,) * condition.rank:
        raise LoweringError(f"cond predicate {pred} is {condition.dtype} of shape {condition.shape}; "
                            "COND_IF needs one bool")
    cond_t = ctx.tensor(condition, layout.identity(condition.rank), DType.BOOL if condition.is_const else None)
    cond_t = ctx.b.reshape(cond_t, [])  # TOSA 1.0: the condition is a rank-0 bool
    inputs = _operands(ctx, operands)
    blocks, branch_values = [], []
    for role, gm in sub_graphs(node):
        block = ctx.b.sub_block("then" if role == "true branch" else "else")
        branch_values.append(lower_sub_graph(ctx, gm, block))
        blocks.append(block)
    return tuple(_results(ctx, Op.COND_IF, [cond_t, *inputs], blocks, branch_values[0]))


@registry.register_op("while_loop", [torch.ops.higher_order.while_loop], support=control_flow_reason,
                      u55=False)
def lower_while_loop(ctx: LoweringContext, node: Node):
    _, _, carried, additional = node.args[:4]
    inputs = _operands(ctx, [*carried, *additional])
    (_, cond_gm), (_, body_gm) = sub_graphs(node)
    cond_block, body_block = ctx.b.sub_block("cond"), ctx.b.sub_block("body")
    (flag,) = lower_sub_graph(ctx, cond_gm, cond_block)
    if flag.dtype != torch.bool or flag.shape != ():
        raise LoweringError(f"while_loop condition returns {flag.dtype} of shape {flag.shape}; WHILE_LOOP "
                            "needs a rank-0 bool")
    values = lower_sub_graph(ctx, body_gm, body_block, passthrough=len(additional))
    results = _results(ctx, Op.WHILE_LOOP, inputs, [cond_block, body_block], values)
    return tuple(results[:len(carried)])
