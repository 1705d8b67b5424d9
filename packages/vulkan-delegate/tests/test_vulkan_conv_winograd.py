"""3x3 stride-1 convolutions by Winograd F(2x2, 3x3) (conv2d_wino.comp, issue 19: ResNet-18's 3x3 convs):
transformed 4x4 input patches times filters transformed at lowering, bias (a folded batch norm), the residual
add and the clamp in its epilogue, split over input channels (conv2d_splitk sums the parts) where the output
gives few workgroups; fp16 ones only where it saves dispatches (ops/conv.py _winograd_f16). Eager fp32 is the reference, NaN-aware, at 1e-5 relative (ten times inside the delegate's
fp32 bound: the transforms' additions must not cost accuracy), and the lowered graph must use the kernel."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

TIGHT = 1e-5


class BasicBlock(nn.Module):
    """ResNet's basic block: conv3x3 + BN + ReLU, conv3x3 + BN, + the input, ReLU."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


def test_winograd_basic_block_matches_eager(vk_check, vk_shaders, vk_randomize_bn):
    """64 channels at 9x7 (odd sides: partial 2x2 tiles and a partial 16-tile block): 20 tiles x 64 channels
    give 8 workgroups, so the input channels split in 2 and conv2d_splitk adds the parts, the bias, the
    residual and the ReLU."""
    torch.manual_seed(0)
    model = BasicBlock(64).eval()
    vk_randomize_bn(model)
    edge = vk_check(model, (torch.randn(1, 64, 9, 7),), tol=TIGHT)
    assert vk_shaders(edge, False) == ["conv2d_wino", "conv2d_splitk", "conv2d_wino", "conv2d_splitk", "copy"]


# (batch, in, out, height, width, padding, bias): no padding, 2 images and 3 input channels (one 16-channel step,
# so one part: the epilogue in conv2d_wino), 19x17 outputs (90 tiles: a partial 16-tile block); padding 2 (tiles
# reading past both edges), no bias, output channels off the 16-channel block
CASES = [(2, 3, 21, 21, 19, 0, True), pytest.param(1, 19, 17, 6, 11, 2, False, marks=pytest.mark.slow)]


@pytest.mark.parametrize(("batch", "c", "oc", "h", "w", "padding", "bias"), CASES)
def test_winograd_conv_matches_eager(batch, c, oc, h, w, padding, bias, vk_check, vk_shaders):
    torch.manual_seed(c)
    model = nn.Sequential(nn.Conv2d(c, oc, 3, padding=padding, bias=bias), nn.ReLU6()).eval()
    edge = vk_check(model, (torch.randn(batch, c, h, w),), tol=TIGHT)
    assert vk_shaders(edge, False) == ["conv2d_wino", "copy"]


class OtherConvs(nn.Module):
    """3x3 convolutions that are not Winograd's F(2x2, 3x3): strided, dilated, grouped."""

    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(8, 8, 3, padding=1, **kw)
                                    for kw in ({"stride": 2}, {"dilation": 2}, {"groups": 2})])

    def forward(self, x):
        return [c(x) for c in self.convs]


def test_other_3x3_convs_keep_the_gemm(vk_lower, vk_shaders):
    edge = vk_lower(OtherConvs().eval(), (torch.randn(1, 8, 12, 12),))
    assert "conv2d_wino" not in vk_shaders(edge, False)


def test_fp16_winograd_where_the_gemm_would_split(vk_check, vk_lower, vk_shaders):
    """fp16 takes Winograd (fp32 arithmetic, fp16 storage) where the packed tensor-core GEMM would split K and
    Winograd fills its workgroups unsplit: ResNet-18 b1's 56x56 convs, one dispatch for pack + GEMM parts + sum.
    Its 28x28 ones (Winograd would split too) keep the packed GEMM. Eager fp32 is the reference at the fp16
    bound (vk_check's 1e-2)."""
    torch.manual_seed(1)  # 16 -> 64 channels at 56x56: 196 Winograd workgroups; K = 144, 2 parts on the GEMM
    model = nn.Sequential(nn.Conv2d(16, 64, 3, padding=1), nn.ReLU()).eval()
    edge = vk_check(model, (torch.randn(1, 16, 56, 56),), fp16=True)
    assert vk_shaders(edge, True) == ["copy", "conv2d_wino", "copy"]  # (fp32 input to fp16 and back)
    conv28 = nn.Conv2d(128, 128, 3, padding=1).eval()
    assert "conv2d_pack" in vk_shaders(vk_lower(conv28, (torch.randn(1, 128, 28, 28),), fp16=True), True)


@pytest.mark.slow
def test_winograd_off_and_fp16_keep_the_gemm(vk_lower, vk_shaders, monkeypatch):
    """fp16 keeps the (tensor-core) GEMM tile where it would not split K (a small conv: K = 72, one part);
    VKDG_WINOGRAD=0 gives fp32 the implicit GEMM, for the A/B."""
    conv, x = nn.Conv2d(8, 8, 3, padding=1).eval(), torch.randn(1, 8, 12, 12)
    assert "conv2d_wino" not in vk_shaders(vk_lower(conv, (x,), fp16=True), True)
    monkeypatch.setenv("VKDG_WINOGRAD", "0")
    assert vk_shaders(vk_lower(conv, (x,)), False)[0] == "conv2d_gemm"
