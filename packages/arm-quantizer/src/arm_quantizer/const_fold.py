"""Constant folding before annotation: sub-graphs computed from constants only become tensor attributes.

A causal mask built in the graph (ones/full/arange/tril/compare/where on static shapes) has no integer
lowering, and it needs none: its value is known when the model is quantized. Folding it into a buffer
leaves the quantized graph a constant operand, which the annotator quantizes like any other weight.

Guarantees: only deterministic aten ops are evaluated; parameters (trainable, so QAT can still update
them) and buffers or inputs that the graph writes are never treated as constants; results larger than
`max_numel` elements stay in the graph. Every reader sees the value it sees in eager: nodes run in
program order on real tensors (views alias, in-place ops write), and storage written in place folds
only when all its writes fold and no reader left in the graph precedes one. Two defects this rules out:
a folded value is a buffer shared by every call, so a write left in the graph repeated on each call
(T5's `buckets += ...` ran past its bias table on the second call); and a reader folded before the
writes through a view (`m = zeros(4, 4); m[:2] = 3; x + m` gave x + 0).
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


# Ops whose first tensor argument contributes only its shape, dtype and device (`x.new_zeros(...)`,
# `zeros_like(x)`): with a static shape they are constants even when that argument is not.
_METADATA_FIRST_ARG = {torch.ops.aten.new_zeros.default, torch.ops.aten.new_ones.default,
                       torch.ops.aten.new_full.default, torch.ops.aten.zeros_like.default,
                       torch.ops.aten.ones_like.default, torch.ops.aten.full_like.default}


def _aliased_input(node: Node) -> Node | None:
    """The input whose storage the node's result shares (a view, or an in-place op's written operand);
    None for an op with a fresh result."""
    target = node.target
    if target is operator.getitem:
        return node.args[0] if isinstance(node.args[0], Node) else None
    if not isinstance(target, torch._ops.OpOverload):
        return None
    sets = {a for r in target._schema.returns if r.alias_info is not None for a in r.alias_info.before_set}
    if not sets:
        return None
    for i, arg in enumerate(target._schema.arguments):
        if arg.alias_info is not None and set(arg.alias_info.before_set) & sets:
            value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
            return value if isinstance(value, Node) else None
    return None


def _written_args(node: Node) -> list[Node]:
    """The graph nodes an op writes in place (its schema's `Tensor(a!)` arguments)."""
    if not isinstance(node.target, torch._ops.OpOverload):
        return []
    written = []
    for i, arg in enumerate(node.target._schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
        if isinstance(value, Node):
            written.append(value)
    return written


class _Storage:
    """Which nodes share storage: each node's root is the node that created the tensor its result
    views (itself for a fresh result); `writes[root]` are the in-place ops on that storage."""

    def __init__(self, graph) -> None:
        self.root: dict[Node, Node] = {}
        self.writes: dict[Node, list[Node]] = {}
        for node in graph.nodes:
            source = _aliased_input(node) if node.op == "call_function" else None
            self.root[node] = self.root.get(source, source) if source is not None else node
            for written in _written_args(node) if node.op == "call_function" else []:
                self.writes.setdefault(self.root.get(written, written), []).append(node)

    def members(self, root: Node) -> list[Node]:
        return [n for n, r in self.root.items() if r is root]


def _foldable(node: Node) -> bool:
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return True
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or target.namespace != "aten":
        return False
    return not any(tag in target.tags for tag in _NONDETERMINISTIC)


def _static_like(node: Node) -> torch.Tensor | None:
    """A stand-in for a metadata-only first argument (its shape, dtype and device), if static."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or not all(isinstance(d, int) for d in val.shape):
        return None
    return torch.zeros(val.shape, dtype=val.dtype, device=val.device)


def _is_tensors(value) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    return isinstance(value, (tuple, list)) and bool(value) and all(isinstance(v, torch.Tensor) for v in value)


def _evaluate(gm: GraphModule, storage: _Storage, excluded: set[Node], max_numel: int) -> dict[Node, object]:
    """Run, in program order, every foldable node whose inputs are known, on real tensors: views alias
    and in-place ops write as in eager, so a later reader sees the write. Storage rooted in `excluded`
    is never evaluated."""
    values: dict[Node, object] = {}
    attr_storage: set[int] = set()  # a write must never reach the module's own tensors
    with torch.no_grad():
        for node in gm.graph.nodes:
            if storage.root[node] in excluded:
                continue
            if node.op == "get_attr":
                value = attr_value(gm, node.target)
                if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                    values[node] = value
                    attr_storage.add(value.untyped_storage().data_ptr())
                continue
            if not _foldable(node):
                continue
            if any(isinstance(values.get(w), torch.Tensor)
                   and values[w].untyped_storage().data_ptr() in attr_storage for w in _written_args(node)):
                continue  # an op returning its input unannotated (type_as) let a write reach a buffer
            known = dict(values)
            if node.target in _METADATA_FIRST_ARG and isinstance(node.args[0], Node) and node.args[0] not in known:
                stand_in = _static_like(node.args[0])
                if stand_in is None:
                    continue
                known[node.args[0]] = stand_in
            if not all(a in known for a in node.all_input_nodes):
                continue
            try:
                result = node.target(*map_arg(node.args, known.__getitem__), **map_arg(node.kwargs, known.__getitem__))
            except Exception:  # noqa: BLE001 - a node we cannot evaluate simply stays in the graph
                continue
            if _is_tensors(result) and sum(t.numel() for t in torch.utils._pytree.tree_leaves(result)) \
                    <= max_numel:
                values[node] = result
    return values


def _unsound_root(storage: _Storage, values: dict[Node, object], order: dict[Node, int]) -> Node | None:
    """A storage root whose folding would change what some reader sees: one with an in-place write left
    in the graph (a run-time value written into it, or a write into a buffer or input), or with a
    folded write after a reader that stays in the graph (that reader would see the final value)."""
    for root, writes in storage.writes.items():
        members = [m for m in storage.members(root) if m in values]
        if not members:
            continue
        if any(w not in values for w in writes):
            return root
        last = max(order[w] for w in writes)
        if any(order[u] < last for m in members for u in m.users if u not in values):
            return root
    return None


def fold_constants(gm: GraphModule, max_numel: int = 1 << 22) -> int:
    """Evaluate every call_function node whose inputs are all constant; returns how many folded values
    were materialised as buffers (the nodes that computed them are erased).

    In-place writes fold with the storage they write when every write to it folds and no reader left in
    the graph comes before one (each reader then sees what it sees in eager); otherwise that storage and
    everything computed from it stay in the graph. Parameters (QAT may train them) are never constants;
    nor is a buffer or input some op writes."""
    graph = gm.graph
    storage = _Storage(graph)
    order = {node: i for i, node in enumerate(graph.nodes)}
    excluded = {root for root in storage.writes if root.op != "call_function"}  # buffers, inputs
    while True:
        values = _evaluate(gm, storage, excluded, max_numel)
        unsound = _unsound_root(storage, values, order)
        if unsound is None:
            break
        excluded.add(unsound)
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


def read_through_aliases(gm: GraphModule) -> set[Node]:
    """Nodes of a temporary's storage (the tensor, its views, the in-place ops on it, and their readers)
    where some node reads the storage after an in-place write through another alias: `m[:2] = x`
    followed by `m + 1` (the write reaches `m + 1` only because the slice aliases m). PT2E observes a
    value where it is created, before such a write, and torchao's convert folds the quantize of a
    factory op with no inputs as a constant: the quantized model would silently miss the write. The
    quantizer leaves these nodes unannotated (float, so they stay on the CPU under INT). Writes whose
    readers use the in-place op's own result (`nn.ReLU(inplace=True)`, `out += identity`) are plain
    data flow and unaffected."""
    storage = _Storage(gm.graph)
    order = {node: i for i, node in enumerate(gm.graph.nodes)}
    nodes: set[Node] = set()
    for root, writes in storage.writes.items():
        if root.op != "call_function":
            continue  # a buffer written in place: buffer_writes.py makes those writes functional
        members = storage.members(root)
        if any(order[user] > order[write] and user is not write
               for write in writes for member in members if order[member] < order[write]
               for user in member.users):
            nodes.update(members)
            nodes.update(user for member in members for user in member.users)
    return nodes


def fresh_attr_name(gm: GraphModule, prefix: str) -> str:
    """`prefix_<i>` with the first i not yet an attribute of `gm`."""
    i = 0
    while hasattr(gm, f"{prefix}_{i}"):
        i += 1
    return f"{prefix}_{i}"
