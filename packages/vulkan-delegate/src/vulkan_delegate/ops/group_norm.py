"""Group norm (shader `group_norm`, or `norm_row` (a workgroup per group) for groups of at least
ROW_MIN values): exir's `native_group_norm`, whose mean and rstd outputs no model reads in inference
(a node that uses them stays on the CPU)."""

from __future__ import annotations

import torch
from torch.fx import Node

from ..registry import float_tensors, register
from .reduce import norm_row, workgroup_per_row

aten = torch.ops.aten


def _group_norm_support(node: Node) -> str | None:
    if any(u.args[1] != 0 for u in node.users):
        return "group norm's mean or rstd output is used"
    if not all(isinstance(a, int) for a in node.args[3:7]):
        return "group norm with a dynamic batch, channel or spatial size"
    return float_tensors(node)


@register("group_norm", [aten.native_group_norm.default], ["group_norm", "norm_row", "norm_row_wide"],
          support=_group_norm_support)
def lower_group_norm(ctx, node: Node) -> None:
    x_node, w_node, b_node, n, c, hw, groups, eps = node.args
    x = ctx.inp(x_node)
    y = ctx.g.new_tensor(x.shape)
    w = ctx.inp(w_node) if w_node is not None else x
    b = ctx.inp(b_node) if b_node is not None else x
    if workgroup_per_row(c // groups * hw, 1):
        norm_row(ctx, [x, w, b, y], [n * groups, c // groups * hw, float(eps), int(w_node is not None),
                                     int(b_node is not None), 0, hw, groups], n * groups, c // groups * hw)
    else:
        ctx.dispatch("group_norm", [x, w, b, y], [n * groups, c // groups, hw, float(eps),
                                                  int(w_node is not None), int(b_node is not None), groups],
                     (n * groups,))
    ctx.values[node] = [y, None, None]
