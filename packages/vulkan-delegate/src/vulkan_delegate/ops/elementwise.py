"""Elementwise families: binary with broadcast (shader `binary`), unary/activations (shader `unary`)."""

from __future__ import annotations

import math

import torch
from torch.fx import Node

from ..graph import I32, VARIANT, LoweringError, contiguous_strides, numel
from ..int_range import fits_int32
from ..lower import shape_of
from ..opcodes import opcode
from ..registry import INT_VARIANTS, any_tensors, aten_key, float_tensors, register

aten = __import__("torch").ops.aten

# op names of shaders/binary.comp and unary.comp (their codes: vulkan_delegate/opcodes.py)
BINARY = {aten.add.Tensor: "add", aten.sub.Tensor: "sub", aten.mul.Tensor: "mul", aten.div.Tensor: "div",
          aten.maximum.default: "maximum", aten.minimum.default: "minimum", aten.pow.Tensor_Tensor: "pow",
          aten.fmod.Tensor: "fmod"}  # fmod: C semantics (sign of the dividend), as torch
INF = math.inf


def broadcast_strides(in_shape: list, out_shape: list) -> list:
    """Element strides of `in_shape` read at `out_shape` indices (0 where broadcast), padded to rank 6."""
    strides = contiguous_strides(in_shape)
    pad = len(out_shape) - len(in_shape)
    res = [0] * pad + [0 if (d == 1 and o != 1) else s for d, o, s in
                       zip(in_shape, out_shape[pad:], strides, strict=True)]
    return [0] * (6 - len(res)) + res


def operand(ctx, arg, like: torch.dtype):
    """The graph tensor of an operand: a tensor argument, or a number as a 1-element constant of the
    dtype the op computes in (`like`), read with stride 0 as a broadcast operand."""
    if isinstance(arg, Node):
        return ctx.inp(arg)
    return ctx.g.constant(torch.tensor([arg], dtype=like), ctx.dtype(like))


_INT_BINARY = ("add", "sub", "mul", "maximum", "minimum", "fmod")  # ops binary.comp's i32 variant computes


def _int_arith_support(node: Node, op: str) -> str | None:
    """Integer arithmetic (int32, int64 computed as int32): the ops the i32 variant has, no bool."""
    out = node.meta["val"].dtype
    if out == torch.bool:
        return f"{op} of bool tensors"
    if op not in _INT_BINARY:
        return f"{op} of integer tensors"
    return any_tensors(node)


def _binary_support(node: Node) -> str | None:
    if node.kwargs.get("rounding_mode") == "floor":  # div.Tensor_mode (`//`, torch.floor_divide)
        return ("div with rounding_mode='floor' (torch corrects floor(a / b) with fmod(a, b), e.g. 1.0 // 0.1 "
                "is 9, which this delegate does not compute)")
    if not node.meta["val"].dtype.is_floating_point:
        return _int_arith_support(node, BINARY[_key(node)])
    if any(isinstance(a, Node) and not a.meta["val"].dtype.is_floating_point for a in node.args[:2]):
        return "float arithmetic with an integer tensor operand"
    return float_tensors(node)


INT32_PROOF_FAMILIES = ("binary", "scalar")  # the entries whose lowering calls int_result


def int_result(ctx, node: Node) -> str:
    """The shader variant of an arithmetic node: i32 (when its int64 values provably fit) or float."""
    if not node.meta["val"].dtype.is_floating_point:
        why = fits_int32(node, ctx.const_value)
        if why:
            raise LoweringError(why)
        return VARIANT[I32]
    return ctx.sfx


def _scalar_affine(ctx, node: Node) -> bool:
    """In fp16, `x op s` with s a number (exir lifts `x * 1e-7` into a 1-element constant) runs as the
    unary affine with s as an fp32 push word: stored as an fp16 constant, s = 1e-7 became 1.19e-7 (a
    19 % error) where torch's fp16 multiplies by the fp32 scalar. False when the op is not such a case."""
    op = {aten.add.Tensor: "add", aten.sub.Tensor: "sub", aten.mul.Tensor: "mul", aten.div.Tensor: "div"}.get(
        aten_key(node.target))
    if op is None or ctx.sfx != "f16" or not node.meta["val"].dtype.is_floating_point:
        return False
    scalars = [a if isinstance(a, int | float) else _one_value(ctx.const_value(a)) for a in node.args[:2]]
    tensor_at = 1 if scalars[0] is not None else 0
    s = scalars[1 - tensor_at]
    x = node.args[tensor_at]
    if s is None or not isinstance(x, Node):
        return False
    shape, out_shape = list(x.meta["val"].shape), list(node.meta["val"].shape)
    if not all(isinstance(d, int) for d in out_shape) or shape != out_shape:  # static, no broadcast
        return False
    alpha = float(node.kwargs.get("alpha", 1.0))
    scale, shift = {("mul", 0): (s, 0.0), ("mul", 1): (s, 0.0), ("div", 0): (1.0 / s if s else 0.0, 0.0),
                    ("add", 0): (1.0, alpha * s), ("add", 1): (alpha, s),
                    ("sub", 0): (1.0, -alpha * s), ("sub", 1): (-alpha, s)}.get((op, tensor_at), (None, None))
    if scale is None or (op == "div" and s == 0):  # s / x, x / 0: the binary shader
        return False
    y = ctx.out(node)
    n = numel(y.shape)
    ctx.dispatch("unary", [ctx.inp(x), y], [opcode("unary", "affine"), n, float(scale), float(shift)], (n,))
    return True


def _one_value(value) -> float | None:
    """The number in a 1-element float constant, else None."""
    if value is None or value.numel() != 1 or not value.dtype.is_floating_point:
        return None
    return float(value.reshape(()))


@register("binary", list(BINARY) + [aten.div.Tensor_mode], ["binary"], support=_binary_support,
          variants=INT_VARIANTS)
def lower_binary(ctx, node: Node) -> None:
    from .rope import (
        lower_rope,  # rope reads this module's broadcast_strides: imported here, not at the top
    )

    if _key(node) == aten.add.Tensor and lower_rope(ctx, node):
        return
    if _scalar_affine(ctx, node):
        return
    variant = int_result(ctx, node)
    like = node.meta["val"].dtype
    a, b = operand(ctx, node.args[0], like), operand(ctx, node.args[1], like)
    alpha = float(node.kwargs.get("alpha", 1.0))
    y = ctx.out(node)
    shape = y.shape
    if node.kwargs.get("rounding_mode") == "trunc":  # torch: trunc(a / b), the quotient rounded once
        quotient = ctx.g.new_tensor(shape, y.dtype)
        _binary_dispatch(ctx, node, [a, b, quotient], alpha, variant)
        n = numel(shape)
        ctx.dispatch("unary", [quotient, y], [opcode("unary", "trunc"), n, 0.0, 0.0], (n,))
        return
    _binary_dispatch(ctx, node, [a, b, y], alpha, variant)


def _binary_dispatch(ctx, node: Node, bindings: list, alpha: float, variant: str) -> None:
    """y = a op b (bindings [a, b, y]), broadcasting a and b to y's shape."""
    a, b, y = bindings
    shape = y.shape
    sizes = [1] * (6 - len(shape)) + list(shape)
    ctx.dispatch("binary", [a, b, y], [opcode("binary", BINARY[_key(node)]), numel(shape), *sizes,
                                       *broadcast_strides(a.shape, shape),
                                       *broadcast_strides(b.shape, shape), alpha], (numel(shape),),
                 variant=variant)


def _key(node: Node):
    t = aten_key(node.target)
    return aten.div.Tensor if t == aten.div.Tensor_mode else t


def unary(ctx, node: Node, op: str, alpha: float = 0.0, beta: float = 0.0) -> None:
    """y = op(x; alpha, beta) with `op` one of opcodes.OP_TABLES["unary"]."""
    x = ctx.inp(node.args[0])
    y = ctx.out(node)
    n = numel(y.shape)
    ctx.dispatch("unary", [x, y], [opcode("unary", op), n, float(alpha), float(beta)], (n,))


_SIMPLE = {aten.sigmoid.default: "sigmoid", aten.tanh.default: "tanh", aten.silu.default: "silu",
           aten.hardswish.default: "hardswish", aten.hardsigmoid.default: "hardsigmoid",
           aten.exp.default: "exp", aten.rsqrt.default: "rsqrt", aten.sqrt.default: "sqrt",
           aten.abs.default: "abs", aten.log.default: "log", aten.reciprocal.default: "reciprocal",
           aten.sin.default: "sin", aten.cos.default: "cos", aten.round.default: "round",
           aten.floor.default: "floor", aten.ceil.default: "ceil", aten.trunc.default: "trunc",
           aten.sign.default: "sign", aten.erf.default: "erf"}


def clamp_bounds(node: Node) -> tuple[float, float]:
    """(min, max) of a clamp-like activation (relu, relu6/hardtanh, clamp)."""
    t = aten_key(node.target)
    if t == aten.relu.default:
        return 0.0, INF
    if t == aten.hardtanh.default:
        return float(node.args[1]) if len(node.args) > 1 else -1.0, float(node.args[2]) if len(node.args) > 2 else 1.0
    lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
    hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max")
    return (-INF if lo is None else float(lo)), (INF if hi is None else float(hi))


CLAMPS = [aten.relu.default, aten.hardtanh.default, aten.clamp.default]


def _clamp_support(node: Node) -> str | None:
    lo = node.args[1] if len(node.args) > 1 else node.kwargs.get("min")
    hi = node.args[2] if len(node.args) > 2 else node.kwargs.get("max")
    if isinstance(lo, Node) or isinstance(hi, Node):
        return "clamp with tensor bounds"
    return float_tensors(node)


@register("clamp", CLAMPS, ["unary"], support=_clamp_support)
def lower_clamp(ctx, node: Node) -> None:
    unary(ctx, node, "clamp", *clamp_bounds(node))


# kept whole by exir (else decomposed into 3-5 dispatches)
_KEEP_WHOLE = [aten.silu.default, aten.hardswish.default, aten.hardsigmoid.default]


@register("activation", list(_SIMPLE), ["unary"], support=float_tensors, preserve=_KEEP_WHOLE)
def lower_activation(ctx, node: Node) -> None:
    unary(ctx, node, _SIMPLE[aten_key(node.target)])


def _leaky_relu_support(node: Node) -> str | None:
    if not isinstance(_slope(node), int | float):
        return "leaky_relu slope is not a number"
    return float_tensors(node)


@register("leaky_relu", [aten.leaky_relu.default], ["unary"], support=_leaky_relu_support)
def lower_leaky_relu(ctx, node: Node) -> None:
    unary(ctx, node, "leaky_relu", float(_slope(node)))


def _slope(node: Node):
    return node.args[1] if len(node.args) > 1 else node.kwargs.get("negative_slope", 0.01)


def _gelu_support(node: Node) -> str | None:
    if node.kwargs.get("approximate", "none") not in ("none", "tanh"):
        return f"gelu approximate={node.kwargs['approximate']!r}"
    return float_tensors(node)


@register("gelu", [aten.gelu.default], ["unary"], support=_gelu_support)
def lower_gelu(ctx, node: Node) -> None:
    unary(ctx, node, "gelu_tanh" if node.kwargs.get("approximate") == "tanh" else "gelu")


def _scalar_support(node: Node) -> str | None:
    if len(node.args) > 1 and not isinstance(node.args[1], int | float):
        return "scalar operand is not a number"
    if not node.meta["val"].dtype.is_floating_point:  # integer: add/sub/mul/neg on the i32 binary shader
        op = str(aten_key(node.target)).split(".")[1]
        return _int_arith_support(node, "mul" if op == "neg" else op)
    return float_tensors(node)


_SCALAR = [aten.mul.Scalar, aten.add.Scalar, aten.sub.Scalar, aten.div.Scalar, aten.neg.default,
           aten.pow.Tensor_Scalar, aten.fmod.Scalar]


@register("scalar", _SCALAR, ["unary", "binary"], support=_scalar_support)
def lower_scalar(ctx, node: Node) -> None:
    t = aten_key(node.target)
    if not node.meta["val"].dtype.is_floating_point or t == aten.fmod.Scalar:  # y = x op s on the binary shader
        variant = int_result(ctx, node)
        op = str(t).split(".")[1]
        x = ctx.inp(node.args[0])
        s = operand(ctx, -1 if op == "neg" else node.args[1], node.meta["val"].dtype)
        y = ctx.out(node)
        n = numel(y.shape)
        sizes = [1] * (6 - len(y.shape)) + list(y.shape)
        ctx.dispatch("binary", [x, s, y], [opcode("binary", "mul" if op == "neg" else op), n, *sizes,
                                           *broadcast_strides(x.shape, y.shape), *broadcast_strides(s.shape, y.shape),
                                           float(node.kwargs.get("alpha", 1))], (n,), variant=variant)
        return
    s = float(node.args[1]) if len(node.args) > 1 else 0.0
    alpha = float(node.kwargs.get("alpha", 1.0))
    if t == aten.pow.Tensor_Scalar and s < 0:
        _reciprocal_power(ctx, node, -s)
    elif t == aten.pow.Tensor_Scalar:
        unary(ctx, node, "pow", s)
    elif t == aten.mul.Scalar:
        unary(ctx, node, "affine", s, 0.0)
    elif t == aten.div.Scalar:
        unary(ctx, node, "affine", 1.0 / s, 0.0)
    elif t == aten.add.Scalar:
        unary(ctx, node, "affine", 1.0, s * alpha)
    elif t == aten.sub.Scalar:
        unary(ctx, node, "affine", 1.0, -s * alpha)
    else:  # neg
        unary(ctx, node, "affine", -1.0, 0.0)


def _reciprocal_power(ctx, node: Node, e: float) -> None:
    """y = 1 / x ** e for x ** -e: GLSL's pow is undefined at x = 0 for a negative exponent (lavapipe gave 0
    for 0 ** -1, torch gives inf); the division gives torch's inf there."""
    x, y = ctx.inp(node.args[0]), ctx.out(node)
    n = numel(y.shape)
    power = ctx.g.new_tensor(y.shape, y.dtype)
    ctx.dispatch("unary", [x, power], [opcode("unary", "pow"), n, float(e), 0.0], (n,))
    one = operand(ctx, 1.0, node.meta["val"].dtype)
    sizes = [1] * (6 - len(y.shape)) + list(y.shape)
    ctx.dispatch("binary", [one, power, y], [opcode("binary", "div"), n, *sizes, *broadcast_strides(one.shape, y.shape),
                                             *broadcast_strides(y.shape, y.shape), 1.0], (n,))


__all__ = ["broadcast_strides", "clamp_bounds", "CLAMPS", "shape_of"]
