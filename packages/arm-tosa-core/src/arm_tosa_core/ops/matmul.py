"""Matrix products: linear/addmm/mm with constant weights as a 1x1 CONV2D (bias fused, the form Ethos-U
runs best), everything else as TOSA MATMUL on rank-3 operands.

An int16 product's INT48 accumulator continues as int32 (`_int48_to_int32`), so its output RESCALE has a
32-bit multiplier, except under the builder's `int16_fc_rescale16` (Ethos-U85): there an int16 product with
constant weights RESCALEs its accumulator straight to its output's type with a 16-bit multiplier, as
convolutions do (`int16_output_target`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch.fx import Node

from .. import layout
from ..builder import DType, Op, tosa_dtype
from ..context import LoweringContext, Value
from ..helpers.common import arg, is_constant_input
from ..helpers.intmath import (
    acc_type,
    accumulator_value,
    bias_for_accumulator,
    rescale,
    weight_type,
)
from ..helpers.qparams import QParams, is_quantize, qparams_of
from ..registry import Quant, register_int_rule, register_op

aten = torch.ops.aten


def _fc(ctx: LoweringContext, x: Value, weight_kn: torch.Tensor, bias: Value | None, out_shape, dtype,
        w_value: Value | None = None, out_rescale: OutputRescale | None = None) -> tuple[Value, int]:
    """y[M,N] = x[M,K] @ W[K,N] + b as CONV2D on [M,1,1,K] with weight [N,1,1,K].

    With an int8 (int16) input the result is the int32 accumulator (bias int32 (int48), input zero point
    applied). `w_value`: the weight's Value, whose qparams
    may make it INT4 (`weight_type`). Returns the product and the accumulator units in one of its int32
    units (`_int48_to_int32`: 1 but for a large int16 product). With `out_rescale` an INT48 accumulator
    goes straight to the node's output codes instead (`int16_output_target`)."""
    m, k = x.shape
    n = weight_kn.shape[1]
    xt = ctx.b.reshape(ctx.tensor(x, layout.identity(2)), [m, 1, 1, k])
    xdt = xt.dtype
    w = ctx.constant(weight_kn.t().reshape(n, 1, 1, k))
    wdt = weight_type(ctx, w_value, xdt) if w_value is not None else tosa_dtype(weight_kn.dtype)
    out_dt = acc_type(xdt) if xdt in (DType.INT8, DType.INT16) else xdt
    bias_dt = DType.INT48 if xdt == DType.INT16 else out_dt
    bias = bias if bias is not None else ctx.constant(torch.zeros(n, dtype=torch.int32 if out_dt != xdt
                                                                  else weight_kn.dtype))
    bias_t = ctx.tensor(ctx.reshape(bias, (n,)) if bias.rank != 1 else bias, None, bias_dt)
    in_zp = x.qparams.zero_point if x.qparams is not None else 0
    zps = [ctx.b.zero_point(xdt, in_zp), ctx.b.zero_point(wdt)]
    y = ctx.b.op(Op.CONV2D, [xt, ctx.tensor(w, None, wdt), bias_t, *zps], [m, 1, 1, n], out_dt,
                 [0, 0, 0, 0], [1, 1], [1, 1], False, acc_type(xdt))
    unit = 1
    if y.dtype == DType.INT48 and out_rescale is not None:
        y, out_dt = out_rescale(y)
        return ctx.from_tensor(ctx.b.reshape(y, out_shape), out_shape, out_dt), unit
    if y.dtype == DType.INT48:  # |acc| <= sum_k |w_kn| * max|x - zp| + |b_n| over the output features n
        bias_max = int(bias.const.double().abs().max().ceil()) if bias.is_const and bias.const.numel() else 2**31
        y, unit = _int48_to_int32(ctx, y, int(weight_kn.long().abs().sum(0).max()) * _code_span(x) + bias_max)
    return ctx.from_tensor(ctx.b.reshape(y, out_shape), out_shape,
                           torch.int32 if out_dt != xdt else dtype), unit


def _code_span(v: Value) -> int:
    """The largest |code - zero point| of a quantized operand: its constant's, else its type's range."""
    q = v.qparams
    if v.is_const:
        return int((v.const.long() - q.zero_point).abs().max())
    return max(q.qmax - q.zero_point, q.zero_point - q.qmin)


def _int48_to_int32(ctx: LoweringContext, y, bound: int):
    """An int16 product's INT48 accumulator (|acc| <= `bound`) as int32, and how many accumulator units
    one int32 unit is. The reshape after a product cannot take INT48 on Ethos-U (vela runs INT48 only
    fused into the RESCALE after a CONV2D/MATMUL), so the accumulator continues as int8's does.

    RESCALE x 1 (exact) where `bound` fits int32, else x 2^-k with the smallest k that fits (one rounding
    of k bits, far below the output's LSB): TOSA requires a RESCALE's result within int32, so x 1 of a
    larger accumulator is UNPREDICTABLE (the reference model refuses it: "scaled result exceeds int32
    numeric range"; hardware may wrap or saturate). An int16 x int16 MATMUL reaches that with K = 2
    full-range products (2^30 each): transformers' Llama a16w8 attention did."""
    k = 0
    while (bound + ((1 << k) >> 1)) >> k > _INT32_MAX:
        k += 1
    return rescale(ctx.b, y, 2.0 ** -k, 0, 0, DType.INT32), 1 << k


_INT32_MAX = 2**31 - 1

#: an INT48 accumulator -> (the node's output codes, their torch dtype)
OutputRescale = Callable[[object], tuple[object, torch.dtype]]


def int16_output_target(node: Node) -> QParams | None:
    """The qparams an int16 product's accumulator is RESCALEd to directly under `int16_fc_rescale16`:
    its one user's, a quantize node (None otherwise: an activation fused after it, several users).

    Why a target option: regor (vela 5.2, Ethos-U85) fuses a fully connected layer's INT48 -> int32 ->
    output RESCALEs into the convolution's 48-bit scale records, which hold a 15-bit multiplier, and
    writes the low 15 bits of a 32-bit one (0x75D3A25F became 0x225F: every output near 0). A 16-bit
    multiplier (15 significant bits, TOSA's INT48 RESCALE form) is stored exactly. It rounds the scale
    to 15 bits, at most 1 output LSB from the 32-bit form, which TOSA INT and VGF keep."""
    users = list(node.users)
    if len(users) != 1 or not is_quantize(users[0]):
        return None
    return qparams_of(users[0])


def _int16_output_rescale(ctx: LoweringContext, node: Node, x: Value, acc_scale) -> OutputRescale | None:
    """`int16_output_target`'s RESCALE of the accumulator (real value `acc_scale` per unit, per output
    feature along the last axis), when the builder asks for it and `x` is int16."""
    target = int16_output_target(node) if ctx.b.int16_fc_rescale16 else None
    if target is None or x.qparams is None or x.qparams.dtype != torch.int16:
        return None
    scale = np.asarray(acc_scale, dtype=np.float64) / float(target.scale)
    return lambda acc: (rescale(ctx.b, acc, scale, 0, target.zero_point, tosa_dtype(target.dtype)), target.dtype)


def _matmul3(ctx: LoweringContext, a: Value, b: Value, out_shape, dtype,
             out_rescale: OutputRescale | None = None) -> tuple[Value, int]:
    """Batched product via MATMUL: both operands as [B, M, K] / [B, K, N] in PyTorch layout. Returns the
    product and the accumulator units in one of its int32 units (`_int48_to_int32`; 1 but for int16), or
    with `out_rescale` an INT48 accumulator as the node's output codes."""
    batch = tuple(out_shape[:-2])
    bsz = 1
    for d in batch:
        bsz *= d
    m, k = a.shape[-2], a.shape[-1]
    n = b.shape[-1]
    a3 = ctx.reshape(a, (int(torch.Size(a.shape[:-2]).numel()), m, k))
    b3 = ctx.reshape(b, (int(torch.Size(b.shape[:-2]).numel()), k, n))
    ta = ctx.tensor(a3, layout.identity(3))
    tb = ctx.tensor(b3, layout.identity(3), None if not b3.is_const else ta.dtype)
    if b3.shape[0] != bsz:  # broadcast a shared right operand over the batch
        tb = ctx.b.op(Op.TILE, [tb, ctx.b.shape_const([bsz, 1, 1])], [bsz, k, n], tb.dtype)
    if a3.shape[0] != bsz:
        ta = ctx.b.op(Op.TILE, [ta, ctx.b.shape_const([bsz, 1, 1])], [bsz, m, k], ta.dtype)
    zps = [ctx.b.zero_point(ta.dtype, a.qparams.zero_point if a.qparams else 0),
           ctx.b.zero_point(tb.dtype, b.qparams.zero_point if b.qparams else 0)]
    y = ctx.b.op(Op.MATMUL, [ta, tb, *zps], [bsz, m, n], acc_type(ta.dtype))
    if ta.dtype == DType.FP16:  # fp32 accumulator rounded once to fp16, as torch's fp16 matmul does
        y = ctx.b.op(Op.CAST, [y], y.shape, DType.FP16)
    quantized = y.dtype != ta.dtype
    unit = 1
    if y.dtype == DType.INT48 and out_rescale is not None:
        y, out_dt = out_rescale(y)
        return ctx.from_tensor(ctx.b.reshape(y, out_shape), out_shape, out_dt), unit
    if y.dtype == DType.INT48:
        y, unit = _int48_to_int32(ctx, y, k * _code_span(a) * _code_span(b))
    return ctx.from_tensor(ctx.b.reshape(y, out_shape), out_shape, torch.int32 if quantized else dtype), unit


def _matmul_support(node: Node, spec) -> str | None:
    a, b = (x.meta["val"] for x in node.args[:2])
    if a.dim() < 2 or b.dim() < 2:
        return "matrix-vector products (1-d operand) are not lowered"
    if a.dim() > 2 and b.dim() > 2 and tuple(a.shape[:-2]) != tuple(b.shape[:-2]):
        return "matmul with broadcast batch dimensions is not lowered"
    return None


@register_op("matmul", [aten.mm.default, aten.bmm.default, aten.matmul.default], support=_matmul_support,
             quant=Quant.BINARY)
def lower_matmul(ctx: LoweringContext, node: Node) -> Value:
    a, b = ctx.val(node.args[0]), ctx.val(node.args[1])
    shape, dtype = ctx.out_meta(node)
    if b.is_const and a.rank == 2 and b.rank == 2:
        return _fc(ctx, a, b.const, None, shape, dtype)[0]
    return _matmul3(ctx, a, b, shape, dtype)[0]


@register_op("addmm", [aten.addmm.default])
def lower_addmm(ctx: LoweringContext, node: Node) -> Value:
    bias, a, b = (ctx.val(x) for x in node.args[:3])
    beta, alpha = arg(node, 3, "beta", 1), node.kwargs.get("alpha", 1)
    shape, dtype = ctx.out_meta(node)
    if b.is_const and bias.is_const and bias.rank <= 1:
        return _fc(ctx, a, b.const * alpha, ctx.constant(bias.const * beta), shape, dtype)[0]
    prod = _matmul3(ctx, a, b, shape, dtype)[0]
    # beta * bias + alpha * (a @ b): the factors fold into constants, else one MUL each
    prod, bias = _times(ctx, prod, alpha), _times(ctx, bias, beta)
    (tp, tbias), perm = ctx.broadcast([prod, bias], 2, tosa_dtype(dtype))
    return ctx.emit(Op.ADD, [tp, tbias], shape, dtype, perm)


def _times(ctx: LoweringContext, v: Value, factor) -> Value:
    if factor == 1:
        return v
    if v.is_const:
        return ctx.constant(v.const * factor)
    scale = ctx.scalar(factor, v.tensor.dtype, v.rank)
    shift = ctx.b.const(np.zeros([1], dtype=np.int8), DType.INT8)
    return ctx.from_tensor(ctx.b.op(Op.MUL, [v.tensor, scale, shift], v.tensor.shape, v.tensor.dtype),
                           v.shape, v.dtype, v.perm)


def _linear_support(node: Node, spec) -> str | None:
    if not is_constant_input(node, 1):
        return "linear with a runtime weight is lowered through matmul after decomposition"
    return None


@register_op("linear", [aten.linear.default], support=_linear_support, preserve=True, quant=Quant.WEIGHTED,
             int16=True, int16_fuses_activation=False)
def lower_linear(ctx: LoweringContext, node: Node) -> Value:
    return _linear(ctx, node)[0]


def _linear(ctx: LoweringContext, node: Node, bias: Value | None = None,
            out_rescale: OutputRescale | None = None) -> tuple[Value, int]:
    x, w = ctx.val(node.args[0]), ctx.val(node.args[1])
    if bias is None:
        bias = ctx.val(node.args[2]) if arg(node, 2, "bias") is not None else None
    shape, dtype = ctx.out_meta(node)
    x2 = ctx.reshape(x, (int(torch.Size(x.shape[:-1]).numel()), x.shape[-1]))
    y, unit = _fc(ctx, x2, w.const.t(), bias, (x2.shape[0], w.shape[0]), dtype, w, out_rescale)
    return ctx.reshape(y, shape), unit




@register_int_rule("linear")
def lower_linear_int(ctx: LoweringContext, node: Node) -> Value:
    """int8 linear -> int32 accumulator, scale in_scale * weight_scale per output feature."""
    x, w = ctx.val(node.args[0]), ctx.val(node.args[1])
    if x.qparams is None or w.qparams is None:
        raise ValueError("quantized linear needs a quantized input and weight")
    scale = float(x.qparams.scale) * np.asarray(w.qparams.scale, dtype=np.float64)
    out_rescale = _int16_output_rescale(ctx, node, x, scale)
    acc, unit = _linear(ctx, node, bias_for_accumulator(ctx, arg(node, 2, "bias"), scale), out_rescale)
    if out_rescale is not None:
        acc.qparams = int16_output_target(node)
        return acc
    return accumulator_value(acc.shape, torch.int32, acc.tensor, acc.perm, scale * unit, axis=len(acc.shape) - 1)


@register_int_rule("matmul")
def lower_matmul_int(ctx: LoweringContext, node: Node) -> Value:
    """int8 @ int8 -> int32 accumulator with scale a_scale * b_scale."""
    a, b = ctx.val(node.args[0]), ctx.val(node.args[1])
    shape, _ = ctx.out_meta(node)
    scale = float(a.qparams.scale) * float(b.qparams.scale)
    out_rescale = _int16_output_rescale(ctx, node, a, scale) if b.is_const else None
    acc, unit = _matmul3(ctx, a, b, shape, torch.int32, out_rescale)
    if out_rescale is not None:
        acc.qparams = int16_output_target(node)
        return acc
    return accumulator_value(acc.shape, torch.int32, acc.tensor, acc.perm, scale * unit)
