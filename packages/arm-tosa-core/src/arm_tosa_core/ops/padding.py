"""Padding by copying edges: aten.pad with mode reflect, replicate or circular (conv padding_mode).

TOSA PAD only writes a constant, so the padded borders are built from the input itself: SLICEs of
the edge rows (one per row for reflect and replicate, one block for circular) CONCATenated around it,
one axis at a time, in whatever layout the input has. The ops are data movement, so the same rule runs
on int8 (the quantizer shares the input's qparams) and on every Ethos-U (SLICE and CONCAT).
Constant padding is left to exir's decomposition (constant_pad_nd -> PAD, see shape_ops).
"""

from __future__ import annotations

import torch
from torch.fx import Node

from ..context import LoweringContext, Value
from ..helpers.common import arg
from ..helpers.shapes import MODES, pad_axis
from ..registry import Quant, register_op

aten = torch.ops.aten


def _logical_pads(node: Node) -> dict[int, tuple[int, int]]:
    """{dim: (lo, hi)} from torch's pad list (pairs from the last dim backwards)."""
    rank = node.args[0].meta["val"].dim()
    pads = list(node.args[1])
    return {rank - 1 - i: (int(pads[2 * i]), int(pads[2 * i + 1])) for i in range(len(pads) // 2)}


def _pad_support(node: Node, spec) -> str | None:
    mode = arg(node, 2, "mode", "constant")
    if mode not in MODES:
        return f"aten.pad mode {mode!r} is lowered after exir decomposes it (constant_pad_nd)"
    shape = node.args[0].meta["val"].shape
    for dim, (lo, hi) in _logical_pads(node).items():
        if lo < 0 or hi < 0:
            return f"{mode} padding with negative pads {lo, hi} (cropping) is not lowered"
        limit = shape[dim] - 1 if mode == "reflect" else shape[dim]
        if mode != "replicate" and max(lo, hi) > limit:
            return f"{mode} padding of {max(lo, hi)} on a dim of size {shape[dim]} (torch allows at most {limit})"
    return None


# preserve: exir would otherwise turn reflect/circular padding into index arithmetic and slice_scatter
@register_op("edge_pad", [aten.pad.default], support=_pad_support, quant=Quant.SHARED, preserve=True)
def lower_edge_pad(ctx: LoweringContext, node: Node) -> Value:
    x = ctx.val(node.args[0])
    shape, dtype = ctx.out_meta(node)
    if x.is_const:
        return ctx.constant(torch.nn.functional.pad(x.const, list(node.args[1]), mode=arg(node, 2, "mode")))
    t = x.tensor
    for dim, (lo, hi) in sorted(_logical_pads(node).items()):
        t = pad_axis(ctx, t, x.perm.index(dim), lo, hi, arg(node, 2, "mode"))
    return Value(shape, dtype, tensor=t, perm=x.perm, qparams=x.qparams)
