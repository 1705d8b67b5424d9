"""Pointwise convolutions of few pixels (conv2d_1x1_small.comp, issue 19: MobileNetV2's 14x14 and 7x7 1x1
layers): K split over 8 slices inside a workgroup of 4 output channels x 32 pixels, bias (a folded batch norm),
the residual add and the clamp in its epilogue. Eager fp32 is the reference (1e-4 relative, NaN-aware), and
the lowered graph must use the kernel, so a case cannot pass on another path."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    """MobileNetV2's inverted-residual tail: 1x1 expand + BN + ReLU6, 1x1 project + BN, + the input."""

    def __init__(self, c: int, hidden: int) -> None:
        super().__init__()
        self.expand, self.bn1 = nn.Conv2d(c, hidden, 1, bias=False), nn.BatchNorm2d(hidden)
        self.project, self.bn2 = nn.Conv2d(hidden, c, 1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        return x + self.bn2(self.project(F.relu6(self.bn1(self.expand(x)))))


def _randomize_bn(model: nn.Module) -> None:
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)


# (batch, channels, hidden, side): 7x7 = 49 pixels (a partial 32-pixel tile), 14x14 = 196 (the largest that takes
# the kernel), channels off the 8 K slices (61) and hidden off the 4-channel tile (98), batch 2 (workgroup z)
CASES = [(1, 61, 98, 7), pytest.param(2, 32, 96, 14, marks=pytest.mark.slow)]


@pytest.mark.parametrize(("batch", "c", "hidden", "side"), CASES)
def test_pointwise_small_matches_eager(batch, c, hidden, side, vk_check, vk_shaders):
    torch.manual_seed(c)
    model = Block(c, hidden).eval()
    _randomize_bn(model)
    x = torch.randn(batch, c, side, side)
    edge = vk_check(model, (x,))
    assert vk_shaders(edge, False) == ["conv2d_1x1_small", "conv2d_1x1_small", "copy"]


def test_pointwise_past_the_pixel_limit_takes_the_gemm_tile(vk_shaders, vk_lower):
    """15x15 = 225 pixels: the GEMM tile (the kernel's workgroups would each walk K for 32 pixels only)."""
    edge = vk_lower(nn.Conv2d(16, 24, 1).eval(), (torch.randn(1, 16, 15, 15),))
    assert "conv2d_1x1_small" not in vk_shaders(edge, False)
