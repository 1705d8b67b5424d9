"""Real FFT (`torch.fft.rfft` / `rfft2`, exir's `aten._fft_r2c`) as TOSA RFFT2D (FFT extension, fp32).

TOSA has no complex type, so a complex value cannot cross a delegate boundary: the FFT lowers when
every user of its complex result is `torch.view_as_real`, which turns it into real/imaginary pairs.
Inside the graph the complex result is carried as that real view ([..., 2]), made of RFFT2D's two
outputs. A 1-d transform is an RFFT2D of height 1; leading dims fold into RFFT2D's batch.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch.fx import Node

from ..builder import DType, Op
from ..context import LoweringContext, Value
from ..registry import aten_target, register_op

aten = torch.ops.aten
MAX_FFT = 8192  # TOSA level 8K: MAX_KERNEL bounds RFFT2D's height and width
_R2C = aten._fft_r2c.default
_AS_REAL = (aten.view_as_real_copy.default, aten.view_as_real.default)


def _fft_dims(node: Node) -> list[int]:
    rank = node.args[0].meta["val"].dim()
    return sorted(d % rank for d in node.args[1])


def _r2c_reason(node: Node, spec) -> str | None:
    x = node.args[0].meta["val"]
    if not spec.support_extension("fft"):
        return (f"the real FFT needs TOSA's FFT extension (RFFT2D); {spec} lacks it: use \"{spec}+fft\" to "
                "target it, otherwise it runs on the CPU")
    if x.dtype != torch.float32:
        return f"RFFT2D takes float32 input, not {x.dtype}"
    dims, rank = _fft_dims(node), x.dim()
    if dims not in ([rank - 1], [rank - 2, rank - 1]):
        return f"an FFT over dims {dims} of a rank-{rank} tensor is not lowered: RFFT2D transforms the last one or two"
    if not node.args[3]:
        return "a two-sided real FFT is not lowered (RFFT2D gives the one-sided spectrum)"
    sizes = [x.shape[d] for d in dims]
    if any(n & (n - 1) or n > MAX_FFT for n in sizes):
        return f"FFT sizes {sizes} must be powers of two up to {MAX_FFT} (TOSA RFFT2D); other sizes run on the CPU"
    if any(aten_target(u.target) not in _AS_REAL for u in node.users):
        return ("a complex result cannot leave a TOSA delegate (TOSA has no complex type): write "
                "torch.view_as_real(torch.fft.rfft(x)) to get real/imaginary pairs, which lower")
    return None


def _fft_support(node: Node, spec) -> str | None:
    if aten_target(node.target) is _R2C:
        return _r2c_reason(node, spec)
    source = node.args[0]
    if not (isinstance(source, Node) and aten_target(source.target) is _R2C):
        return "view_as_real of a complex value that is not a real FFT: TOSA has no complex type"
    reason = _r2c_reason(source, spec)
    return None if reason is None else f"its complex input stays on the CPU ({reason})"


@register_op("rfft", [_R2C, *_AS_REAL], support=_fft_support, profiles=("FP",), complex_values=True)
def lower_rfft(ctx: LoweringContext, node: Node) -> Value:
    """RFFT2D on [batch, H (1 for rfft), W]; the two results side by side as the complex value's real view."""
    if aten_target(node.target) in _AS_REAL:
        return ctx.val(node.args[0])  # already carried as its real view
    x = ctx.val(node.args[0])
    dims = _fft_dims(node)
    h = x.shape[-2] if len(dims) == 2 else 1
    w = x.shape[-1]
    batch = math.prod(x.shape) // (h * w)
    out_shape = tuple(int(d) for d in ctx.meta(node).shape)  # [..., W/2 + 1], complex
    b = ctx.b
    t = b.reshape(ctx.tensor(x, tuple(range(x.rank)), DType.FP32 if x.is_const else None), [batch, h, w])
    half = [batch, h, w // 2 + 1]
    parts = b.op_multi(Op.RFFT2D, [t], [(half, DType.FP32), (half, DType.FP32)], False)
    norm = {0: 1.0, 1: 1 / math.sqrt(h * w), 2: 1 / (h * w)}[node.args[2]]
    if norm != 1.0:
        factor = b.const(np.full([1, 1, 1], norm, dtype=np.float32), DType.FP32)
        shift = b.const(np.zeros([1], dtype=np.int8), DType.INT8)
        parts = [b.op(Op.MUL, [p, factor, shift], half, DType.FP32) for p in parts]
    pairs = [b.reshape(p, [*half, 1]) for p in parts]
    joined = b.op(Op.CONCAT, pairs, [*half, 2], DType.FP32, 3)
    shape = (*out_shape, 2)
    return ctx.from_tensor(b.reshape(joined, shape), shape, torch.float32)
