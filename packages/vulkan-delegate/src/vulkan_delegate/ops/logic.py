"""Comparisons, logic and selection with bool results or conditions (shaders `compare`, `where`).

Bools are int32 0/1 on the device. Float inputs compare in the compute dtype, int32/int64/bool ones
as int32. A Scalar overload's number becomes a 1-element constant of the input's dtype, read with
stride 0 (as a broadcast operand).
"""

from __future__ import annotations

import torch
from torch.fx import Node

from ..graph import VARIANT, numel
from ..opcodes import opcode
from ..registry import INT_VARIANTS, INTS, any_tensors, aten_key, register
from .elementwise import broadcast_strides, operand

aten = torch.ops.aten

_COMPARE = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge",
            "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor",
            "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor"}
COMPARE_TARGETS = [getattr(aten, n).Tensor for n in ("eq", "ne", "lt", "le", "gt", "ge")] + [
    getattr(aten, n).Scalar for n in ("eq", "ne", "lt", "le", "gt", "ge")] + [
    aten.logical_and.default, aten.logical_or.default, aten.logical_xor.default, aten.logical_not.default,
    aten.bitwise_and.Tensor, aten.bitwise_or.Tensor, aten.bitwise_xor.Tensor, aten.bitwise_not.default,
    aten.bitwise_and.Scalar, aten.bitwise_or.Scalar, aten.bitwise_xor.Scalar]


def _name(node: Node) -> str:
    return str(aten_key(node.target)).split(".")[1]


def _compute_dtype(node: Node) -> torch.dtype:
    """The dtype both operands are read as: float if either is float (torch's promotion), else int."""
    dts = [a.meta["val"].dtype for a in node.args[:2] if isinstance(a, Node)]
    dts += [torch.float32 for a in node.args[1:2] if isinstance(a, float)]
    return next((d for d in dts if d.is_floating_point), dts[0])


def _compare_support(node: Node) -> str | None:
    name = _name(node)
    if name.startswith("bitwise") and any(
            isinstance(a, Node) and a.meta["val"].dtype not in INTS for a in node.args[:2]):
        return f"{name} of float tensors"
    if len(node.args) > 1 and not isinstance(node.args[1], Node | bool | int | float):
        return "operand is not a tensor or a number"
    if any(isinstance(a, Node) and a.meta["val"].dtype.is_floating_point for a in node.args[:2]) and \
            any(isinstance(a, Node) and not a.meta["val"].dtype.is_floating_point for a in node.args[:2]):
        return "a comparison of float with integer tensors"
    return any_tensors(node)


@register("compare", COMPARE_TARGETS, ["compare"], support=_compare_support, variants=INT_VARIANTS)
def lower_compare(ctx, node: Node) -> None:
    name = _name(node)
    like = _compute_dtype(node)
    a = ctx.inp(node.args[0])
    if name in ("logical_not", "bitwise_not"):
        b, op = a, name
        if name == "bitwise_not" and node.args[0].meta["val"].dtype == torch.bool:
            op = "bool_not"
    else:
        b, op = operand(ctx, node.args[1], like), _COMPARE[name]
    if a.dtype != b.dtype:
        raise ValueError("comparison operands of different device dtypes")
    y = ctx.out(node)
    shape = y.shape
    n = numel(shape)
    sizes = [1] * (6 - len(shape)) + list(shape)
    ctx.dispatch("compare", [a, b, y], [opcode("compare", op), n, *sizes, *broadcast_strides(a.shape, shape),
                                        *broadcast_strides(b.shape, shape)], (n,), variant=VARIANT[a.dtype])


WHERE = [aten.where.self]  # exir's edge form of every overload (scalars become scalar_tensor), and of masked_fill


def _where_support(node: Node) -> str | None:
    cond = node.args[0].meta["val"]
    if cond.dtype != torch.bool:
        return f"where with a {cond.dtype} condition"
    vals = [a.meta["val"].dtype for a in node.args[1:3] if isinstance(a, Node)]
    if len({d.is_floating_point for d in vals}) > 1:
        return "where of a float and an integer tensor"
    return any_tensors(node)


@register("where", WHERE, ["where"], support=_where_support, variants=INT_VARIANTS)
def lower_where(ctx, node: Node) -> None:
    out_dtype = node.meta["val"].dtype
    c = ctx.inp(node.args[0])
    a, b = (operand(ctx, arg, out_dtype) for arg in node.args[1:3])
    y = ctx.out(node)
    if not (a.dtype == b.dtype == y.dtype):
        raise ValueError("where operands of different device dtypes")
    shape = y.shape
    n = numel(shape)
    sizes = [1] * (6 - len(shape)) + list(shape)
    ctx.dispatch("where", [c, a, b, y], [n, *sizes, *[s for t in (c, a, b) for s in broadcast_strides(t.shape, shape)]],
                 (n,), variant=VARIANT[y.dtype])

