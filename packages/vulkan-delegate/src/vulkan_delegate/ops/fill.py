"""Tensors made from numbers: arange, full/zeros/ones(_like), scalar_tensor (the forms exir's edge graphs
hold: arange.start_step, full, full_like, scalar_tensor; zeros/ones(_like) arrive as full(_like)). Static shapes are folded
into payload constants at compile time (lower.is_static_fill); sizes known per call (a dynamic
sequence length) are filled on the device (shader `fill`: y[i] = start + i * step, in double precision
through fp32 pairs and rounded once, as torch computes it)."""

from __future__ import annotations

import torch
from torch.fx import Node

from ..graph import I32, VARIANT, numel
from ..lower import dim_of
from ..registry import INT_VARIANTS, any_tensors, aten_key, register

aten = torch.ops.aten
ARANGE = aten.arange.start_step
FILLS = [ARANGE, aten.full.default, aten.full_like.default, aten.scalar_tensor.default]


def _start_step(node: Node) -> tuple:
    """(start, step) of y[i] = start + i * step."""
    t = aten_key(node.target)
    if t == ARANGE:
        return node.args[0], node.args[2] if len(node.args) > 2 else 1
    if t == aten.scalar_tensor.default:
        return node.args[0], 0
    return node.args[1], 0


def _hi_lo(v: float) -> tuple[float, float]:
    """v (a Python double) as an fp32 pair hi + lo: the fill shader computes start + i * step to double
    precision from them, as torch's arange does (its accumulate type is double)."""
    hi = float(torch.tensor(float(v), dtype=torch.float32))
    return hi, float(v) - hi


def _fill_support(node: Node) -> str | None:
    if any(isinstance(v, Node) for v in _start_step(node)):
        return "a fill value computed at run time"
    if node.kwargs.get("memory_format") not in (None, torch.contiguous_format, torch.preserve_format):
        return f"memory format {node.kwargs['memory_format']}"
    return any_tensors(node)


@register("fill", FILLS, ["fill"], support=_fill_support, variants=INT_VARIANTS)
def lower_fill(ctx, node: Node) -> None:
    if ctx.const_value(node) is not None:  # a static shape: a payload constant
        ctx.values[node] = ctx.inp(node)
        return
    start, step = _start_step(node)
    y = ctx.out(node)
    n = numel(y.shape)
    if y.dtype == I32:
        if not all(isinstance(v, bool | int | torch.SymInt) for v in (start, step)):
            raise ValueError("an integer fill from non-integer numbers")
        push = [n, dim_of(start), dim_of(step)]
    else:
        if not all(isinstance(v, bool | int | float) for v in (start, step)):
            raise ValueError("a float fill from a size known only at run time")
        (start_hi, start_lo), (step_hi, step_lo) = _hi_lo(start), _hi_lo(step)
        push = [n, start_hi, step_hi, start_lo, step_lo]
    ctx.dispatch("fill", [y], push, (n,), variant=VARIANT[y.dtype])
