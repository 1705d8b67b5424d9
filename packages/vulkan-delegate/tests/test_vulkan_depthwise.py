"""The depthwise kernel (conv2d_dw.comp, issue 19): 4 adjacent outputs of a channel row per invocation, the
3-wide stride-1/2 windows from registers, any other window by the generic tap loop; bias, a folded batch
norm and the clamp in its epilogue. Widths that leave 1..3 outputs in the last group of 4, padding on
every side, dilation, batch 2. Eager PyTorch is the reference: FP32 1e-4, FP16 1e-2 relative."""

from __future__ import annotations

import pytest
import torch
from executorch.exir import to_edge
from torch import nn

from vulkan_delegate.lower import lower_program


def r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed + sum(shape)))


class DepthwiseStack(nn.Module):
    """3x3 stride 1 + BN + ReLU6 (OW 10: 2 left in the last 4), 3x3 stride 2 (OW 5), 5x5 dilation 2
    (generic loop), 1x3 stride (1, 2) without bias, a 1-D depthwise conv."""

    def __init__(self, c: int = 6) -> None:
        super().__init__()
        self.dw1, self.bn = nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False), nn.BatchNorm2d(c)
        self.bn.running_mean.uniform_(-0.5, 0.5)
        self.bn.running_var.uniform_(0.5, 1.5)
        self.dw2 = nn.Conv2d(c, c, 3, stride=2, padding=1, groups=c)
        self.dw3 = nn.Conv2d(c, c, 5, padding=4, dilation=2, groups=c)
        self.dw4 = nn.Conv2d(c, c, (1, 3), stride=(1, 2), padding=(0, 1), groups=c, bias=False)
        self.dw1d = nn.Conv1d(c, c, 3, padding=1, groups=c)

    def forward(self, x):
        a = torch.nn.functional.relu6(self.bn(self.dw1(x)))
        b = self.dw4(self.dw3(self.dw2(a)))
        return self.dw1d(b.flatten(2))


@pytest.mark.parametrize("fp16", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_depthwise_kernel(fp16, vk_check):
    edge = vk_check(DepthwiseStack().eval(), (r(2, 6, 9, 10),), fp16=fp16)
    delegated = edge.exported_program().graph_module.lowered_module_0.original_module
    shaders = [d.shader for d in lower_program(delegated, fp16=False).dispatches]
    assert [s for s in shaders if s.startswith("conv")] == ["conv2d_dw_f32"] * 5  # BN and ReLU6 folded


@pytest.mark.slow
def test_depthwise_kernel_is_chosen_for_groups_equal_channels(monkeypatch):
    """groups == C == OC: conv2d_dw, with the batch norm and ReLU6 folded (one dispatch); a grouped conv
    (2 channels per group) and a channel multiplier keep conv2d; VKDG_DEPTHWISE=0 the old path."""
    def shaders(model, x):
        return [d.shader for d in lower_program(to_edge(torch.export.export(model.eval(), (x,))).exported_program(),
                                                False).dispatches if d.shader.startswith("conv")]

    x = r(1, 6, 9, 10)
    grouped = nn.Sequential(nn.Conv2d(6, 6, 3, groups=3), nn.Conv2d(6, 12, 3, groups=6),
                            nn.Conv2d(12, 12, 3, groups=12), nn.BatchNorm2d(12), nn.ReLU6())
    assert shaders(grouped, x) == ["conv2d_f32", "conv2d_f32", "conv2d_dw_f32"]
    monkeypatch.setenv("VKDG_DEPTHWISE", "0")
    assert shaders(grouped, x) == ["conv2d_f32"] * 3
