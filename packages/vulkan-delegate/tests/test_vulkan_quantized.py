"""Quantized linear (VulkanQuantizer) vs its own dequantized reference: within 1e-3 relative."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from vulkan_delegate import VulkanQuantizer


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 48)
        self.fc2 = nn.Linear(48, 16, bias=False)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.mark.parametrize("bits,group,dynamic", [(8, None, False), (4, 16, False), (8, 16, True), (4, None, True)])
def test_quantized_linear(vk_check, bits, group, dynamic):
    torch.manual_seed(bits + (group or 0))
    q = VulkanQuantizer(bits=bits, group_size=group, dynamic_activations=dynamic).quantize(MLP().eval())
    x = torch.randn(2, 5, 64)
    vk_check(q, (x,), tol=1e-3)
    w = q.fc1.qweight
    assert w.min() >= -(2 ** (bits - 1)) and w.max() <= 2 ** (bits - 1) - 1


def test_quantized_linear_fp16(vk_check):
    q = VulkanQuantizer(bits=8, group_size=16).quantize(MLP().eval())
    vk_check(q, (torch.randn(3, 64),), fp16=True)
