"""Matrix products: linear/addmm/mm with constant weights as a 1x1 CONV2D (bias fused, the form Ethos-U
runs best), everything else as TOSA MATMUL on rank-3 operands."""

from __future__ import annotations

import torch
from torch.fx import Node

from .. import layout
from ..builder import Op, tosa_dtype
from ..context import LoweringContext, Value
from ..registry import register_op
from .common import arg, is_constant_input
from .conv import acc_type

aten = torch.ops.aten


def _fc(ctx: LoweringContext, x: Value, weight_kn: torch.Tensor, bias: Value | None, out_shape, dtype) -> Value:
    """y[M,N] = x[M,K] @ W[K,N] + b as CONV2D on [M,1,1,K] with weight [N,1,1,K]."""
    m, k = x.shape
    n = weight_kn.shape[1]
    xt = ctx.b.reshape(ctx.tensor(x, layout.identity(2)), [m, 1, 1, k])
    xdt = xt.dtype
    w = ctx.constant(weight_kn.t().reshape(n, 1, 1, k))
    wdt = tosa_dtype(weight_kn.dtype)
    bias = bias if bias is not None else ctx.constant(torch.zeros(n, dtype=weight_kn.dtype))
    bias_t = ctx.tensor(ctx.reshape(bias, (n,)) if bias.rank != 1 else bias, None, xdt)
    zps = [ctx.b.zero_point(xdt), ctx.b.zero_point(wdt)]
    y = ctx.b.op(Op.CONV2D, [xt, ctx.tensor(w, None, wdt), bias_t, *zps], [m, 1, 1, n], xdt,
                 [0, 0, 0, 0], [1, 1], [1, 1], False, acc_type(xdt))
    return ctx.from_tensor(ctx.b.reshape(y, out_shape), out_shape, dtype)


def _matmul3(ctx: LoweringContext, a: Value, b: Value, out_shape, dtype) -> Value:
    """Batched product via MATMUL: both operands as [B, M, K] / [B, K, N] in PyTorch layout."""
    batch = tuple(out_shape[:-2])
    bsz = 1
    for d in batch:
        bsz *= d
    m, k = a.shape[-2], a.shape[-1]
    n = b.shape[-1]
    a3 = ctx.reshape(a, (int(torch.Size(a.shape[:-2]).numel()), m, k))
    b3 = ctx.reshape(b, (int(torch.Size(b.shape[:-2]).numel()), k, n))
    ta, tb = ctx.tensor(a3, layout.identity(3)), ctx.tensor(b3, layout.identity(3), tosa_dtype(dtype))
    if b3.shape[0] != bsz:  # broadcast a shared right operand over the batch
        tb = ctx.b.op(Op.TILE, [tb, ctx.b.shape_const([bsz, 1, 1])], [bsz, k, n], tb.dtype)
    if a3.shape[0] != bsz:
        ta = ctx.b.op(Op.TILE, [ta, ctx.b.shape_const([bsz, 1, 1])], [bsz, m, k], ta.dtype)
    zps = [ctx.b.zero_point(ta.dtype), ctx.b.zero_point(tb.dtype)]
    y = ctx.b.op(Op.MATMUL, [ta, tb, *zps], [bsz, m, n], acc_type(ta.dtype))
    return ctx.from_tensor(ctx.b.reshape(y, out_shape), out_shape, dtype)


def _matmul_support(node: Node, spec) -> str | None:
    a, b = (x.meta["val"] for x in node.args[:2])
    if a.dim() < 2 or b.dim() < 2:
        return "matrix-vector products (1-d operand) are not lowered"
    if a.dim() > 2 and b.dim() > 2 and tuple(a.shape[:-2]) != tuple(b.shape[:-2]):
        return "matmul with broadcast batch dimensions is not lowered"
    return None


@register_op("matmul", [aten.mm.default, aten.bmm.default, aten.matmul.default], support=_matmul_support)
def lower_matmul(ctx: LoweringContext, node: Node) -> Value:
    a, b = ctx.val(node.args[0]), ctx.val(node.args[1])
    shape, dtype = ctx.out_meta(node)
    if b.is_const and a.rank == 2 and b.rank == 2:
        return _fc(ctx, a, b.const, None, shape, dtype)
    return _matmul3(ctx, a, b, shape, dtype)


@register_op("addmm", [aten.addmm.default])
def lower_addmm(ctx: LoweringContext, node: Node) -> Value:
    bias, a, b = (ctx.val(x) for x in node.args[:3])
    beta, alpha = arg(node, 3, "beta", 1), node.kwargs.get("alpha", 1)
    shape, dtype = ctx.out_meta(node)
    if b.is_const and bias.is_const and bias.rank <= 1:
        return _fc(ctx, a, b.const * alpha, ctx.constant(bias.const * beta), shape, dtype)
    prod = _matmul3(ctx, a, b, shape, dtype)
    (tp, tbias), perm = ctx.broadcast([prod, bias], 2, tosa_dtype(dtype))
    return ctx.emit(Op.ADD, [tp, tbias], shape, dtype, perm)


def _linear_support(node: Node, spec) -> str | None:
    if not is_constant_input(node, 1):
        return "linear with a runtime weight is lowered through matmul after decomposition"
    return None


@register_op("linear", [aten.linear.default], support=_linear_support, preserve=True)
def lower_linear(ctx: LoweringContext, node: Node) -> Value:
    x, w = ctx.val(node.args[0]), ctx.val(node.args[1])
    bias = ctx.val(node.args[2]) if arg(node, 2, "bias") is not None else None
    shape, dtype = ctx.out_meta(node)
    x2 = ctx.reshape(x, (int(torch.Size(x.shape[:-1]).numel()), x.shape[-1]))
    y = _fc(ctx, x2, w.const.t(), bias, (x2.shape[0], w.shape[0]), dtype)
    return ctx.reshape(y, shape)


