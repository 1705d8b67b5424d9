"""Scaled dot-product attention, kept whole by exir: scores = scale * q @ k^T (shader `matmul`), an
optional mask (additive float: shader `binary`; boolean: shader `mask_bool`, or folded into an additive
constant when the mask is a weight), softmax with an optional causal mask (shader `softmax`),
out = p @ v (shader `matmul`). With at least FLASH_MIN_KV keys (static sizes, head dim <= 256), one fused
dispatch instead (shader `attention_flash`: online softmax over key tiles, no score matrix);
VKDG_FLASH_ATTN=0 at lowering keeps the unfused path. Up to DECODE_MAX_Q query rows over at most
DECODE_MAX_KV keys (the decode step), one dispatch of shader `attention_decode` (a workgroup per query row,
the scores in shared memory) before either; VKDG_DECODE_ATTN=0 at lowering leaves it out.

Grouped-query attention (enable_gqa, q heads = g x kv heads) costs no copy: q [b, h, s, d] is read as
[b, h_kv, g * s, d] (the g query heads sharing a kv head are adjacent rows), so the matmuls batch
over kv heads and scores come out as [b, h, s, kv] in memory. KV heads repeat_interleave'd before
the attention (the pattern `repeated_kv` matches) are read the same way, without their copies.
"""

from __future__ import annotations

import math
import os

import torch
from torch.fx import Node

from ..graph import I32, U8, contiguous_strides, numel
from ..opcodes import opcode
from ..registry import register
from .elementwise import broadcast_strides
from .matmul import dispatch_matmul
from .reduce import ROW_LANES, softmax

aten = torch.ops.aten
SDPA = aten.scaled_dot_product_attention.default
_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal")
#: "0" at lowering: every attention takes the unfused matmul + softmax + matmul path
FLASH_ENV = "VKDG_FLASH_ATTN"
#: fewer keys: the unfused path (its score matrix is small, and its GEMM tiles reuse K over 64 queries; for
#: one query row over 48 keys on the H100 its 4 dispatches took 31 us, attention_flash 38-43 us)
FLASH_MIN_KV = 64
#: attention_flash.comp: query rows per workgroup, largest head dim
FLASH_QROWS, FLASH_MAX_D = 4, 256
#: "0" at lowering: no attention takes attention_decode
DECODE_ENV = "VKDG_DECODE_ATTN"
#: attention_decode.comp: most query rows (per batch and head) and keys it takes (its shared score row);
#: its workgroups (one per query row) stay within one grid dimension
DECODE_MAX_Q, DECODE_MAX_KV, DECODE_MAX_ROWS = 8, 1024, 65535


def sdpa_args(node: Node) -> dict:
    """The SDPA node's arguments by name (positional or keyword), with torch's defaults."""
    a = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None, "enable_gqa": False}
    a.update(zip(_ARGS, node.args, strict=False))  # trailing args may be left out
    a.update(node.kwargs)
    return a


def _sdpa_support(node: Node) -> str | None:
    a = sdpa_args(node)
    q, k, v = (a[n].meta["val"] for n in ("query", "key", "value"))
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return "attention on tensors not of rank 4 (batch, heads, tokens, dim)"
    if a["dropout_p"]:
        return "attention with dropout"
    if q.shape[1] != k.shape[1]:
        if not a["enable_gqa"]:
            return "q and kv head counts differ without enable_gqa"
        if not isinstance(q.shape[1], int) or not isinstance(k.shape[1], int) or q.shape[1] % k.shape[1]:
            return f"grouped-query attention with {q.shape[1]} q heads over {k.shape[1]} kv heads"
    mask = a["attn_mask"]
    if mask is not None:
        m = mask.meta["val"]
        if m.dtype not in (torch.float32, torch.float16, torch.bool):
            return f"attention mask of dtype {m.dtype} (float additive or bool supported)"
        if m.dim() > 4:
            return f"attention mask of rank {m.dim()}"
    for t in (node.meta["val"], q, k, v):
        if t.dtype not in (torch.float32, torch.float16):
            return f"attention on {t.dtype} tensors (the Vulkan delegate computes float32, or fp16 via force_fp16)"
    return None


def repeated_kv(node: Node) -> tuple[Node, int] | None:
    """(x, g) when `node` is x.repeat_interleave(g, dim=1) of a [b, h_kv, s, d] tensor as exir
    decomposes it, view(clone(expand(unsqueeze(x, 2)))): the attention then reads x's heads directly
    (the GQA read) and the copies are pruned when nothing else reads them."""
    chain, n = [], node
    for part in ("view", "clone", "expand", "unsqueeze"):
        if not isinstance(n, Node) or n.op != "call_function" or part not in str(n.target):
            return None
        chain.append(n)
        n = n.args[0]
    if not isinstance(n, Node) or chain[-1].args[1] not in (2, -3):
        return None
    xs, ks = n.meta["val"].shape, node.meta["val"].shape
    if len(xs) != 4 or len(ks) != 4 or ks[0] != xs[0] or ks[2:] != xs[2:]:
        return None
    if not isinstance(ks[1], int) or not isinstance(xs[1], int) or ks[1] % xs[1]:
        return None
    return n, ks[1] // xs[1]


@register("sdpa", [SDPA], ["matmul", "softmax", "softmax_row", "binary", "mask_bool", "attention_flash",
                          "attention_decode"],
          support=_sdpa_support, preserve=[SDPA])
def lower_sdpa(ctx, node: Node) -> None:
    a = sdpa_args(node)
    q, k, v = (ctx.inp(a[n]) for n in ("query", "key", "value"))
    rk, rv = repeated_kv(a["key"]), repeated_kv(a["value"])
    if rk and rv and rk[1] == rv[1]:  # KV heads repeat_interleave'd for the attention: read the originals
        k, v = ctx.inp(rk[0]), ctx.inp(rv[0])
    b, h, s, d = q.shape
    h_kv, kv = k.shape[1], k.shape[2]
    g = h // h_kv  # query heads per kv head (1 without GQA)
    scale = float(a["scale"]) if a["scale"] is not None else 1.0 / math.sqrt(d)
    if _decode(ctx, node, a, q, k, v, g, scale) or _flash(ctx, node, a, q, k, v, g, scale):
        return
    scores = ctx.g.new_tensor([b, h, s, kv])
    qs, ks = contiguous_strides([b, h_kv, g * s, d]), contiguous_strides(k.shape)
    dispatch_matmul(ctx, q, k, ctx.g.alias(scores, [b, h_kv, g * s, kv]), d, qs, [ks[0], ks[1], ks[3], ks[2]],
                    [b, h_kv], alpha=scale)
    if a["attn_mask"] is not None:
        scores = _apply_mask(ctx, scores, a["attn_mask"])
    probs = ctx.g.new_tensor([b, h, s, kv])
    softmax(ctx, scores, probs, 3, causal_q=s if a["is_causal"] else None, masked_rows_zero=True)
    y = ctx.out(node)
    ps, vs = contiguous_strides([b, h_kv, g * s, kv]), contiguous_strides(v.shape)
    dispatch_matmul(ctx, probs, v, ctx.g.alias(y, [b, h_kv, g * s, d]), kv, ps, vs, [b, h_kv])


def _decode(ctx, node: Node, a: dict, q, k, v, g: int, scale: float) -> bool:
    """attention_decode where it applies (see the module docstring); False: another path."""
    b, h, s, d = q.shape
    kv = k.shape[2]
    if (os.environ.get(DECODE_ENV) == "0" or not all(isinstance(x, int) for x in (b, h, s, d, kv))
            or s > DECODE_MAX_Q or kv > DECODE_MAX_KV or d > FLASH_MAX_D or b * h * s > DECODE_MAX_ROWS):
        return False
    operands = _fused_mask(ctx, a, q, [b, h, s, kv])
    if operands is None:
        return False
    mask_f, mask_b, kind, strides = operands
    rows = b * h * s
    ctx.dispatch("attention_decode", [q, k, v, mask_f, mask_b, ctx.out(node)],
                 [rows, h, s, kv, d, g, s, scale, int(bool(a["is_causal"])), kind, *strides], (rows * 128,))
    return True


def _flash(ctx, node: Node, a: dict, q, k, v, g: int, scale: float) -> bool:
    """The fused kernel where it applies (see the module docstring); False: take the unfused path."""
    b, h, s, d = q.shape
    kv = k.shape[2]
    if (os.environ.get(FLASH_ENV) == "0" or not all(isinstance(x, int) for x in (b, h, s, d, kv))
            or kv < FLASH_MIN_KV or d > FLASH_MAX_D):
        return False
    operands = _fused_mask(ctx, a, q, [b, h, s, kv])
    if operands is None:
        return False
    mask_f, mask_b, kind, strides = operands
    y = ctx.out(node)
    blocks = b * h * -(-s // FLASH_QROWS)
    ctx.dispatch("attention_flash", [q, k, v, mask_f, mask_b, y],
                 [blocks, h, s, kv, d, g, -(-s // FLASH_QROWS), scale, int(bool(a["is_causal"])), kind, *strides],
                 (blocks * ROW_LANES,))
    return True


def _fused_mask(ctx, a: dict, q, scores_shape: list[int]):
    """The mask operands of a fused attention kernel (attention_flash, attention_decode): (additive float
    mask or q, int32 bool mask or q, kind 0 none / 1 float / 2 bool, its strides over [b, h, s, kv]);
    None for a bool mask in bytes (payloads before version 3: the unfused path reads them)."""
    mask_arg, mask, kind, strides = a["attn_mask"], q, 0, [0, 0, 0, 0]
    if mask_arg is not None:
        m = mask_arg.meta["val"]
        const = ctx.const_value(mask_arg)
        if m.dtype == torch.bool and const is None:
            mask = ctx.inp(mask_arg)
            if mask.dtype != I32:  # bytes (payloads before version 3): the unfused path reads them
                return None
            kind = 2
        else:
            if const is not None and m.dtype == torch.bool:
                const = torch.zeros(const.shape).masked_fill(~const, -math.inf)
            mask = ctx.g.constant(const.float()) if const is not None else ctx.inp(mask_arg)
            kind = 1
        strides = broadcast_strides(mask.shape, scores_shape)[2:]
    return mask if kind == 1 else q, mask if kind == 2 else q, kind, strides


def _apply_mask(ctx, scores, mask_arg: Node):
    """scores + mask (float), or where(mask, scores, -inf) (bool), broadcast to the scores' shape."""
    shape = scores.shape
    n = numel(shape)
    sizes = [1] * (6 - len(shape)) + list(shape)
    out = ctx.g.new_tensor(shape)
    m = mask_arg.meta["val"]
    const = ctx.const_value(mask_arg)
    if m.dtype == torch.bool and const is None:  # a runtime bool tensor: int32 0/1 words (bytes before v3)
        mask = ctx.inp(mask_arg)
        if mask.dtype not in (I32, U8):
            raise ValueError(f"a bool attention mask of device dtype {mask.dtype}")
        ctx.dispatch("mask_bool", [scores, mask, out], [n, *sizes, *broadcast_strides(mask.shape, shape),
                                                        int(mask.dtype == I32)], (n,))
        return out
    if const is not None and m.dtype == torch.bool:
        const = torch.zeros(const.shape).masked_fill(~const, -math.inf)
    mask = ctx.g.constant(const.float()) if const is not None else ctx.inp(mask_arg)
    ctx.dispatch("binary", [scores, mask, out], [opcode("binary", "add"), n, *sizes, *broadcast_strides(scores.shape, shape),
                                                 *broadcast_strides(mask.shape, shape), 1.0], (n,))
    return out
