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


# (batch, channels, hidden, side): 7x7 = 49 pixels (a partial 32-pixel tile), 14x14 = 196 (the largest that takes
# the kernel), channels off the 8 K slices (61) and hidden off the 4-channel tile (98), batch 2 (workgroup z)
CASES = [(1, 61, 98, 7), pytest.param(2, 32, 96, 14, marks=pytest.mark.slow)]


@pytest.mark.parametrize(("batch", "c", "hidden", "side"), CASES)
def test_pointwise_small_matches_eager(batch, c, hidden, side, vk_check, vk_shaders, vk_randomize_bn):
    torch.manual_seed(c)
    model = Block(c, hidden).eval()
    vk_randomize_bn(model)
    x = torch.randn(batch, c, side, side)
    edge = vk_check(model, (x,))
    assert vk_shaders(edge, False) == ["conv2d_1x1_small", "conv2d_1x1_small", "copy"]


# (channels, side): 600 channels split in 32 K slices of 8 pixels per workgroup (49 pixels: a 1-pixel tail);
# 300 in 16 slices of 16 pixels
@pytest.mark.parametrize(("c", "side"), [(600, 7), pytest.param(300, 14, marks=pytest.mark.slow)])
def test_pointwise_long_k_matches_eager(c, side, vk_check, vk_shaders):
    torch.manual_seed(c)
    model = nn.Sequential(nn.Conv2d(c, 26, 1), nn.ReLU6()).eval()
    edge = vk_check(model, (torch.randn(1, c, side, side),))
    assert vk_shaders(edge, False) == ["conv2d_1x1_small", "copy"]


def test_pointwise_past_the_pixel_limit_takes_the_gemm_tile(vk_shaders, vk_lower):
    """15x15 = 225 pixels: the GEMM tile (the kernel's workgroups would each walk K for 32 pixels only)."""
    edge = vk_lower(nn.Conv2d(16, 24, 1).eval(), (torch.randn(1, 16, 15, 15),))
    assert "conv2d_1x1_small" not in vk_shaders(edge, False)
