"""Scaled dot-product attention, kept whole by exir: scores = scale * q @ k^T (shader `matmul`),
softmax with an optional causal mask (shader `softmax`), out = p @ v (shader `matmul`)."""

from __future__ import annotations

import math

import torch
from torch.fx import Node

from ..graph import contiguous_strides
from ..registry import float_tensors, register
from .matmul import dispatch_matmul
from .reduce import softmax

aten = torch.ops.aten
SDPA = aten.scaled_dot_product_attention.default


def _sdpa_support(node: Node) -> str | None:
    q, k, v = (a.meta["val"] for a in node.args[:3])
    a = list(node.args) + [None] * 4
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return "attention on tensors not of rank 4 (batch, heads, tokens, dim)"
    if a[3] is not None:
        return "attention with an explicit mask"
    if a[4]:
        return "attention with dropout"
    if node.kwargs.get("enable_gqa") or q.shape[1] != k.shape[1]:
        return "grouped-query attention inside SDPA (repeat the KV heads before it)"
    return float_tensors(node)


@register("sdpa", [SDPA], ["matmul", "softmax"], support=_sdpa_support, preserve=[SDPA])
def lower_sdpa(ctx, node: Node) -> None:
    q, k, v = (ctx.inp(a) for a in node.args[:3])
    a = list(node.args) + [None] * 4
    causal = bool(a[5] if len(node.args) > 5 else node.kwargs.get("is_causal", False))
    scale = node.kwargs.get("scale")
    b, h, s, d = q.shape
    kv = k.shape[2]
    scale = float(scale) if scale is not None else 1.0 / math.sqrt(d)
    scores = ctx.g.new_tensor([b, h, s, kv])
    qs, ks = contiguous_strides(q.shape), contiguous_strides(k.shape)
    dispatch_matmul(ctx, q, k, scores, d, [qs[0], qs[1], qs[2], qs[3]], [ks[0], ks[1], ks[3], ks[2]],
                    [b, h], alpha=scale)
    probs = ctx.g.new_tensor([b, h, s, kv])
    softmax(ctx, scores, probs, 3, causal_q=s if causal else None)
    y = ctx.out(node)
    ps, vs = contiguous_strides(probs.shape), contiguous_strides(v.shape)
    dispatch_matmul(ctx, probs, v, y, kv, [ps[0], ps[1], ps[2], ps[3]], [vs[0], vs[1], vs[2], vs[3]], [b, h])

