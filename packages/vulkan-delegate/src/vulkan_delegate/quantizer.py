"""VulkanQuantizer: linear layers with 8-bit or 4-bit symmetric weights (per output channel, or grouped
along K), weight-only with float activations, or with dynamically quantized 8-bit activations (one
scale per row, computed per call). A source transform: `VulkanQuantizer(bits=4, group_size=32).quantize(m)`
replaces each nn.Linear with a call of the `vulkan_delegate::linear_q` op, whose eager implementation is
the dequantized reference the GPU shader (`linear_q`) is checked against.
"""

from __future__ import annotations

import copy

import torch
from torch import nn


@torch.library.custom_op("vulkan_delegate::linear_q", mutates_args=())
def linear_q(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None,
             group_size: int, dynamic_act: bool) -> torch.Tensor:
    """y = act(x) @ (qweight * scales).T + bias; qweight int8 [N, K] (4-bit values in [-8, 7] for 4 bits),
    scales [N, K // group_size]; act quantizes each row of x to int8 when `dynamic_act`."""
    w = qweight.float() * scales.float().repeat_interleave(group_size, dim=1)
    if dynamic_act:
        s = x.abs().amax(-1, keepdim=True).clamp_min(1e-12) / 127.0
        x = torch.clamp(torch.round(x / s), -127, 127) * s
    y = x @ w.t()
    return y + bias if bias is not None else y


@linear_q.register_fake
def _(x, qweight, scales, bias, group_size, dynamic_act):
    return x.new_empty((*x.shape[:-1], qweight.shape[0]))


class QuantizedLinear(nn.Module):
    """nn.Linear with symmetric integer weights; forward is the dequantized reference."""

    def __init__(self, linear: nn.Linear, bits: int, group_size: int | None, dynamic_act: bool) -> None:
        super().__init__()
        w = linear.weight.detach().float()
        n, k = w.shape
        g = k if group_size is None else group_size
        if k % g:
            raise ValueError(f"group_size={g} must divide in_features={k}")
        qmax = 2 ** (bits - 1) - 1
        grouped = w.reshape(n, k // g, g)
        scales = grouped.abs().amax(-1).clamp_min(1e-12) / qmax
        q = torch.clamp(torch.round(grouped / scales[..., None]), -qmax - 1, qmax).reshape(n, k)
        self.register_buffer("qweight", q.to(torch.int8))
        self.register_buffer("scales", scales)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach(), requires_grad=False)
        self.group_size, self.dynamic_act, self.bits = g, dynamic_act, bits

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.vulkan_delegate.linear_q(x, self.qweight, self.scales, self.bias, self.group_size,
                                                  self.dynamic_act)


class VulkanQuantizer:
    """Quantize the linear layers of a model for the Vulkan delegate.

    bits: 8 or 4 (symmetric, [-2^(b-1), 2^(b-1) - 1]); group_size: None (one scale per output channel)
    or a divisor of in_features; dynamic_activations: also quantize activations to int8 per row per call.
    """

    def __init__(self, bits: int = 8, group_size: int | None = None, dynamic_activations: bool = False) -> None:
        if bits not in (4, 8):
            raise ValueError(f"bits={bits}: the Vulkan delegate stores 8-bit or 4-bit weights")
        self.bits, self.group_size, self.dynamic_activations = bits, group_size, dynamic_activations

    def quantize(self, model: nn.Module) -> nn.Module:
        """A copy of `model` with every nn.Linear replaced by a QuantizedLinear."""
        model = copy.deepcopy(model)
        for name, child in list(model.named_modules()):
            for attr, sub in list(child.named_children()):
                if isinstance(sub, nn.Linear):
                    setattr(child, attr, QuantizedLinear(sub, self.bits, self.group_size, self.dynamic_activations))
            del name
        return model
