"""argmax / argmin as TOSA ARGMAX (float under FP, int8 under INT, int16 with EXT-INT16).

argmin is ARGMAX of an order-reversing map that keeps ties tied: NEGATE for floats, BITWISE_NOT
(~x = -x - 1, which cannot overflow) for integers. ARGMAX returns the first index of the largest
value, like torch. Quantized inputs are compared on their int8 codes: the scale is positive, so the
order (and every tie) is that of the fake-quantized values.
"""

from __future__ import annotations

import torch
from torch.fx import Node

from ..context import LoweringContext, Value
from ..helpers.common import arg
from ..helpers.reduce import arg_extreme, argmax_reason
from ..registry import Quant, aten_target, register_int_rule, register_op

aten = torch.ops.aten

_ARGMIN = (aten.argmin.default,)


def _argmax_support(node: Node, spec) -> str | None:
    return None if node.meta.get("arm_quantized") else argmax_reason(node.args[0].meta["val"].dtype, spec)


@register_op("argmax", [aten.argmax.default, *_ARGMIN], support=_argmax_support, quant=Quant.SHARED,
             bool_result=True, fp_index_math=True)  # INT: inputs share qparams with their producer; the indices are not quantized
def lower_argmax(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    dim, keepdim = arg(node, 1, "dim"), arg(node, 2, "keepdim", False)
    if x.is_const:  # folded
        return ctx.constant(aten_target(node.target)(x.const, dim, keepdim))
    return arg_extreme(ctx, x, dim, keepdim, aten_target(node.target) in _ARGMIN)


register_int_rule("argmax")(lower_argmax)
