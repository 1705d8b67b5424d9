"""Matrix products: mm, bmm, addmm, linear, matmul (shader `matmul`: C = alpha * A @ B + bias, then clamp;
`matmul_gemv` where A is one row).

A and B are read through strides, so transposes of activations cost no copy; weights are folded
(transposed, contiguous) at compile time. A following relu/clamp is folded into the dispatch.
"""

from __future__ import annotations

import torch
from torch.fx import Node

from ..graph import Tensor, contiguous_strides, numel
from ..lower import shape_of
from ..opcodes import opcode
from ..registry import aten_key, float_tensors, register
from .conv import gemm_variant, only_user
from .elementwise import CLAMPS, INF, clamp_bounds
from .quantized_pt2e import lower_dq_linear, match_dq_linear

aten = torch.ops.aten

#: an fp16 matmul on the 16x16 `small` tile whose output gives at most this many workgroups names the
#: `f16smallsplit` variant: the same tile, but on tensor cores (`f16smallsplitcoop`) each workgroup's 8
#: subgroups split K. On the H100 (bench/results/gpu, 17:30 run) the Llama block's 128 x 256 GEMMs (128
#: workgroups) went 10.2 -> 7.8 us (K 256) and 22.7 -> 14.6 us (K 688); at 344 workgroups (128 x 688,
#: K 256) 13.6 -> 16.0 us and at 399 (100 x 900, K 700) 37.6 -> 45.9 us, so those keep the `small` tile.
SPLIT_MAX_GROUPS = 160


def dispatch_matmul(ctx, a: Tensor, b: Tensor, y: Tensor, k, a_strides: list, b_strides: list,
                    batch: list, bias: Tensor | None = None, alpha: float = 1.0, act=(-INF, INF)) -> None:
    """y[b0, b1, m, n] = alpha * sum_k a[.., m, k] * b[.., k, n] (+ bias[n]), clamped to `act`.

    `a_strides` = (s_b0, s_b1, s_m, s_k), `b_strides` = (s_b0, s_b1, s_k, s_n); `batch` = (b0, b1).
    """
    m, n = y.shape[-2], y.shape[-1]
    push = [m, n, k, batch[1], *a_strides, *b_strides, int(bias is not None), float(alpha), float(act[0]),
            float(act[1])]
    bindings = [a, b, bias if bias is not None else b, y]
    # one row: matmul_gemv (4 outputs per workgroup; past 65535 workgroups along N the runtime splits the
    # dispatch with a base workgroup, which the kernel's gl_WorkGroupID includes)
    if m == 1 and isinstance(n, int):
        ctx.dispatch("matmul_gemv", bindings, push, (n, 1, batch[0] * batch[1]))
        return
    variant = gemm_variant(ctx.sfx, m, n, batch[0] * batch[1], k, big=True)
    if variant == "f16small" and -(-m // 16) * -(-n // 16) * batch[0] * batch[1] <= SPLIT_MAX_GROUPS:
        variant = "f16smallsplit"
    ctx.dispatch("matmul", bindings, push, (n, m, batch[0] * batch[1]), variant)


def strides_2d(t: Tensor, transpose: bool = False) -> list:
    """(b0, b1, row, col) element strides of a contiguous rank-2..4 tensor read as [.., rows, cols]."""
    s = contiguous_strides(t.shape)
    batch = [0] * (4 - len(s)) + s[:-2] if len(s) > 2 else [0, 0]
    batch = batch[-2:]
    row, col = s[-2], s[-1]
    return [*batch, col, row] if transpose else [*batch, row, col]


def _fold_act(ctx, node: Node):
    act = only_user(node, CLAMPS)
    if act is None:
        return node, (-INF, INF)
    ctx.fused.add(act)
    return act, clamp_bounds(act)


def _mm_support(node: Node) -> str | None:
    for a in node.all_input_nodes:
        v = a.meta["val"]
        if v.dim() > 4:
            return f"matmul operand of rank {v.dim()} > 4"
    return float_tensors(node)


@register("mm", [aten.mm.default, aten.addmm.default, aten.bmm.default],
          ["matmul", "matmul_gemv"], support=_mm_support)
def lower_mm(ctx, node: Node) -> None:
    if (dq_linear := match_dq_linear(node)) is not None:  # PT2E q/dq weights: kept integer
        return lower_dq_linear(ctx, node, dq_linear)
    t = aten_key(node.target)
    bias_arg, beta, alpha = None, 1.0, 1.0
    if t == aten.addmm.default:
        bias_arg, a_arg, b_arg = node.args[:3]
        beta, alpha = float(node.kwargs.get("beta", 1.0)), float(node.kwargs.get("alpha", 1.0))
        transpose_b = False
    else:
        a_arg, b_arg = node.args[:2]
        transpose_b = False
    a = ctx.inp(a_arg)
    wv = ctx.const_value(b_arg)
    if wv is not None:  # weights: stored [K, N] contiguous
        b = ctx.g.constant((wv.t() if transpose_b else wv).float())
        transpose_b = False
    else:
        b = ctx.inp(b_arg)
    bias = None
    if bias_arg is not None:
        bv = ctx.const_value(bias_arg)
        if bv is not None and bv.dim() <= 1:
            bias = ctx.g.constant((bv * beta).float().reshape(-1).expand(b.shape[-2] if transpose_b else b.shape[-1]))
    last, act = _fold_act(ctx, node) if bias_arg is None or bias is not None else (node, (-INF, INF))
    y = ctx.out(last, shape_of(node))
    if last is not node:
        ctx.values[node] = y
    rank = len(y.shape)
    batch = ([1, 1] + list(y.shape[:-2]))[-2:] if rank > 2 else [1, 1]
    a_s = strides_2d(a)
    b_s = strides_2d(b, transpose=transpose_b)
    if len(a.shape) < rank:
        a_s[0:2] = [0, 0]
    if len(b.shape) < rank:
        b_s[0:2] = [0, 0]
    dispatch_matmul(ctx, a, b, y, a.shape[-1], a_s, b_s, batch, bias, alpha, act)
    if bias_arg is not None and bias is None:  # a computed bias: added with broadcast afterwards
        from .elementwise import broadcast_strides

        c = ctx.inp(bias_arg)
        z = ctx.g.new_tensor(y.shape)
        sizes = [1] * (6 - rank) + list(y.shape)
        n = numel(y.shape)
        ctx.dispatch("binary", [y, c, z], [opcode("binary", "add"), n, *sizes, *broadcast_strides(y.shape, y.shape),
                                           *broadcast_strides(c.shape, y.shape), beta], (n,))
        ctx.values[node] = z
