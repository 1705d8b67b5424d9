"""Linear layers in the q/dq form of PT2E and torchao (ExecuTorch's documented Vulkan flow), after
to_edge: weights `dequantize_per_channel` (axis 0) or `dequantize_per_channel_group` of int8 constants
(symmetric: no or zero zero points), permuted into an mm/addmm; activations either float, or dynamically
quantized per token (`choose_qparams_per_token_asymmetric` -> `quantize_per_token` ->
`dequantize_per_token`, possibly through a view).

The mm rule asks `match_dq_linear` first: a match lowers to the integer kernels of ops/quantized.py
(dynamic activations: `quantize_rows` in its per-token asymmetric mode + `linear_qi`; float
activations: `linear_q`), the weights staying packed integers (never folded back to float). The
activation q/dq nodes dispatch nothing when every reader is such a linear (it reads their float input
and quantizes it itself); a dequantize_per_token read by anything else (another op, the CPU) computes
its values (`quantize_rows` + `dequantize_rows`).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch
from torch.fx import Node

from ..graph import U8, Tensor, numel
from ..registry import aten_key, register
from .quantized import (
    ACT_PER_TOKEN_ASYMMETRIC,
    GroupLayout,
    dispatch_integer_linear,
    pack_weights,
    quantize_activations,
    weight_bits,
)

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed
CHOOSE, QUANT, DEQUANT = (qd.choose_qparams_per_token_asymmetric.default, qd.quantize_per_token.default,
                          qd.dequantize_per_token.default)
DQ_CHANNEL, DQ_GROUP = qd.dequantize_per_channel.default, qd.dequantize_per_channel_group.default
MATMULS = (aten.mm.default, aten.addmm.default)
_PASS_THROUGH = (aten.view_copy.default, aten._unsafe_view.default, aten.view.default)


@dataclass
class DqLinear:
    """A matched linear: float input `x` (None: the mm's own float activations), integer weights."""

    x: Node | None
    qweight: Node
    scales: Node
    zero_points: Node | None
    group: int | None  # None: per channel


def _is(node, target) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and aten_key(node.target) == target


def _through_views(node: Node) -> Node:
    while any(_is(node, t) for t in _PASS_THROUGH):
        node = node.args[0]
    return node


def _dynamic_input(a: Node) -> Node | None:
    """x when `a` is dequantize_per_token(quantize_per_token(x, s, zp), s, zp) with int8 [-128, 127]
    and (s, zp) from choose_qparams_per_token_asymmetric(x) (through views), else None."""
    dq = _through_views(a)
    if not _is(dq, DEQUANT) or not _is(dq.args[0], QUANT):
        return None
    q = dq.args[0]
    x, s, zp = q.args[:3]
    if tuple(q.args[3:5]) != (-128, 127) or tuple(dq.args[3:5]) != (-128, 127) or tuple(dq.args[1:3]) != (s, zp):
        return None
    choose = s.args[0] if s.op == "call_function" else None
    if not _is(choose, CHOOSE) or zp.args[0] is not choose or choose.args[0] is not x:
        return None
    return x


def match_dq_linear(node: Node) -> DqLinear | None:
    """The q/dq linear behind an mm/addmm node, or None (then it is an ordinary float matmul)."""
    if not any(_is(node, t) for t in MATMULS):
        return None
    a, b = node.args[1:3] if _is(node, aten.addmm.default) else node.args[:2]
    if not _is(b, aten.permute_copy.default) or list(b.args[1]) != [1, 0]:
        return None
    dq = b.args[0]
    if _is(dq, DQ_CHANNEL) and dq.args[3] == 0:
        group = None
    elif _is(dq, DQ_GROUP):
        group = int(dq.args[6]) if len(dq.args) > 6 else int(dq.kwargs.get("group_size", 128))
    else:
        return None
    return DqLinear(_dynamic_input(a), dq.args[0], dq.args[1], dq.args[2], group)


def lower_dq_linear(ctx, node: Node, match: DqLinear) -> None:
    """The integer lowering of a matched linear (see the module docstring)."""
    q = ctx.const_value(match.qweight)
    s = ctx.const_value(match.scales)
    if q is None or s is None or q.dim() != 2 or q.dtype != torch.int8:
        raise ValueError("a q/dq linear needs constant int8 weights [N, K] and constant scales")
    zp = ctx.const_value(match.zero_points) if match.zero_points is not None else None
    if zp is not None and bool((zp != 0).any()):
        # The integer kernels take symmetric weights. Known only from the values (the partitioner may see
        # fake weights), so this lowers rather than fails: float weights, dequantized activations.
        return _lower_float(ctx, node, match)
    n_out, k = q.shape
    group = k if match.group is None else match.group
    if k % group or s.numel() != n_out * (k // group):
        raise ValueError(f"weight scales of {s.numel()} values do not fit [{n_out}, {k}] weights in groups of {group}")
    bias = None
    if _is(node, aten.addmm.default):
        bv = ctx.const_value(node.args[0])
        if bv is None or bv.dim() != 1 or node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
            raise ValueError("a q/dq linear's bias must be a constant vector (beta = alpha = 1)")
        bias = ctx.inp(node.args[0])
    y = ctx.out(node)
    if match.x is not None:
        x = ctx.inp(match.x)
        dispatch_integer_linear(ctx, x, q, s.reshape(n_out, -1), group, bias, y, ACT_PER_TOKEN_ASYMMETRIC)
        return
    x: Tensor = ctx.inp(node.args[1] if bias is not None else node.args[0])
    bits = weight_bits(q)
    w = ctx.g.constant(pack_weights(q, bits), U8)
    sc = ctx.g.constant(s.float().reshape(n_out, -1))
    ctx.dispatch("linear_q", [x, w, sc, bias if bias is not None else sc, y],
                 [numel(x.shape[:-1]), n_out, k, group, k // group, int(bias is not None), 0, bits], (n_out, numel(x.shape[:-1])))


def _lower_float(ctx, node: Node, match: DqLinear) -> None:
    """An asymmetric-weight q/dq linear as a float matmul: the weights folded to float (4 bytes each),
    dynamic activations quantized and dequantized on the GPU first."""
    from .matmul import dispatch_matmul, strides_2d

    addmm = _is(node, aten.addmm.default)
    a_arg, b_arg = node.args[1:3] if addmm else node.args[:2]
    x = dequantized_activations(ctx, ctx.inp(match.x)) if match.x is not None else ctx.inp(a_arg)
    w = ctx.g.constant(ctx.const_value(b_arg).float())  # [K, N]
    k = w.shape[0]
    bias = ctx.g.constant(ctx.const_value(node.args[0]).float()) if addmm else None
    y = ctx.out(node)
    a = ctx.g.alias(x, [numel(x.shape[:-1]), k])
    dispatch_matmul(ctx, a, w, y, k, strides_2d(a), strides_2d(w), [1, 1], bias)


def dequantized_activations(ctx, x: Tensor) -> Tensor:
    """quantize_per_token + dequantize_per_token of x on the GPU (`quantize_rows`, `dequantize_rows`)."""
    k = x.shape[-1]
    layout = GroupLayout(k, k)
    act = quantize_activations(ctx, x, layout, ACT_PER_TOKEN_ASYMMETRIC)
    y = ctx.g.new_tensor(x.shape)
    rows = numel(x.shape[:-1])
    ctx.dispatch("dequantize_rows", [act, y], [rows, k, layout.group, layout.group_pad, layout.words], (k, rows))
    return y


def _readers_are_dq_linears(node: Node) -> bool:
    """Whether every (transitive, through getitem/quantize/dequantize/views) reader of an activation
    q/dq node ends in a dynamic q/dq linear, which quantizes the float input itself."""
    for user in node.users:
        if any(_is(user, t) for t in MATMULS):
            m = match_dq_linear(user)
            if m is None or m.x is None:
                return False
            continue
        if user.op != "call_function" or not (
                user.target is operator.getitem or any(_is(user, t) for t in (QUANT, DEQUANT, *_PASS_THROUGH))):
            return False
        if not _readers_are_dq_linears(user):
            return False
    return True


def _act_support(node: Node) -> str | None:
    """Only the canonical chain choose_qparams_per_token_asymmetric(x) -> quantize_per_token ->
    dequantize_per_token (int8 [-128, 127]) of a float32 x: the scale, zero point and int8 values
    stay implicit (never delegate outputs); the dequantized float32 values are computed where read."""
    chain = ("not a per-token dynamic q/dq chain choose_qparams_per_token_asymmetric(x) -> quantize_per_token "
             "-> dequantize_per_token (int8 [-128, 127]) read whole by the Vulkan delegate")
    if _is(node, DEQUANT):
        x = _dynamic_input(node)
        if x is None:
            return chain
    else:
        x = node.args[0]
        readers = list(node.users) if _is(node, QUANT) else [r for g in node.users for r in g.users]
        if any(not _is(r, QUANT) and (not _is(r, DEQUANT) or _dynamic_input(r) is None) for r in readers):
            return chain
    dtype = x.meta["val"].dtype
    return None if dtype == torch.float32 else f"dtype {dtype} (the delegate quantizes float32 activations)"


@register("dq_activations", [CHOOSE, QUANT, DEQUANT], ["dequantize_rows"], support=_act_support)
def lower_dq_activations(ctx, node: Node) -> None:
    """choose_qparams and quantize_per_token dispatch nothing (the values stay implicit); a
    dequantize_per_token read only by q/dq linears neither (they quantize its float input themselves;
    that input is recorded as its value, so a view in between has a tensor to alias, never read as
    quantized); read by anything else, it computes its values."""
    if _is(node, CHOOSE):
        ctx.values[node] = [None, None]
        return
    x_node = node.args[0].args[0] if _is(node, DEQUANT) else node.args[0]
    x = ctx.inp(x_node)
    if not _is(node, DEQUANT) or _readers_are_dq_linears(node):
        ctx.values[node] = x
        return
    ctx.values[node] = dequantized_activations(ctx, x)
