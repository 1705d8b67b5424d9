"""Quantized linear (from VulkanQuantizer): shader `linear_q` reads the [N, K] integer weights flattened
row-major, two's complement, packed into 32-bit words: 8-bit values four per word, 4-bit values two
per byte (eight per word, element i in bits 4*(i % 8).. of word i / 8, i.e. low nibble first). Weights
whose values all fit in [-8, 7] (every 4-bit layer) are packed as 4-bit, losslessly. Scales are per
(row, group); each activation row is quantized to int8 on the fly when the layer asks for dynamic
activations."""

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
    bits = 4 if int(q.min()) >= -8 and int(q.max()) <= 7 else 8
    w = ctx.g.constant(pack_weights(q, bits), U8)
    sc = ctx.g.constant(s.float())
    x = ctx.inp(x_arg)
    bias = ctx.inp(b_arg) if b_arg is not None else sc
    y = ctx.out(node)
    n_out, k = q.shape
    rows = numel(x.shape[:-1])
    ctx.dispatch("linear_q", [x, w, sc, bias, y], [rows, n_out, k, int(group), int(k // group),
                                                  int(b_arg is not None), int(bool(dyn)), bits], (n_out, rows))


def pack_weights(q: torch.Tensor, bits: int) -> np.ndarray:
    """Integer weights [N, K] as the bytes `linear_q` reads (see the module docstring), whole words."""
    flat = q.to(torch.int8).numpy().reshape(-1)
    if bits == 4:
        nib = (flat.astype(np.uint8) & 0x0F)
        nib = np.concatenate([nib, np.zeros(len(nib) % 2, np.uint8)])
        flat = nib[0::2] | (nib[1::2] << 4)
    packed = flat.view(np.uint8)
    return np.concatenate([packed, np.zeros((-len(packed)) % 4, np.uint8)])

