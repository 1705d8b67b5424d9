"""Compile-time evaluation of nodes whose every tensor input is a compile-time constant.

`transformers` builds attention masks and position ids from `arange`, from buffers and from the input's
*shape*: chains of int64 and bool arithmetic (add, unsqueeze, ge/le, gather, cumsum, where, minimum,
abs, casts) that depend on nothing the caller passes at run time. TOSA 1.0's FP profile has no int32
comparisons, views or selects, so lowered one by one these stay on the CPU; evaluated here they become
one constant (or none at all, where only a float mask derived from them is used).

Assumes: the node's family is marked `folds_constants` (its aten op is a pure function of its
arguments), it is not in the quantized region (there constants are integer codes with qparams, which
the op itself would misread), and `registry.is_compile_time_constant` held for its inputs when the
partitioner claimed it. Guarantees: the value is what eager PyTorch computes for the node (the op is
run on the same constants); an int64 result that does not fit int32 is refused when a rule needs it in
the graph (`LoweringContext.tensor`), never wrapped.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import Node
from torch.fx.node import map_arg

from .context import LoweringContext, Value
from .helpers.common import aten_target


def fold_node(ctx: LoweringContext, node: Node) -> Value | tuple[Value, ...] | None:
    """The node's result as constants when every tensor input lowered to a constant; None otherwise
    (the family's rule lowers it then)."""
    inputs = [ctx.val(a) for a in node.all_input_nodes]
    if any(not v.is_const or v.qparams is not None for v in inputs):
        return None
    consts = {a: v.const for a, v in zip(node.all_input_nodes, inputs, strict=True)}

    def concrete(a: Any) -> Any:
        return consts[a]

    args, kwargs = map_arg(node.args, concrete), map_arg(node.kwargs, concrete)
    try:
        with torch.no_grad():
            result = aten_target(node.target)(*args, **kwargs)
    except Exception:  # noqa: BLE001 - the family's own rule decides (and explains) instead
        return None
    if isinstance(result, torch.Tensor):
        return ctx.constant(result)
    if isinstance(result, (tuple, list)) and all(isinstance(r, torch.Tensor) for r in result):
        return tuple(ctx.constant(r) for r in result)
    return None
