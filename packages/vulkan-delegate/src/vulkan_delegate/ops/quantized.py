"""Quantized linear (from VulkanQuantizer).

Weight-only layers run shader `linear_q` (float activations, integer weights dequantized in registers),
or for up to GEMV_MAX_ROWS rows of 4-bit weights in 32-element groups (the decode step) `linear_q_gemv`
(with a following silu, or an add/mul of an earlier tensor of the same shape, in its epilogue, and the RMS
norm its activations come from folded in);
it reads the [N, K] integer weights flattened row-major, two's complement, packed into 32-bit words:
8-bit values four per word, 4-bit values two per byte (eight per word, element i in bits 4*(i % 8)..
of word i / 8, i.e. low nibble first). Weights whose values all fit in [-8, 7] (every 4-bit layer)
are packed as 4-bit, losslessly. Scales are per (row, group).

Layers with dynamic int8 activations run in integers (`dispatch_integer_linear`): `quantize_rows`
quantizes each activation row once into int8 packed four per word, and `linear_qi` (or, chosen by the
runtime where the device has VK_KHR_shader_integer_dot_product, its twin `linear_qi_dot`) sums exact
int32 dot products per group and applies the scales once per output and group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.fx import Node

from ..graph import F32, I32, U8, Tensor, numel
from ..lower import shape_of
from ..quantizer import linear_q  # noqa: F401  (registers the op)
from ..registry import aten_key, register
from .reduce import rms_norm_eps

OP = torch.ops.vulkan_delegate.linear_q.default
aten = torch.ops.aten

#: quantize_rows modes: symmetric per row ([-127, 127], VulkanQuantizer), asymmetric per row (torch's
#: choose_qparams_per_token_asymmetric + quantize_per_token, [-128, 127] with a zero point)
ACT_SYMMETRIC, ACT_PER_TOKEN_ASYMMETRIC = 0, 1


def _support(node: Node) -> str | None:
    x = node.args[0].meta["val"]
    if x.dtype != torch.float32:
        return f"dtype {x.dtype}"
    return None


#: activation rows up to which 4-bit weight-only layers run `linear_q_gemv` (each row streams the weights)
GEMV_MAX_ROWS = 8


@register("linear_q", [OP], ["linear_q", "linear_q_gemv", "linear_q_gemv_words", "quantize_rows", "linear_qi",
                             "linear_qi_dot"],
          support=_support)
def lower_linear_q(ctx, node: Node) -> None:
    x_arg, q_arg, s_arg, b_arg, group, dyn = node.args
    q = ctx.const_value(q_arg)
    s = ctx.const_value(s_arg)
    if q is None or s is None:
        raise ValueError("linear_q weights must be constants")
    x = ctx.inp(x_arg)
    bias = ctx.inp(b_arg) if b_arg is not None else None
    rows = numel(x.shape[:-1])
    bits = weight_bits(q)
    n_out, k = q.shape
    gemv = not dyn and uses_gemv(rows, k, int(group), bits)
    last, epilogue, other = gemv_epilogue(ctx, node) if gemv else (node, EP_NONE, None)
    y = ctx.out(last, shape_of(node))
    if dyn:
        dispatch_integer_linear(ctx, x, q, s, int(group), bias, y, ACT_SYMMETRIC)
        return
    w = ctx.g.constant(pack_weights(q, bits), U8)
    sc = ctx.g.constant(s.float())
    push = [rows, n_out, k, int(group), int(k // group), int(bias is not None), 0, bits]
    if gemv:
        norm = folded_rms_norm(ctx, x_arg, k)
        if norm is not None:
            x = norm.x
            push[6] = NORM_GAIN if norm.gain is not None else NORM_PLAIN
        ctx.dispatch("linear_q_gemv_words" if gemv_words(n_out, k) else "linear_q_gemv",
                     [x, w, sc, bias if bias is not None else sc,
                      other if other is not None else sc,
                      norm.gain if norm is not None and norm.gain is not None else sc, y],
                     [*push, epilogue, float(norm.eps) if norm is not None else 0.0],
                     (-(-n_out // 8) * 128, rows))
        return
    ctx.dispatch("linear_q", [x, w, sc, bias if bias is not None else sc, y], push, (n_out, rows))


#: linear_q_gemv's folded RMS norm (push word 6): none, without a gain, with a gain
NORM_NONE, NORM_PLAIN, NORM_GAIN = 0, 1, 2


@dataclass(frozen=True)
class FoldedNorm:
    """An RMS norm a `linear_q_gemv` computes itself from the norm's input: x, its gain (None: no
    weight) and eps."""

    x: Tensor
    gain: Tensor | None
    eps: float


def folded_rms_norm(ctx, x_arg, k: int) -> FoldedNorm | None:
    """The RMS norm over the last dim (K wide) that produced the activations, folded into the GEMV:
    `linear_q_gemv` stages the whole row anyway, so it sums its squares there and scales the dot product by
    1 / rms (the decode step's norm_row, 34 us per 4096-wide row on the H100, was a third of the GEMVs'
    time). The norm's own dispatch is pruned once no other op reads its output."""
    if not isinstance(x_arg, Node) or x_arg.op != "call_function" or aten_key(x_arg.target) != aten.rms_norm.default:
        return None
    if not isinstance(ctx.values.get(x_arg), Tensor) or list(x_arg.args[1]) != [k]:
        return None
    src = ctx.values.get(x_arg.args[0])
    if not isinstance(src, Tensor) or src.dtype != ctx.g.compute_dtype or shape_of(x_arg.args[0]) != shape_of(x_arg):
        return None
    w_arg = x_arg.args[2] if len(x_arg.args) > 2 else None
    gain = ctx.inp(w_arg) if w_arg is not None else None
    if gain is not None and (gain.dtype != ctx.g.compute_dtype or numel(gain.shape) != k):
        return None
    return FoldedNorm(src, gain, rms_norm_eps(x_arg))


#: linear_q_gemv's epilogues (push word 8): none, + other (a residual add), * other (SwiGLU's product), silu
EP_NONE, EP_ADD, EP_MUL, EP_SILU = 0, 1, 2, 3


def gemv_epilogue(ctx, node: Node) -> tuple[Node, int, Tensor | None]:
    """The elementwise op folded into a `linear_q_gemv` (its only user; marked fused): silu, or an add /
    mul whose other operand is computed earlier, has the output's shape and dtype (no broadcast) and is
    a float tensor. Returns (the node whose value the dispatch writes, EP_*, the other operand)."""
    users = list(node.users)
    if len(users) != 1 or users[0].op != "call_function":
        return node, EP_NONE, None
    user = users[0]
    key = aten_key(user.target)
    if key == aten.silu.default and user.args[0] is node and len(user.args) == 1:
        ctx.fused.add(user)
        return user, EP_SILU, None
    if key not in (aten.add.Tensor, aten.mul.Tensor) or len(user.args) != 2 or user.kwargs:
        return node, EP_NONE, None
    a, b = user.args
    if a is b:
        return node, EP_NONE, None
    other = b if a is node else a
    t = ctx.values.get(other) if isinstance(other, Node) else None
    if (not isinstance(t, Tensor) or t.dtype != ctx.g.compute_dtype
            or list(t.shape) != shape_of(node) or shape_of(user) != shape_of(node)):
        return node, EP_NONE, None
    ctx.fused.add(user)
    return user, EP_ADD if key == aten.add.Tensor else EP_MUL, t


def uses_gemv(rows, k: int, group: int, bits: int) -> bool:
    """`linear_q_gemv` (decode: bound by the weight bytes, 128-bit weight loads, split-K per workgroup)
    for 4-bit weights whose groups are whole 32-element chunks and a static row count up to
    GEMV_MAX_ROWS; `linear_q` (one thread per output) otherwise."""
    return bits == 4 and isinstance(rows, int) and rows <= GEMV_MAX_ROWS and k % 32 == 0 and group % 32 == 0


#: `linear_q_gemv_words` (one 32-bit word per lane and step, subgroup sums; the runtime runs `linear_q_gemv`
#: where the device lacks subgroup arithmetic) instead of `linear_q_gemv` (128-bit chunks) for at least
#: GEMV_WORDS_MIN_N outputs with K at most GEMV_WORDS_MAX_K. On the H100 (bench/results/gpu/README.md, 17:36)
#: it won there (8192 x 2048 in the Llama-3.2-1B-shaped decode: 12.5 against 17.2 us; a 128256 x 2048 head
#: alone: 100 against 160 us) and lost with fewer workgroups or longer K (2048 x 2048: 10.2 / 7.9 us,
#: 2048 x 8192: 22.8 / 13.6 us); K = 4096 was not measured
GEMV_WORDS_MIN_N, GEMV_WORDS_MAX_K = 8192, 2048


def gemv_words(n_out: int, k: int) -> bool:
    """Whether a 4-bit GEMV takes `linear_q_gemv_words` (see GEMV_WORDS_MIN_N)."""
    return n_out >= GEMV_WORDS_MIN_N and k <= GEMV_WORDS_MAX_K


def weight_bits(q: torch.Tensor) -> int:
    """4 when every value fits a signed nibble (stored two per byte), else 8."""
    return 4 if int(q.min()) >= -8 and int(q.max()) <= 7 else 8


@dataclass(frozen=True)
class GroupLayout:
    """K laid out group by group, each group padded with zeros to whole 4-element words, the row to
    whole 8-element words (4-bit weights): a group's dot product is a whole number of words."""

    k: int
    group: int

    @property
    def groups(self) -> int:
        return self.k // self.group

    @property
    def group_pad(self) -> int:
        return -(-self.group // 4) * 4

    @property
    def words(self) -> int:
        """32-bit words of int8 activations per row (the padded K / 4)."""
        return -(-self.groups * self.group_pad // 8) * 2


def quantize_activations(ctx, x: Tensor, layout: GroupLayout, act_mode: int) -> Tensor:
    """`quantize_rows`: each row of x as [scale, zero point, layout.words words of int8x4]."""
    rows = numel(x.shape[:-1])
    act = ctx.g.new_tensor([rows, layout.words + 2], I32)
    ctx.dispatch("quantize_rows", [x, act], [rows, layout.k, layout.group, layout.group_pad, act_mode, layout.words],
                 (64, rows))
    return act


def dispatch_integer_linear(ctx, x: Tensor, q: torch.Tensor, scales: torch.Tensor, group: int,
                            bias: Tensor | None, y: Tensor, act_mode: int) -> None:
    """y = dequant(quantize_rows(x)) @ (q * scales).T (+ bias), as integer dot products.

    q: integer weights [N, K] (symmetric, no zero point); scales [N, K // group]; `act_mode` one of
    ACT_*; K in the GroupLayout.
    """
    n_out, k = q.shape
    if k % group:
        raise ValueError(f"group size {group} does not divide K={k}")
    layout = GroupLayout(k, group)
    groups, group_pad = layout.groups, layout.group_pad
    laid = torch.zeros(n_out, layout.words * 4, dtype=torch.int8)
    laid[:, :groups * group_pad] = torch.nn.functional.pad(
        q.to(torch.int8).reshape(n_out, groups, group), (0, group_pad - group)).reshape(n_out, -1)
    bits = weight_bits(q)
    w = ctx.g.constant(pack_weights(laid, bits), U8)
    ws = ctx.g.constant(scales.float().reshape(n_out, groups), F32)
    wsum = ctx.g.constant(q.to(torch.int32).reshape(n_out, groups, group).sum(-1), I32)
    act = quantize_activations(ctx, x, layout, act_mode)
    rows = numel(x.shape[:-1])
    ctx.dispatch("linear_qi", [act, w, ws, wsum, bias if bias is not None else ws, y],
                 [rows, n_out, layout.words, group_pad // 4, groups, int(bias is not None), bits,
                  int(act_mode != ACT_SYMMETRIC)], (n_out, rows))


def pack_weights(q: torch.Tensor, bits: int) -> np.ndarray:
    """Integer weights [N, K] as the bytes `linear_q` reads (see the module docstring), whole words."""
    flat = q.to(torch.int8).numpy().reshape(-1)
    if bits == 4:
        nib = (flat.astype(np.uint8) & 0x0F)
        nib = np.concatenate([nib, np.zeros(len(nib) % 2, np.uint8)])
        flat = nib[0::2] | (nib[1::2] << 4)
    packed = flat.view(np.uint8)
    return np.concatenate([packed, np.zeros((-len(packed)) % 4, np.uint8)])
