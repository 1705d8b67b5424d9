"""softmax and log_softmax (FP), numerically stable, in the input's layout (no TRANSPOSE).

softmax(x) = e / sum(e) with e = exp(x - max(x)); log_softmax(x) = (x - max(x)) - log(sum(e)).
Subtracting the max keeps EXP from overflowing, as PyTorch's kernels do.
"""

from __future__ import annotations

import torch
from torch.fx import Node

from ..builder import Op
from ..context import LoweringContext, Value
from ..helpers.common import mul_shift, nan_propagate
from ..helpers.reduce import binary, float_only, reduce, unary
from ..registry import aten_target, register_op

aten = torch.ops.aten


def _softmax_support(node: Node, spec) -> str | None:
    reason = float_only(node, "softmax")
    if reason:
        return reason
    if node.args[2]:
        return "softmax with half_to_float=True is not lowered (compute in float32 instead)"
    return None


@register_op("softmax", [aten._softmax.default, aten._log_softmax.default], support=_softmax_support,
             profiles=("FP",), fp32_opmath=True)
def lower_softmax(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    dims = [node.args[1] % x.rank] if x.rank else []  # a 0-d input reduces nothing
    shifted = binary(ctx, Op.SUB, x, reduce(ctx, x, Op.REDUCE_MAX, dims, nan_propagate()))
    exps = unary(ctx, Op.EXP, shifted)
    total = reduce(ctx, exps, Op.REDUCE_SUM, dims)
    if aten_target(node.target) is aten._log_softmax.default:
        return binary(ctx, Op.SUB, shifted, unary(ctx, Op.LOG, total))
    return binary(ctx, Op.MUL, exps, unary(ctx, Op.RECIPROCAL, total), mul_shift(ctx))
