"""The INT profile's quantized region: which nodes lower in integers.

After PT2E `convert_pt2e`, every quantized edge is `quantize -> dequantize`. The INT lowering folds them:
a dequantize gives its int8 input tensor `qparams`; ops compute in integers (int32 accumulators carry
an `acc` scale); a quantize RESCALEs to its parameters, or passes through when they already match.
The arithmetic (QParams, RESCALE) lives in `helpers.qparams` and `helpers.intmath` (re-exported here).
"""

from __future__ import annotations

import operator

import torch
from torch.fx import Graph, Node

from .helpers.intmath import multiplier_shift, requantize, rescale, to_int32  # noqa: F401  (re-exported)
from .helpers.qparams import (  # noqa: F401  (re-exported)
    DEQUANTIZE,
    QUANTIZE,
    QParams,
    is_dequantize,
    is_quantize,
    qd,
    qparams_of,
    target_of,
)
from .registry import MAX_LOOKUP, bounded_integer_cast, lookup  # noqa: F401  (MAX_LOOKUP re-exported)


# -- the quantized region ---------------------------------------------------------------------
def duplicate_dequantize(graph: Graph) -> None:
    """Give every user of a dequantize node its own copy.

    Guarantees each consumer can sit in a partition together with its dequantize: a shared one can
    otherwise be placed apart from some consumers, leaving them a float input they cannot lower.
    """
    for node in list(graph.nodes):
        if not is_dequantize(node) or len(node.users) < 2:
            continue
        for user in list(node.users)[1:]:
            with graph.inserting_before(user):
                copy = graph.call_function(node.target, node.args, node.kwargs)
            copy.meta = dict(node.meta)
            user.replace_input_with(node, copy)


def _has_int_path(node: Node) -> bool:

    if node.target is operator.getitem:
        return True
    entry = lookup(node.target)
    return entry is not None and entry.int_path() is None


def _float_parameter(node: Node, arg: Node) -> bool:
    """`arg` is a float constant that `node`'s INT rule folds at compile time (its family says so with
    `float_params=True`, e.g. batch norm's statistics), so it need not be quantized."""
    if not (arg.op == "get_attr" or (arg.op == "placeholder" and arg.meta.get("arm_constant"))):
        return False
    entry = lookup(node.target) if node.op == "call_function" else None
    return entry is not None and entry.float_params


def mark_quantized_region(graph: Graph) -> None:
    """Flag (`meta["arm_quantized"]`) the float nodes that sit between dequantize and quantize nodes.

    A float call_function node is in the region when each float tensor input comes from a dequantize
    or another region node, and each user is a quantize or another region node. Found by shrinking
    the set of candidates to a fixed point. Quantize nodes fed from the region and dequantize nodes
    feeding it are flagged too; those at the program's float boundary are not (they stay on the CPU).
    """
    candidates = set()
    for node in graph.nodes:
        node.meta.pop("arm_quantized", None)
        if node.op != "call_function" or is_quantize(node) or is_dequantize(node):
            continue
        if (node.target is operator.getitem or _is_float(node) or _bool_result(node)) and _has_int_path(node):
            candidates.add(node)
    changed = True
    while changed:
        changed = False
        for node in list(candidates):
            floats = [a for a in node.all_input_nodes if _is_float(a)]
            ok = all(is_dequantize(a) or a in candidates or _float_parameter(node, a) for a in floats)
            # a float made from no quantized value (a cast of a bool mask) has no qparams to carry,
            # unless it is a bounded integer whose quantize is a lookup (`bounded_integer_cast`)
            ok = ok and (bool(floats) or node.target is operator.getitem or bounded_integer_cast(node) is not None)
            if not _bool_result(node):  # a comparison's bool result goes anywhere
                ok = ok and all(is_quantize(u) or u in candidates for u in node.users)
            ok = ok and bool(node.users) and (not _bool_result(node) or any(
                is_dequantize(a) for a in node.all_input_nodes))
            if not ok:
                candidates.discard(node)
                changed = True
    for node in candidates:
        node.meta["arm_quantized"] = True
    for node in graph.nodes:
        if is_quantize(node) and node.args[0] in candidates:
            node.meta["arm_quantized"] = True
        elif is_dequantize(node) and any(u in candidates for u in node.users):
            node.meta["arm_quantized"] = True
    for node in graph.nodes:
        if is_dequantize(node) and _requantizes_between_regions(node):
            node.meta["arm_quantized"] = True
            for user in node.users:
                user.meta["arm_quantized"] = True


def _requantizes_between_regions(dq: Node) -> bool:
    """A dequantize whose every user is a quantize, between two region nodes: where one layer's int8
    result feeds a layer with int16 activations (or back), PT2E writes dequantize(int8) -> quantize(int16).
    The pair is one RESCALE, so it joins the region (and the partition) instead of splitting it."""
    source = dq.args[0] if dq.args else None
    if not (isinstance(source, Node) and is_quantize(source) and source.meta.get("arm_quantized")):
        return False
    if not dq.users or not all(is_quantize(u) for u in dq.users):
        return False
    return all(any(d.meta.get("arm_quantized") for d in u.users) for u in dq.users)


def _bool_result(node: Node) -> bool:
    """A comparison of quantized values (its family sets `bool_result`): inputs in the region, output bool."""
    entry = lookup(node.target)
    return entry is not None and entry.bool_result


def _is_float(node: Node) -> bool:
    val = node.meta.get("val")
    if isinstance(val, (tuple, list)):
        return any(isinstance(v, torch.Tensor) and v.dtype.is_floating_point for v in val)
    return isinstance(val, torch.Tensor) and val.dtype.is_floating_point
