"""Convolution arguments (every overload read one way) and batch-norm folding arithmetic."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.fx import Node

from .common import aten_target

aten = torch.ops.aten


@dataclass(frozen=True)
class ConvArgs:
    """A convolution node's arguments, the same for aten.convolution and the conv1d/conv2d/
    conv_transpose2d overloads, which are kept whole (so exir need not re-trace the program to
    decompose them into aten.convolution)."""

    input: Node
    weight: Node
    bias: Node | None
    stride: list[int]
    padding: list[int]
    dilation: list[int]
    transposed: bool
    output_padding: list[int]
    groups: int
    padding_hi: list[int] | None = None  # trailing padding when it differs (padding="same", even kernels)

    @property
    def pads(self) -> list[tuple[int, int]]:
        """(leading, trailing) padding per spatial dim."""
        hi = self.padding if self.padding_hi is None else self.padding_hi
        return list(zip(self.padding, hi, strict=True))


def _per_dim(value, rank: int) -> list[int]:
    return [int(value)] * rank if isinstance(value, int) else [int(v) for v in value]


_PLAIN = (("stride", 1), ("padding", 0), ("dilation", 1), ("groups", 1))


CONVOLUTIONS = (aten.convolution.default, aten.conv2d.default, aten.conv1d.default, aten.conv3d.default,
                aten.conv2d.padding, aten.conv1d.padding, aten.conv3d.padding, aten.conv_transpose2d.input)


_SIGNATURES = {  # the preserved overloads' argument names and defaults (after input, weight, bias)
    **{target: _PLAIN for target in CONVOLUTIONS[1:7]},
    aten.conv_transpose2d.input: (("stride", 1), ("padding", 0), ("output_padding", 0), ("groups", 1),
                                  ("dilation", 1)),
}


def is_convolution(node: Node) -> bool:
    return node.op == "call_function" and aten_target(node.target) in CONVOLUTIONS


def conv_args(node: Node) -> ConvArgs:
    """Normalized arguments of a convolution node (any target in CONVOLUTIONS)."""
    if aten_target(node.target) is aten.convolution.default:
        x, w, bias, stride, padding, dilation, transposed, out_pad, groups = node.args[:9]
        return ConvArgs(x, w, bias, list(stride), list(padding), list(dilation), bool(transposed),
                        list(out_pad), int(groups))
    target = aten_target(node.target)
    names = ("input", "weight", "bias", *(name for name, _ in _SIGNATURES[target]))
    given = dict(zip(names, node.args, strict=False)) | dict(node.kwargs)
    x, w, bias = given["input"], given["weight"], given.get("bias")
    dims = x.meta["val"].dim() - 2
    opt = {name: given.get(name, default) for name, default in _SIGNATURES[target]}
    dilation = _per_dim(opt["dilation"], dims)
    padding, padding_hi = opt["padding"], None
    if padding == "valid":
        padding = 0
    elif padding == "same":  # total (k-1)*d, the odd one at the end (torch's rule)
        kernel = w.meta["val"].shape[2:]
        total = [d * (k - 1) for d, k in zip(dilation, kernel, strict=True)]
        padding, padding_hi = [t // 2 for t in total], [t - t // 2 for t in total]
    return ConvArgs(x, w, bias, _per_dim(opt["stride"], dims), _per_dim(padding, dims), dilation,
                    target is aten.conv_transpose2d.input, _per_dim(opt.get("output_padding", 0), dims),
                    int(opt["groups"]), padding_hi)


def bn_scale_shift(weight: torch.Tensor | None, bias: torch.Tensor | None, mean: torch.Tensor,
                   var: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Inference batch norm as y = x * scale + shift per channel (float64)."""
    scale = torch.rsqrt(var.double() + eps)
    if weight is not None:
        scale = scale * weight.double()
    shift = -mean.double() * scale
    if bias is not None:
        shift = shift + bias.double()
    return scale, shift


def fold_into_conv(weight: torch.Tensor, bias: torch.Tensor | None, scale: torch.Tensor, shift: torch.Tensor,
                   transposed: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Weight and bias of conv(x) * scale + shift (per output channel), in the weight's dtype."""
    axis_shape = [1] * weight.dim()
    axis_shape[1 if transposed else 0] = -1
    folded_w = (weight.double() * scale.reshape(axis_shape)).to(weight.dtype)
    b = bias.double() if bias is not None else torch.zeros_like(scale)
    return folded_w, (b * scale + shift).to(weight.dtype)
