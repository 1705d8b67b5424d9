"""argmax / argmin as TOSA ARGMAX (float under FP, int8 under INT, int16 with EXT-INT16).

argmin is ARGMAX of an order-reversing map that keeps ties tied: NEGATE for floats, BITWISE_NOT
(~x = -x - 1, which cannot overflow) for integers. ARGMAX returns the first index of the largest
value, like torch. Quantized inputs are compared on their int8 codes: the scale is positive, so the
order (and every tie) is that of the fake-quantized values.
"""

from __future__ import annotations

import torch
from torch.fx import Node

from ..builder import DType, Op
from ..context import LoweringContext, Value
from ..registry import Quant, aten_target, register_int_rule, register_op
from .common import arg
from .elementwise import nan_propagate

aten = torch.ops.aten

_ARGMIN = (aten.argmin.default,)


def argmax_reason(dtype: torch.dtype, spec) -> str | None:
    """Why TOSA ARGMAX cannot take a (not quantized) tensor of `dtype` under `spec`; None when it can."""
    if dtype.is_floating_point:
        return None if spec.support_float() else f"argmax of {dtype} needs the FP profile (or quantize the model)"
    if dtype == torch.int8 or (dtype == torch.int16 and spec.support_extension("int16")):
        return None
    if dtype == torch.int16:
        return "TOSA 1.0 ARGMAX on int16 needs the int16 extension (a spec with \"+int16\")"
    return (f"TOSA 1.0 ARGMAX has no {str(dtype).replace('torch.', '').upper()} form (it takes float, int8, "
            "and int16 with the int16 extension)")


def _argmax_support(node: Node, spec) -> str | None:
    return None if node.meta.get("arm_quantized") else argmax_reason(node.args[0].meta["val"].dtype, spec)


def arg_extreme(ctx: LoweringContext, x: Value, dim: int | None, keepdim: bool, minimum: bool) -> Value:
    """The int64 (carried as int32) index of the largest (`minimum`: smallest) entry along `dim`
    (None: over every element). The input is RESHAPEd so that ARGMAX's result already has the output
    shape: int32 RESHAPEs are INT-profile only, input ones are not."""
    if dim is None:  # over every element: [(1,) * rank if keepdim, numel]
        shape = (1,) * x.rank if keepdim else ()
        x, dim = ctx.reshape(x, (*shape, int(torch.Size(x.shape).numel()))), len(shape)
    else:
        dim %= max(x.rank, 1)
        if keepdim:  # a unit dim before `dim` stays in the result
            x, dim = ctx.reshape(x, (*x.shape[:dim], 1, *x.shape[dim:])), dim + 1
        shape = tuple(d for i, d in enumerate(x.shape) if i != dim)
    t = ctx.tensor(x, tuple(range(x.rank)))
    if minimum:
        op = Op.NEGATE if t.dtype in (DType.FP16, DType.FP32, DType.BF16) else Op.BITWISE_NOT
        extra = [ctx.b.zero_point(t.dtype), ctx.b.zero_point(t.dtype)] if op == Op.NEGATE else []
        t = ctx.b.op(op, [t, *extra], t.shape, t.dtype)
    index = ctx.b.op(Op.ARGMAX, [t], shape, DType.INT32, dim, nan_propagate())
    return ctx.from_tensor(index, shape, torch.int64)


@register_op("argmax", [aten.argmax.default, *_ARGMIN], support=_argmax_support, quant=Quant.SHARED,
             bool_result=True, fp_index_math=True)  # INT: inputs share qparams with their producer; the indices are not quantized
def lower_argmax(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    dim, keepdim = arg(node, 1, "dim"), arg(node, 2, "keepdim", False)
    if x.is_const:  # folded
        return ctx.constant(aten_target(node.target)(x.const, dim, keepdim))
    return arg_extreme(ctx, x, dim, keepdim, aten_target(node.target) in _ARGMIN)


register_int_rule("argmax")(lower_argmax)
