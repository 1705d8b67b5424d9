"""Which int64 values provably fit int32, so the delegate may compute them as int32.

A delegate input is range-checked by the runtime at upload (a value outside int32 is an error), and
ops that only move, pick or compare values keep every value inside their inputs' range. Arithmetic
can grow values, so `int_bound` bounds an int64 node from the program itself: constants by their
values, arange by its end (the program's shapes bound a symbolic end), argmax by the reduced size,
sums and products by their operands' bounds, and a value nothing here bounds by its uses (an index:
transformers' StaticCache positions, `_bound_by_uses`). Unknown means not provable: the node stays on
the CPU.
"""

from __future__ import annotations

import sympy
import torch
from torch.fx import Node

from .graph import INT32_MAX
from .registry import aten_key

aten = torch.ops.aten


def _max_of(v) -> int | None:
    """The largest value a Python int or SymInt size can take (its symbols at their upper bounds)."""
    if isinstance(v, bool | int):
        return abs(int(v))
    if isinstance(v, torch.SymInt):
        expr = v.node.expr
        env = v.node.shape_env
        try:
            upper = expr.subs({s: env.var_to_range[s].upper for s in expr.free_symbols})
        except Exception:  # noqa: BLE001
            return None
        return abs(int(upper)) if isinstance(upper, int | sympy.Integer) else None
    return None


_PASS = {"view_copy", "squeeze_copy", "unsqueeze_copy", "alias_copy", "clone", "_to_copy", "_clone_dim_order",
         "_to_dim_order_copy", "permute_copy", "slice_copy", "select_copy", "expand_copy", "cat",
         "split_with_sizes_copy", "unbind_copy", "neg", "abs", "maximum",
         "minimum", "where"}


def int_bound(node, const_value, memo: dict | None = None, inside: set[Node] | None = None) -> int | None:
    """An upper bound of |value| over every element of `node` (an int literal, or an fx node), or None.
    `inside`: the nodes of one partition; a value computed outside it (on the CPU or in another
    partition) reaches the partition as a plain input, so it is unknown there."""
    memo = {} if memo is None else memo
    if not isinstance(node, Node):
        return _max_of(node) if isinstance(node, bool | int | torch.SymInt) else None
    if node in memo:
        return memo[node]
    memo[node] = None  # cycles are impossible in fx graphs; this guards the recursion's own memo
    val = node.meta.get("val")
    bound = None
    if isinstance(val, torch.SymInt | int):  # a size (sym_size): bounded by its symbols' upper bounds
        bound = _max_of(val)
    elif isinstance(val, torch.Tensor) and val.dtype == torch.bool:
        bound = 1
    elif isinstance(val, torch.Tensor) and val.dtype.is_floating_point:
        bound = None
    else:
        c = const_value(node)
        if c is not None:
            bound = int(c.abs().max()) if c.numel() else 0
        elif node.op == "call_function" and (inside is None or node in inside):
            bound = _op_bound(node, const_value, memo, inside)
        if bound is None:
            bound = _bound_by_uses(node)
    memo[node] = bound
    return bound


def _bound_by_uses(node: Node) -> int | None:
    """The bound the shared proof gives (`arm_tosa_core.registry.int_range`): a value used as an index
    (a cache position written by index_copy / index_put, a token id) lies in the indexed dim, since
    eager raises on any other; sums and moves of such values follow. Valid wherever the value is
    computed: the true value is that small, so int32 arithmetic on it cannot wrap."""
    from arm_tosa_core.registry import int_range

    bounds = int_range(node)
    return None if bounds is None else max(abs(bounds[0]), abs(bounds[1]))


def _op_bound(node: Node, const_value, memo: dict, inside: set[Node] | None) -> int | None:
    name = str(aten_key(node.target)).split(".")[-2] if "." in str(aten_key(node.target)) else ""
    args = [a for a in node.args if not isinstance(a, list | tuple)]
    sub = [int_bound(a, const_value, memo, inside) for a in node.all_input_nodes]
    if name == "arange":
        ends = [int_bound(a, const_value, memo, inside) for a in node.args[:2]] or [0]
        return None if None in ends else max(ends)
    if name in ("argmax", "argmin"):
        x = node.args[0].meta["val"]
        return max(int(x.numel()) if not isinstance(x.numel(), torch.SymInt) else (_max_of(x.numel()) or 0), 1)
    if name in ("full", "full_like", "scalar_tensor"):
        return _max_of(node.args[0] if name == "scalar_tensor" else node.args[1])
    if name in ("add", "sub", "mul"):
        ops = [int_bound(a, const_value, memo, inside) for a in args[:2]]
        if None in ops or len(ops) < 2:
            return None
        alpha = abs(int(node.kwargs.get("alpha", 1)))
        return ops[0] * ops[1] if name == "mul" else ops[0] + alpha * ops[1]
    if name in ("cumsum",):
        x = node.args[0].meta["val"]
        n = _max_of(x.shape[node.args[1]])
        return None if sub[0] is None or n is None else sub[0] * n
    if name == "fmod":  # |fmod(a, b)| <= |a|
        return int_bound(node.args[0], const_value, memo, inside)
    if name in ("embedding", "index_select", "index", "gather"):  # values of the table, whatever the index
        return int_bound(node.args[0], const_value, memo, inside)
    if name in _PASS and sub and None not in sub:
        return max(sub)
    return None


def fits_int32(node: Node, const_value, inside: set[Node] | None = None) -> str | None:
    """None when every int64 tensor `node` makes is provably within int32 (from the nodes of its
    partition `inside` only, when given), else a CPU reason."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dtype != torch.int64:
        return None
    bound = int_bound(node, const_value, inside=inside)
    if bound is None or bound > INT32_MAX:
        return ("int64 result not provably within int32 (the delegate computes integers as int32; its "
                "operands are not bounded by constants or the program's shapes)")
    return None
