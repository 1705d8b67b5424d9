"""Run a converted PT2E model with exact quantization arithmetic: the reference integer lowerings match.

`convert_pt2e`'s model rounds `x * (1 / scale)` in float32. Where that product lands within float32
precision of a rounding tie (e.g. 26.5000003 stored as 26.5), it picks the other integer than exact
arithmetic does, and a network amplifies such a flip into many output LSBs. An integer lowering (TOSA
RESCALE) computes the exact value, so it is checked against this float64 evaluation instead.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import fx


class ExactQuantizedInterpreter(fx.Interpreter):
    """Evaluates a converted (quantize -> dequantize) graph module in float64."""

    def call_function(self, target, args, kwargs):
        name = str(target)
        if name.startswith("quantized_decomposed.quantize_per_tensor"):
            x, scale, zero_point, qmin, qmax, dtype = args[:6]
            return torch.clamp(torch.round(x.double() / scale) + zero_point, qmin, qmax).to(dtype)
        if name.startswith("quantized_decomposed.dequantize_per_tensor"):
            q, scale, zero_point = args[:3]
            return (q.double() - zero_point) * scale
        if name.startswith("quantized_decomposed.dequantize_per_channel"):
            q, scales, zero_points, axis = args[:4]
            shape = [-1 if d == axis else 1 for d in range(q.dim())]
            return (q.double() - zero_points.double().reshape(shape)) * scales.double().reshape(shape)
        args = tuple(a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)
        return super().call_function(target, args, kwargs)

    def get_attr(self, target, args, kwargs):
        value = super().get_attr(target, args, kwargs)
        return value.double() if isinstance(value, torch.Tensor) and value.is_floating_point() else value


def run_exactly(quantized: fx.GraphModule, *inputs: torch.Tensor) -> Any:
    """The outputs of `quantized` (a `convert_pt2e` result) with quantize/dequantize evaluated exactly,
    as float32 tensors (the same structure the module returns)."""
    if not isinstance(quantized, fx.GraphModule):
        raise TypeError(f"run_exactly needs the GraphModule convert_pt2e returns, got {type(quantized).__name__}")
    with torch.no_grad():
        out = ExactQuantizedInterpreter(quantized).run(*inputs)
    return torch.utils._pytree.tree_map(
        lambda v: v.float() if isinstance(v, torch.Tensor) and v.dtype == torch.float64 else v, out)
