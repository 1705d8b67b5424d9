"""prod: TOSA REDUCE_PRODUCT, one axis at a time (FP profile: TOSA 1.0 defines it for float only).

A product of quantized values has no fixed output scale (it grows with the count, and its sign and
size depend on every element), so quantized prod stays on the CPU.
"""

from __future__ import annotations

import torch
from torch.fx import Node

from ..builder import Op
from ..context import LoweringContext, Value
from ..helpers.common import arg
from ..helpers.reduce import drop_dims, float_only, reduce, reduce_dims
from ..registry import aten_target, register_op

aten = torch.ops.aten


def _prod_support(node: Node, spec) -> str | None:
    reason = float_only(node, "prod")
    if reason:
        return reason.replace("or quantize the model for the INT profile", "TOSA REDUCE_PRODUCT is float only")
    if node.meta["val"].dtype != node.args[0].meta["val"].dtype:
        return "prod with a dtype= different from its input's is not lowered"
    return None


@register_op("prod", [aten.prod.dim_int, aten.prod.default], support=_prod_support, profiles=("FP",),
             fp32_opmath=True)
def lower_prod(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    if aten_target(node.target) is aten.prod.default:
        dims, keepdim = list(range(x.rank)), False
    else:
        dims, keepdim = reduce_dims(arg(node, 1, "dim"), x.rank), arg(node, 2, "keepdim", False)
    y = reduce(ctx, x, Op.REDUCE_PRODUCT, dims)
    return y if keepdim else drop_dims(ctx, y, dims)
