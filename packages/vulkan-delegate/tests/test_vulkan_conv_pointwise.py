"""Pointwise convolutions of few pixels or few GEMM tiles (conv2d_1x1_small.comp, issue 19: MobileNetV2's 1x1
layers from 56x56 down at batch 1): K split over 8 slices inside a workgroup of 4 output channels x 32 pixels,
bias (a folded batch norm), the residual add and the clamp in its epilogue. Eager fp32 is the reference (1e-4 relative, NaN-aware), and
the lowered graph must use the kernel, so a case cannot pass on another path."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from executorch.exir.lowered_backend_module import executorch_call_delegate
from torch import nn

from arm_tosa_core.environ import environ_set
from vulkan_delegate.lower import lower_program


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


# (batch, channels, hidden, side): MobileNetV2 b1's 56x56 block (24 -> 144 -> 24, 3136 pixels: 98 workgroups of
# 32 pixels), past the 196-pixel limit, taken because the 64x64 GEMM tile gives it 3 x 49 and 1 x 49 tiles only
@pytest.mark.parametrize(("batch", "c", "hidden", "side"), [(1, 24, 144, 56)])
def test_pointwise_of_few_gemm_tiles_takes_the_kernel(batch, c, hidden, side, vk_check, vk_shaders,
                                                      vk_randomize_bn):
    torch.manual_seed(side)
    model = Block(c, hidden).eval()
    vk_randomize_bn(model)
    edge = vk_check(model, (torch.randn(batch, c, side, side),))
    assert vk_shaders(edge, False) == ["conv2d_1x1_small", "conv2d_1x1_small", "copy"]
    # the expansion gives 98 x 36 workgroups at 4 channels: 8 per workgroup; the projection (98 x 6) keeps 4
    assert [d.push[9] for d in lower_program(model_of(edge), False).dispatches[:2]] == [8, 4]


def model_of(edge) -> torch.fx.GraphModule:
    """The one Vulkan partition's exported program (as conftest's dispatch_shaders finds it)."""
    ep = edge.exported_program()
    call = next(n for n in ep.graph.nodes if n.target is executorch_call_delegate)
    return getattr(ep.graph_module, call.args[0].target).original_module


# (channels, hidden, side): 8 output channels per workgroup (VKDG_CONV1X1_OCT=8): hidden 98 and 61 off the
# 8-channel tile, 600 channels in 32 K slices
@pytest.mark.parametrize(("c", "hidden", "side"), [(61, 98, 7), pytest.param(600, 61, 7, marks=pytest.mark.slow)])
def test_pointwise_eight_channels_per_workgroup_matches_eager(c, hidden, side, vk_check, vk_shaders,
                                                              vk_randomize_bn):
    torch.manual_seed(hidden)
    model = Block(c, hidden).eval()
    vk_randomize_bn(model)
    with environ_set({"VKDG_CONV1X1_OCT": "8"}):
        edge = vk_check(model, (torch.randn(1, c, side, side),))
        assert vk_shaders(edge, False) == ["conv2d_1x1_small", "conv2d_1x1_small", "copy"]


def test_pointwise_of_many_gemm_tiles_takes_the_gemm_tile(vk_shaders, vk_lower):
    """MobileNetV2 b1's features.2.conv.0 (16 -> 96 at 112x112: 2 x 196 = 392 64x64 tiles, past
    POINTWISE_SMALL_BELOW_TILES) keeps the GEMM tile; so does the 56x56 block above under
    VKDG_CONV1X1_SMALL_TILES=0 (the pixel limit alone, the rule before)."""
    edge = vk_lower(nn.Conv2d(16, 96, 1).eval(), (torch.randn(1, 16, 112, 112),))
    assert vk_shaders(edge, False) == ["conv2d_gemm", "copy"]
    with environ_set({"VKDG_CONV1X1_SMALL_TILES": "0"}):
        edge = vk_lower(nn.Conv2d(144, 24, 1).eval(), (torch.randn(1, 144, 56, 56),))
        assert vk_shaders(edge, False) == ["conv2d_gemm", "copy"]
