"""Small helpers shared by lowering rules."""

from __future__ import annotations

import numpy as np
import torch
from torch.fx import Node

from ..builder import DType, Op, T, tosa_dtype
from ..context import LoweringContext, Value
from ..delegation import aten_key

aten = torch.ops.aten


def arg(node: Node, index: int, name: str, default=None):
    """A node argument by position or keyword."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def const_scalar(node_arg) -> float | None:
    """The python number behind an argument when it is a compile-time scalar."""
    if isinstance(node_arg, (int, float)) and not isinstance(node_arg, bool):
        return node_arg
    return None


def is_constant_input(node: Node, index: int) -> bool:
    """Whether argument `index` is a parameter/buffer/constant placeholder (decided at lowering time)."""
    a = node.args[index] if len(node.args) > index else None
    if isinstance(a, Node) and "dequantize" in str(a.target):  # a quantized weight: look through
        a = a.args[0]
    return isinstance(a, Node) and a.meta.get("arm_constant", False)


def mul_shift(ctx: LoweringContext) -> T:
    """MUL's `shift` operand: 0 (used for int32 multiplies only)."""
    return ctx.b.const(np.zeros([1], dtype=np.int8), DType.INT8)


def elementwise(ctx: LoweringContext, node: Node, op: Op, inputs: list[Value], *attr,
                extra: list[T] | None = None, in_dtype: torch.dtype | None = None) -> Value:
    """Emit an elementwise `op` over broadcast inputs in their shared layout."""
    shape, dtype = ctx.out_meta(node)
    in_tosa = tosa_dtype(in_dtype or dtype)
    tensors, perm = ctx.broadcast(inputs, len(shape), in_tosa)
    return ctx.emit(op, tensors + (extra or []), shape, dtype, perm, *attr)


def unary(ctx: LoweringContext, node: Node, op: Op, value: Value, *attr, extra=None) -> Value:
    shape, dtype = ctx.out_meta(node)
    t = ctx.tensor(value, None, tosa_dtype(dtype) if value.is_const else None)
    perm = value.perm if not value.is_const else None
    return ctx.emit(op, [t] + (extra or []), shape, dtype, perm, *attr)


def nan_propagate():
    import tosa_serializer as ts

    return ts.NanPropagationMode.PROPAGATE


#: The aten OpOverload behind an edge-dialect target (or the target itself): the registry's key.
aten_target = aten_key


COMPARE_OPS = {
    aten.eq.Tensor: (Op.EQUAL, False), aten.eq.Scalar: (Op.EQUAL, False),
    aten.gt.Tensor: (Op.GREATER, False), aten.gt.Scalar: (Op.GREATER, False),
    aten.ge.Tensor: (Op.GREATER_EQUAL, False), aten.ge.Scalar: (Op.GREATER_EQUAL, False),
    aten.lt.Tensor: (Op.GREATER, True), aten.lt.Scalar: (Op.GREATER, True),
    aten.le.Tensor: (Op.GREATER_EQUAL, True), aten.le.Scalar: (Op.GREATER_EQUAL, True),
}
