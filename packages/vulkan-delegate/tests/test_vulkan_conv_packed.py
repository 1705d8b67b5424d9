"""Packed fp16 convolutions (issue 19): the input copied channel-last with its padding inside
(conv2d_pack.comp), the weights re-ordered to (kh, kw, c) at lowering, then the 128x128 implicit-GEMM
block (`f16big`; on tensor cores `f16bigcoop`, whose im2col loads are then 128-bit), split over K where
the output gives few blocks. Here (lavapipe) the block runs as the 64x64 tile over its quarters; the
same index math feeds the tensor-core loads, whose numerics bench/vulkan_gpu checks on the GPU."""

from __future__ import annotations

import pytest
import torch
from executorch.exir import to_edge
from torch import nn

from vulkan_delegate.lower import lower_program
from vulkan_delegate.ops import conv
from vulkan_delegate.ops.conv import CONV_PACK_ENV, F32_PACK_ENV, packs_conv


def r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _dispatches(model, x, fp16=True):
    """The dispatches `preprocess` would lower the whole model to."""
    return lower_program(to_edge(torch.export.export(model, (x,))).exported_program(), fp16).dispatches


class ConvAct(nn.Module):
    """conv (+ the input as residual) + relu: every epilogue term of conv2d_gemm."""

    def __init__(self, conv: nn.Module, res: bool = False):
        super().__init__()
        self.conv, self.res = conv, res

    def forward(self, x):
        y = self.conv(x)
        return torch.relu(y + x if self.res else y)


def _conv_bn(c: int) -> nn.Module:
    """conv + batch norm with non-trivial statistics (folded into the weights and bias at lowering)."""
    bn = nn.BatchNorm2d(c)
    bn.running_mean.uniform_(-0.5, 0.5)
    bn.running_var.uniform_(0.5, 1.5)
    return nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False), bn)


# C not a multiple of 8 (zero channels in the pack), stride 2, odd and non-square sizes, dilation, a
# 7x7 stem, split-K (K >= 128) and not (K < 128), residual and clamp in either epilogue
PACKED_CASES = {
    # C = 5 -> 8 (C < 8 packs only at 264 128x128 blocks: forced here), K = 72: one split; OC 65 (a 128
    # block's edge), stride 2 + padding, batch 2
    "c5_oc65_stride2": lambda: (ConvAct(nn.Conv2d(5, 65, 3, stride=2, padding=1)), r(2, 5, 17, 16)),
    # K = 16*9 = 144: two K splits (conv2d_splitk adds them, bias, residual, relu)
    "c13_res_split": lambda: (ConvAct(nn.Conv2d(13, 13, 3, padding=1), res=True), r(1, 13, 11, 10)),
    "c8_res_one_split": lambda: (ConvAct(nn.Conv2d(8, 8, 3, padding=1), res=True), r(1, 8, 9, 13)),
    "dilated_rect": lambda: (nn.Conv2d(5, 7, (3, 2), dilation=(2, 1), padding=(2, 1)), r(1, 5, 10, 12)),
    "stem7x7_stride2": lambda: (ConvAct(nn.Conv2d(9, 16, 7, stride=2, padding=3)), r(1, 9, 33, 31)),
    "bn_res_split": lambda: (ConvAct(_conv_bn(24), res=True), r(1, 24, 7, 7)),
    "conv1d": lambda: (nn.Conv1d(12, 20, 5, stride=2, padding=2), r(2, 12, 37)),
    "no_bias_split3": lambda: (nn.Conv2d(40, 24, 3, stride=2, bias=False), r(1, 40, 9, 9)),
    # the batch folded into the GEMM's columns (30 pixels an image: images meet inside a 128 block), split
    # over K: the partials of each image go to its own slice
    "batch3_res_split": lambda: (ConvAct(nn.Conv2d(16, 16, 3, padding=1), res=True), r(3, 16, 5, 6)),
    # batched 1x1 convolutions (packed from PACK_1X1_MIN_TILES tiles, forced here): strided (the pack
    # samples every 2nd pixel), strided and padded, pointwise folded with the residual and 4 K splits
    "1x1_stride2": lambda: (ConvAct(nn.Conv2d(64, 72, 1, stride=2)), r(2, 64, 15, 13)),
    "1x1_pad1_stride2": lambda: (nn.Conv2d(64, 24, 1, stride=2, padding=1, bias=False), r(3, 64, 9, 10)),
    "1x1_res_split4": lambda: (ConvAct(nn.Conv2d(256, 256, 1), res=True), r(3, 256, 7, 7)),
}
DEFAULT = ("c13_res_split", "stem7x7_stride2", "c5_oc65_stride2", "batch3_res_split", "1x1_stride2",
           "1x1_res_split4")


@pytest.mark.parametrize("case", [c if c in DEFAULT else pytest.param(c, marks=pytest.mark.slow)
                                  for c in PACKED_CASES])
def test_packed_conv_matches_eager(case, vk_check, monkeypatch):
    monkeypatch.setattr(conv, "BIG_FROM", 1)  # pack the narrow (C < 8) inputs too
    monkeypatch.setattr(conv, "PACK_1X1_MIN_TILES", 1)  # and small batched 1x1 convolutions
    monkeypatch.setenv("VKDG_WINOGRAD", "0")  # (3x3 stride-1 ones that would split K take fp16 Winograd)
    model, x = PACKED_CASES[case]()
    model.eval()
    shaders = [d.shader for d in _dispatches(model, x)]
    assert shaders[1:3] == ["conv2d_pack_f16", "conv2d_gemm_f16big"], shaders  # (0: the input's cast)
    vk_check(model, (x,), fp16=True)


# fp32 under VKDG_F32_PACK=1: the same pack onto the fp32 128x128 block (`f32big`, vec4 loads of 4 channels of
# a tap); by default odd C (13 -> 16) with split-K and the residual, the other cases slow
DEFAULT32 = ("c13_res_split",)


@pytest.mark.parametrize("case", [c if c in DEFAULT32 else pytest.param(c, marks=pytest.mark.slow)
                                  for c in PACKED_CASES])
def test_packed_fp32_conv_matches_eager(case, vk_check, monkeypatch):
    monkeypatch.setenv(F32_PACK_ENV, "1")
    monkeypatch.setattr(conv, "BIG_FROM", 1)
    monkeypatch.setattr(conv, "PACK_1X1_MIN_TILES", 1)
    model, x = PACKED_CASES[case]()
    model.eval()
    shaders = [d.shader for d in _dispatches(model, x, fp16=False)]
    assert shaders[:2] == ["conv2d_pack_f32", "conv2d_gemm_f32big"], shaders
    vk_check(model, (x,))


def test_packed_conv_lowering(monkeypatch):
    """The pack holds the padding and C rounded up to 8; the weights [OC, KH, KW, CP]; split-K where the
    output gives few blocks; fp32, pointwise stride-1 convs and VKDG_CONV_PACK=0 keep the NCHW GEMM."""
    model, x = PACKED_CASES["c13_res_split"]()
    pack, gemm, splitk = _dispatches(model.eval(), x)[1:4]
    assert pack.push == [1 * 13 * 12 * 16, 13, 11, 10, 16, 13, 12, 1, 1, 1, 1]
    assert gemm.bindings[0] is pack.bindings[1] and list(gemm.bindings[1].shape) == [13, 3, 3, 16]
    assert gemm.push[1:4] == [16, 13, 12] and gemm.push[11:13] == [0, 0]
    assert gemm.push[20:22] == [2, 1] and splitk.shader == "conv2d_splitk_f16"  # 2 splits, packed (batch 1)
    assert _dispatches(model, x, fp16=False)[0].shader.startswith(("conv2d_gemm_f32", "conv2d_wino_f32"))
    for pointwise in (nn.Conv2d(16, 8, 1), nn.Conv2d(16, 8, 1, stride=2)):
        assert "conv2d_pack_f16" not in [d.shader for d in _dispatches(pointwise.eval(), r(1, 16, 5, 5))]
    # K = 40 * 9 = 360: 4 splits of 96 (whole K slices of 32), not 5 of 72 (no empty part)
    assert _dispatches(PACKED_CASES["no_bias_split3"]()[0].eval(), r(1, 40, 9, 9))[2].push[20] == 4
    # fewer than 8 channels: packed only at 264 128x128 blocks (a batch-32 stem, not a batch-1 one)
    assert not packs_conv("f16", [1, 3, 224, 224, 64, 112, 112], 49)
    assert packs_conv("f16", [32, 3, 224, 224, 64, 112, 112], 49)
    assert packs_conv("f16", [1, 8, 56, 56, 64, 56, 56], 9)
    # ResNet-50 b32's 1x1 convolutions: strided ones packed; pointwise ones where the output gives under
    # 264 128x128 blocks (28x28: 512 -> 128) or wastes a block's columns (14x14, 7x7), else NCHW
    assert packs_conv("f16", [32, 256, 56, 56, 512, 28, 28], 1)  # the layer-2 downsample, stride 2
    assert packs_conv("f16", [32, 512, 28, 28, 128, 28, 28], 1, pointwise=True)
    assert packs_conv("f16", [32, 1024, 14, 14, 256, 14, 14], 1, pointwise=True)
    assert packs_conv("f16", [32, 512, 7, 7, 2048, 7, 7], 1, pointwise=True)
    assert not packs_conv("f16", [32, 64, 56, 56, 256, 56, 56], 1, pointwise=True)
    assert not packs_conv("f16", [1, 256, 56, 56, 512, 28, 28], 1)  # batch 1: NCHW
    # strided 1x1: the pack holds the OH x OW samples, the GEMM is 1x1 stride 1 over the folded batch
    monkeypatch.setattr(conv, "PACK_1X1_MIN_TILES", 1)  # (32 64x64 tiles)
    pack, gemm = _dispatches(nn.Conv2d(64, 32, 1, stride=2).eval(), r(32, 64, 9, 9))[1:3]
    assert pack.push == [32 * 5 * 5 * 64, 64, 9, 9, 64, 5, 5, 0, 0, 2, 2]
    assert gemm.push[1:4] == [64, 5, 5] and gemm.push[9:13] == [1, 1, 0, 0] and gemm.threads == (32 * 25, 32, 1)
    assert gemm.push[21] == 2  # packed, the batch folded into the columns
    monkeypatch.setenv(CONV_PACK_ENV, "0")
    assert "conv2d_pack_f16" not in [d.shader for d in _dispatches(model, x)]
