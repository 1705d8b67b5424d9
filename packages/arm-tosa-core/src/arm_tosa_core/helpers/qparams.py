"""Quantization parameters of values, read from PT2E's quantize/dequantize nodes."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (defines the quantized_decomposed ops)
from torch.fx import Node

from .common import aten_target

try:  # out-variants of quantize/dequantize, needed by to_executorch for the CPU-side boundary ops
    import executorch.kernels.quantized  # noqa: F401
except ImportError:  # pragma: no cover - executorch builds without the quantized kernels
    pass

qd = torch.ops.quantized_decomposed


QUANTIZE = {qd.quantize_per_tensor.default, qd.quantize_per_tensor.tensor}


DEQUANTIZE = {qd.dequantize_per_tensor.default, qd.dequantize_per_tensor.tensor,
              qd.dequantize_per_channel.default}


@dataclass(frozen=True)
class QParams:
    """Affine quantization: real = scale * (q - zero_point). Per-channel when `scale` is an array."""

    scale: float | np.ndarray
    zero_point: int
    dtype: torch.dtype  # int8 / int16, or int32 for accumulators
    qmin: int
    qmax: int
    axis: int | None = None  # logical channel axis of a per-channel scale

    @property
    def per_channel(self) -> bool:
        return isinstance(self.scale, np.ndarray) and self.scale.size > 1

    def same_as(self, other: QParams) -> bool:
        return (not self.per_channel and not other.per_channel and self.zero_point == other.zero_point
                and self.dtype == other.dtype and math.isclose(float(self.scale), float(other.scale),
                                                                rel_tol=1e-7))

    @staticmethod
    def accumulator(scale) -> QParams:
        return QParams(scale, 0, torch.int32, -(2**31), 2**31 - 1)


def target_of(node: Node):
    return aten_target(node.target)


def is_quantize(node) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and target_of(node) in QUANTIZE


def is_dequantize(node) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and target_of(node) in DEQUANTIZE


def qparams_of(node: Node, const_of=None) -> QParams:
    """QParams from a quantize/dequantize node's arguments (`const_of` resolves constant nodes)."""
    args = list(node.args)
    if target_of(node) is qd.dequantize_per_channel.default:
        scales, _zps, axis, qmin, qmax, dtype = args[1:7]
        value = const_of(scales) if const_of is not None else None
        if value is None:
            raise ValueError(f"per-channel scales {scales} of {node.name} are not constant")
        return QParams(np.asarray(value.double().numpy(), dtype=np.float64), 0, dtype, qmin, qmax, axis)
    scale, zp, qmin, qmax, dtype = args[1:6]
    return QParams(float(_const_scalar(scale)), int(_const_scalar(zp)), dtype, qmin, qmax)


def _const_scalar(arg):
    if isinstance(arg, Node):
        raise ValueError(f"quantization parameter {arg.name} is computed at run time (dynamic "
                         "quantization); TOSA needs constant scales")
    return arg


def activation_dtype(node: Node):
    """The integer type of a quantized node's activations (from the dequantize feeding it)."""
    for arg in node.all_input_nodes:
        if "dequantize_per_tensor" in str(arg.target) and len(arg.args) >= 6:
            return arg.args[5]
    return None
