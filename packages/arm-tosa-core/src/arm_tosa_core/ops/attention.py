"""scaled_dot_product_attention kept whole (exir does not decompose it) and lowered as
    softmax(Q K^T * scale + mask) V
with two MATMULs and a max-subtracted softmax (REDUCE_MAX, SUB, EXP, REDUCE_SUM, RECIPROCAL, MUL).

A query row masked entirely (a bool mask False on the whole row, or -inf on the whole row after an
additive mask) gives 0, as torch 2.13's safe softmax does: a SELECT zeroes such rows of the softmax,
found at compile time for a constant mask and by REDUCE_ANY for a runtime one.

Kept whole, the causal mask is one compile-time constant instead of the arange/compare/where chain
that torch's decomposition builds. Grouped-query attention (enable_gqa) needs no repeat of K/V: the
Hq = Hkv * G query heads are folded into the rows of each KV head's MATMUL, so the work runs on rank-5
tensors [B, Hkv, G, L, S].

Keeping SDPA whole needs `prepare_for_preservation` on the exported program first (the partitioner's
`ops_to_not_decompose` must call it; until it does, `preserve` stays off and exir decomposes SDPA into
ops the other families lower). Why: exir decomposes twice. In the first pass the kept SDPA's output
has the strides of torch's CPU flash kernel ([B, L, H, E] in memory), so `attn.transpose(1, 2)
.reshape(...)` (DeiT, Llama, every HF attention) is traced as a plain `view`; in the second pass the
kept op's fake output is contiguous [B, H, L, E] and that `view` fails ("Cannot view a tensor ...").
The rewrite pins SDPA's output to the contiguous layout and turns the views after it back into
reshapes, so both passes agree.
"""

from __future__ import annotations

import math

import torch
from torch.fx import Node

from .. import layout
from ..builder import Op, T, tosa_dtype
from ..context import LoweringContext, Value
from ..helpers.common import arg, mul_shift, nan_propagate
from ..registry import register_op

aten = torch.ops.aten


def _params(node: Node) -> dict:
    return {
        "mask": arg(node, 3, "attn_mask"),
        "dropout": arg(node, 4, "dropout_p", 0.0),
        "causal": arg(node, 5, "is_causal", False),
        "scale": node.kwargs.get("scale"),
        "gqa": node.kwargs.get("enable_gqa", False),
    }


def _sdpa_support(node: Node, spec) -> str | None:
    q, k, v = (a.meta["val"] for a in node.args[:3])
    p = _params(node)
    if p["dropout"]:
        return f"attention with dropout_p={p['dropout']} is not lowered (export the model in eval mode)"
    if any(t.dim() != 4 for t in (q, k, v)):
        return "attention is lowered for rank-4 [B, H, S, D] query/key/value only"
    if not q.dtype.is_floating_point or len({q.dtype, k.dtype, v.dtype}) != 1:
        return "attention is lowered for float query/key/value of one dtype only"
    (b, hq, _, e), (bk, hk, s, ek), (bv, hv, sv, _) = q.shape, k.shape, v.shape
    if not (b == bk == bv and hk == hv and s == sv and e == ek):
        return "attention with broadcast batch/head dims between query, key and value is not lowered"
    if hq != hk and not (p["gqa"] and hq % hk == 0):
        return (f"attention with {hq} query heads and {hk} key/value heads is not lowered "
                "(grouped-query attention needs enable_gqa=True and a whole number of query heads per KV head)")
    mask = p["mask"]
    if mask is not None:
        if p["causal"]:
            return "attention with both attn_mask and is_causal is not lowered (torch rejects it too)"
        m = mask.meta["val"]
        if m.dtype != torch.bool and m.dtype != q.dtype:
            return f"attention mask of dtype {m.dtype} is not lowered (bool or {q.dtype})"
        try:
            shape = torch.broadcast_shapes(tuple(m.shape), (b, hq, q.shape[2], s))
        except RuntimeError:
            shape = None
        if shape != (b, hq, q.shape[2], s) or m.dim() > 4:
            return f"attention mask of shape {tuple(m.shape)} does not broadcast to {(b, hq, q.shape[2], s)}"
        heads = m.shape[-3] if m.dim() >= 3 else 1
        if hq != hk and heads not in (1, hq):
            return "grouped-query attention with a per-head mask of this shape is not lowered"
    return None


def _mask5(ctx: LoweringContext, mask: Value, hkv: int, groups: int) -> Value:
    """The mask, broadcastable to [B, Hq, L, S], as rank 5 [B, Hkv, G, L, S] (broadcastable)."""
    m = ctx.with_rank(mask, 4)
    mb, mh, ml, ms = m.shape
    shape5 = (mb, hkv, groups, ml, ms) if mh != 1 else (mb, 1, 1, ml, ms)
    return ctx.reshape(m, shape5)


def _neg_large(dtype: torch.dtype) -> float:
    """A finite stand-in for -inf: exp() of it minus any real score is 0, and adding it cannot overflow."""
    return float(torch.finfo(dtype).min) / 2


_SDPA = aten.scaled_dot_product_attention.default
_PREPARED = "arm_sdpa_prepared"


def prepare_for_preservation(ep) -> bool:
    """Make every SDPA of `ep` safe to keep whole through exir's two decomposition passes.

    Inserts `clone(memory_format=contiguous)` after each SDPA and turns the `view`s downstream of it
    into `reshape`s (same values; they re-decide view-or-copy from the strides of each pass).
    Idempotent. Returns whether the graph changed.
    """
    graph, changed = ep.graph, False
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not _SDPA or node.meta.get(_PREPARED):
            continue
        node.meta[_PREPARED] = True
        with graph.inserting_after(node):
            pinned = graph.call_function(aten.clone.default, (node,), {"memory_format": torch.contiguous_format})
        node.replace_all_uses_with(pinned, delete_user_cb=lambda user, pinned=pinned: user is not pinned)
        pinned.meta = {**node.meta, "val": node.meta["val"].clone(memory_format=torch.contiguous_format)}
        pinned.meta.pop(_PREPARED, None)
        todo, seen = list(pinned.users), set()
        while todo:
            user = todo.pop()
            if user in seen:
                continue
            seen.add(user)
            if user.op == "call_function" and user.target is aten.view.default:
                user.target = aten.reshape.default
            todo.extend(user.users)
        changed = True
    if changed:
        ep.graph_module.recompile()
    return changed


# Kept whole: the partitioner calls `prepare_for_preservation` before exir decomposes (see module docstring).
@register_op("scaled_dot_product_attention", [_SDPA], support=_sdpa_support, profiles=("FP",), preserve=True,
             prepare_preserve=prepare_for_preservation, fp32_opmath=True)
def lower_sdpa(ctx: LoweringContext, node: Node) -> Value:
    q, k, v = (ctx.val(a) for a in node.args[:3])
    p = _params(node)
    shape, dtype = ctx.out_meta(node)
    dt = tosa_dtype(dtype)
    b, hq, length, e = q.shape
    hkv, s, ev = k.shape[1], k.shape[2], v.shape[3]
    groups = hq // hkv
    bh, rows = b * hkv, groups * length
    scale = p["scale"] if p["scale"] is not None else 1.0 / math.sqrt(e)
    ident4 = layout.identity(4)
    zps = [ctx.b.zero_point(dt), ctx.b.zero_point(dt)]

    # Q [B*Hkv, G*L, E] and K^T [B*Hkv, E, S]: the query heads of one KV head stack up as rows.
    qt = ctx.b.reshape(ctx.tensor(q, ident4, dt), [bh, rows, e])
    kt = ctx.b.reshape(ctx.tensor(k, (0, 1, 3, 2), dt), [bh, e, s])
    scores = ctx.b.op(Op.MATMUL, [qt, kt, *zps], [bh, rows, s], dt)
    scores = ctx.b.op(Op.MUL, [scores, ctx.scalar(scale, dt, 3), mul_shift(ctx)], [bh, rows, s], dt)
    shape5 = [b, hkv, groups, length, s]
    scores = ctx.b.reshape(scores, shape5)

    mask = ctx.val(p["mask"]) if p["mask"] is not None else None
    if p["causal"]:
        allowed = torch.ones(length, s, dtype=torch.bool).tril()
        mask = ctx.constant(allowed)
    live = None
    if mask is not None:
        mask = _mask5(ctx, mask, hkv, groups)
        scores = _apply_mask(ctx, scores, mask, dtype)
        live = _live_rows(ctx, scores, mask)

    probs = _softmax_last(ctx, scores, dtype)
    if live is not None:  # torch's safe softmax: a row masked entirely attends to nothing, giving 0
        probs = ctx.b.op(Op.SELECT, [live, probs, ctx.scalar(0.0, dt, 5)], probs.shape, dt)
    probs = ctx.b.reshape(probs, [bh, rows, s])
    vt = ctx.b.reshape(ctx.tensor(v, ident4, dt), [bh, s, ev])
    out = ctx.b.op(Op.MATMUL, [probs, vt, *zps], [bh, rows, ev], dt)
    return ctx.from_tensor(ctx.b.reshape(out, shape), shape, dtype)


def _apply_mask(ctx: LoweringContext, scores: T, mask: Value, dtype: torch.dtype) -> T:
    """scores + additive mask, or masked-out scores replaced by a large negative for boolean masks."""
    dt = scores.dtype
    ident5 = layout.identity(5)
    if mask.dtype == torch.bool:
        if mask.is_const:  # fold to an additive constant
            additive = torch.where(mask.const, 0.0, _neg_large(dtype)).to(dtype)
            return ctx.b.op(Op.ADD, [scores, ctx.tensor(ctx.constant(additive), ident5, dt)], scores.shape, dt)
        keep = ctx.tensor(mask, ident5)
        return ctx.b.op(Op.SELECT, [keep, scores, ctx.scalar(_neg_large(dtype), dt, 5)], scores.shape, dt)
    return ctx.b.op(Op.ADD, [scores, ctx.tensor(mask, ident5, dt)], scores.shape, dt)


def _live_rows(ctx: LoweringContext, scores: T, mask: Value) -> T | None:
    """Rows of the masked scores with at least one position left ([..., 1], bool), as torch decides
    them: a bool mask with a True in the row, or scores (after an additive mask) not all -inf. None
    when every row has one (a constant mask says so at compile time)."""
    ident5, bool_dt = layout.identity(5), tosa_dtype(torch.bool)
    if mask.is_const:
        masked = ~mask.const if mask.dtype == torch.bool else mask.const == float("-inf")
        live = ~masked.all(dim=-1, keepdim=True)
        return None if bool(live.all()) else ctx.tensor(ctx.constant(live), ident5, bool_dt)
    if mask.dtype == torch.bool:
        keep = ctx.tensor(mask, ident5)
    else:
        minus_inf = ctx.scalar(float("-inf"), scores.dtype, 5)
        at_minus_inf = ctx.b.op(Op.EQUAL, [scores, minus_inf], scores.shape, bool_dt)
        keep = ctx.b.op(Op.LOGICAL_NOT, [at_minus_inf], scores.shape, bool_dt)
    if keep.shape[-1] == 1:
        return keep
    return ctx.b.op(Op.REDUCE_ANY, [keep], [*keep.shape[:-1], 1], bool_dt, len(keep.shape) - 1)


def _softmax_last(ctx: LoweringContext, x: T, dtype: torch.dtype) -> T:
    """Softmax over the last axis, subtracting the row maximum first so EXP cannot overflow."""
    dt, axis = x.dtype, len(x.shape) - 1
    kept = [*x.shape[:-1], 1]
    peak = ctx.b.op(Op.REDUCE_MAX, [x], kept, dt, axis, nan_propagate())
    shifted = ctx.b.op(Op.SUB, [x, peak], x.shape, dt)
    exps = ctx.b.op(Op.EXP, [shifted], x.shape, dt)
    total = ctx.b.op(Op.REDUCE_SUM, [exps], kept, dt, axis)
    inv = ctx.b.op(Op.RECIPROCAL, [total], kept, dt)
    return ctx.b.op(Op.MUL, [exps, inv, mul_shift(ctx)], x.shape, dt)
