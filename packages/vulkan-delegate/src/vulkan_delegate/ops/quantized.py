"""Quantized linear (from VulkanQuantizer): shader `linear_q` reads int8 weights packed four per 32-bit
word (4-bit ones stored as int8 too: one layout, the shader is the same), scales per (row, group), and
quantizes each activation row to int8 on the fly when the layer asks for dynamic activations."""

from __future__ import annotations

import numpy as np
import torch
from torch.fx import Node

from ..graph import U8, numel
from ..quantizer import linear_q  # noqa: F401  (registers the op)
from ..registry import register

OP = torch.ops.vulkan_delegate.linear_q.default


def _support(node: Node) -> str | None:
    x = node.args[0].meta["val"]
    if x.dtype != torch.float32:
        return f"dtype {x.dtype}"
    return None


@register("linear_q", [OP], ["linear_q"], support=_support)
def lower_linear_q(ctx, node: Node) -> None:
    x_arg, q_arg, s_arg, b_arg, group, dyn = node.args
    q = ctx.const_value(q_arg)
    s = ctx.const_value(s_arg)
    if q is None or s is None:
        raise ValueError("linear_q weights must be constants")
    qbytes = q.to(torch.int8).numpy().view(np.uint8).reshape(-1)
    qbytes = np.concatenate([qbytes, np.zeros((-len(qbytes)) % 4, np.uint8)])  # whole 32-bit words
    w = ctx.g.constant(qbytes, U8)
    sc = ctx.g.constant(s.float())
    x = ctx.inp(x_arg)
    bias = ctx.inp(b_arg) if b_arg is not None else sc
    y = ctx.out(node)
    n_out, k = q.shape
    rows = numel(x.shape[:-1])
    ctx.dispatch("linear_q", [x, w, sc, bias, y], [rows, n_out, k, int(group), int(k // group),
                                                  int(b_arg is not None), int(bool(dyn))], (n_out, rows))

