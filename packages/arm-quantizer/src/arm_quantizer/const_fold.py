"""Constant folding before annotation: sub-graphs computed from constants only become tensor attributes.

A causal mask built in the graph (ones/full/arange/tril/compare/where on static shapes) has no integer
lowering, and it needs none: its value is known when the model is quantized. Folding it into a buffer
leaves the quantized graph a constant operand, which the annotator quantizes like any other weight.

Guarantees: only deterministic aten ops are evaluated; parameters (trainable, so QAT can still update
them) and buffers that the graph mutates are never treated as constants; results larger than
`max_numel` elements stay in the graph. An in-place op folds only together with the temporary it
writes (its sole reader), evaluated on a copy: a folded value is a buffer shared by every call, so a
write left in the graph would repeat on each call (T5's `buckets += ...` ran past its bias table on
the second call); a temporary that some other op writes is not folded.
"""

from __future__ import annotations

import operator

import torch
from torch.fx import GraphModule, Node
from torch.fx.node import map_arg

_NONDETERMINISTIC = (torch.Tag.nondeterministic_seeded, torch.Tag.nondeterministic_bitwise)


def attr_value(gm: GraphModule, target: str):
    """The object a get_attr `target` ("a.b.c") names on `gm`, or None."""
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _mutated_attrs(gm: GraphModule) -> set[str]:
    """get_attr targets that some op of the graph writes to (their value is not constant)."""
    mutated = set()
    for node in gm.graph.nodes:
        target = node.target
        if node.op == "call_function" and isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable:
            mutated.update(a.target for a in node.all_input_nodes if a.op == "get_attr")
    return mutated


def _written_args(node: Node) -> list[Node]:
    """The graph nodes an op writes in place (its schema's `Tensor(a!)` arguments)."""
    schema = node.target._schema
    written = []
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
        if isinstance(value, Node):
            written.append(value)
    return written


def _private_write(node: Node) -> bool:
    """An in-place op whose every written operand is a temporary it alone reads (the op and its
    operand fold together, so the write cannot leak into a shared buffer)."""
    written = _written_args(node)
    return bool(written) and all(w.op == "call_function" and len(w.users) == 1 and not _is_view(w)
                                 for w in written)


def _is_view(node: Node) -> bool:
    """Whether the node's result aliases an input (a write through it reaches that input too)."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return True
    return any(r.alias_info is not None for r in target._schema.returns)


def _foldable(node: Node) -> bool:
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return True
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or target.namespace != "aten":
        return False
    if any(tag in target.tags for tag in _NONDETERMINISTIC):
        return False
    return not target._schema.is_mutable or _private_write(node)


def _shared_writes(graph) -> set[Node]:
    """Temporaries some op writes in place without folding with them: never constants."""
    return {w for node in graph.nodes if node.op == "call_function"
            and isinstance(node.target, torch._ops.OpOverload) and node.target._schema.is_mutable
            and not _private_write(node) for w in _written_args(node)}


def _is_tensors(value) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    return isinstance(value, (tuple, list)) and bool(value) and all(isinstance(v, torch.Tensor) for v in value)


def fold_constants(gm: GraphModule, max_numel: int = 1 << 22) -> int:
    """Evaluate every call_function node whose inputs are all constant; returns how many folded values
    were materialised as buffers (the nodes that computed them are erased)."""
    graph = gm.graph
    mutated, shared = _mutated_attrs(gm), _shared_writes(graph)
    values: dict[Node, object] = {}
    with torch.no_grad():
        for node in graph.nodes:
            if node.op == "get_attr":
                value = attr_value(gm, node.target)
                if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter) \
                        and node.target not in mutated:
                    values[node] = value
                continue
            if node in shared or not _foldable(node) or not all(a in values for a in node.all_input_nodes):
                continue
            operand = values.__getitem__
            if node.op == "call_function" and node.target is not operator.getitem and node.target._schema.is_mutable:
                operand = lambda a: values[a].clone() if isinstance(values[a], torch.Tensor) else values[a]  # noqa: E731
            try:
                result = node.target(*map_arg(node.args, operand), **map_arg(node.kwargs, operand))
            except Exception:  # noqa: BLE001 - a node we cannot evaluate simply stays in the graph
                continue
            if _is_tensors(result) and sum(t.numel() for t in torch.utils._pytree.tree_leaves(result)) \
                    <= max_numel:
                values[node] = result
    read = {node for node in values if node.op == "get_attr" and node.users}
    folded = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node not in values or not isinstance(values[node], torch.Tensor):
            continue
        if all(user in values for user in node.users):
            continue  # only other folded nodes read it
        name = fresh_attr_name(gm, "_arm_folded")
        gm.register_buffer(name, values[node].detach().clone())
        with graph.inserting_before(node):
            attr = graph.get_attr(name)
        attr.meta["val"] = getattr(gm, name)
        node.replace_all_uses_with(attr)
        folded += 1
    for node in reversed(list(graph.nodes)):
        if node in values and not node.users and (node.op == "call_function" or node in read):
            graph.erase_node(node)  # folded away (a get_attr only if folding removed its readers)
    gm.recompile()
    return folded


def fresh_attr_name(gm: GraphModule, prefix: str) -> str:
    """`prefix_<i>` with the first i not yet an attribute of `gm`."""
    i = 0
    while hasattr(gm, f"{prefix}_{i}"):
        i += 1
    return f"{prefix}_{i}"
