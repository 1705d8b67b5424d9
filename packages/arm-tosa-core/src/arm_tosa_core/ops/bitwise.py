"""Integer shifts (`x << n`, `x >> n`): TOSA LOGICAL_LEFT_SHIFT / ARITHMETIC_RIGHT_SHIFT (INT profile).

torch shifts signed integers arithmetically right and wraps left shifts, as these operators do for
shift amounts inside the type's width. For amounts at or past the width torch gives 0 (or -1) while
TOSA leaves the result undefined, so only constant amounts inside the width are lowered.
(Bitwise and/or/xor/not live with the logical family in elementwise.py: one aten op serves both.)
"""

from __future__ import annotations

import torch
from torch.fx import Node

from ..builder import Op
from ..context import LoweringContext, Value
from ..helpers.common import elementwise
from ..registry import aten_target, register_op

aten = torch.ops.aten

_LEFT = (aten.__lshift__.Scalar, aten.__lshift__.Tensor, aten.bitwise_left_shift.Tensor,
         aten.bitwise_left_shift.Tensor_Scalar)
_RIGHT = (aten.__rshift__.Scalar, aten.__rshift__.Tensor, aten.bitwise_right_shift.Tensor,
          aten.bitwise_right_shift.Tensor_Scalar)
_WIDTH = {torch.int8: 8, torch.int16: 16, torch.int32: 32}


def _shift_support(node: Node, spec) -> str | None:
    dtype = node.args[0].meta["val"].dtype
    if dtype not in _WIDTH:
        return f"shifts of {dtype} tensors are not lowered (int8, int16 or int32 only)"
    if not spec.support_integer():
        return f"integer shifts need the INT profile in this toolkit; under {spec} they run on the CPU"
    amount = node.args[1]
    if isinstance(amount, Node):
        return ("shift by a runtime tensor is not lowered: TOSA leaves amounts at or past the bit width "
                "undefined, where torch gives 0 or -1")
    if not isinstance(amount, int) or not 0 <= amount < _WIDTH[dtype]:
        return f"shift by {amount} is not lowered (TOSA shifts by 0..{_WIDTH[dtype] - 1} for {dtype})"
    return None


@register_op("shift", [*_LEFT, *_RIGHT], support=_shift_support, profiles=("INT",))
def lower_shift(ctx: LoweringContext, node: Node) -> Value:
    x, amount = ctx.val(node.args[0]), ctx.val(node.args[1])
    if aten_target(node.target) in _LEFT:
        return elementwise(ctx, node, Op.LOGICAL_LEFT_SHIFT, [x, amount])
    return elementwise(ctx, node, Op.ARITHMETIC_RIGHT_SHIFT, [x, amount], False)
