"""Reshapes in a value's own layout (`layout.reshape_in_place`, used by every view/reshape rule): a split or
merge of dims costs at most one TRANSPOSE, never a trip through PyTorch's (NCHW) layout and back."""

import pytest
import torch
from torch import nn

from arm_tosa_core import layout
from arm_tosa_core.testing import check_lowering
from arm_tosa_core.tosa_inspect import tosa_op_counts


def test_channel_shuffle_on_nhwc_is_one_regrouping():
    # logical [1, C=32, H, W] stored NHWC -> view [1, g=2, 16, H, W]: a split in place, no data moves
    first, perm = layout.reshape_in_place((1, 32, 8, 8), layout.NCHW_TO_NHWC, (1, 2, 16, 8, 8))
    assert first == (0, 2, 3, 1) and perm == (0, 3, 4, 1, 2)
    # after transpose(1, 2) the merge back needs the channel halves swapped: one TRANSPOSE, result NHWC
    swapped = layout.after_permute(perm, (0, 2, 1, 3, 4))
    first, perm = layout.reshape_in_place((1, 16, 2, 8, 8), swapped, (1, 32, 8, 8))
    assert first == (0, 3, 4, 1, 2) and first != swapped and perm == (0, 2, 3, 1)
    # a flatten of NHWC still goes through PyTorch's order (the data order torch defines)
    assert layout.reshape_in_place((1, 32, 8, 8), (0, 2, 3, 1), (1, 2048)) == ((0, 1, 2, 3), (0, 1))
    assert layout.reshape_groups((2, 3, 4), (6, 5)) is None


class ChannelShuffle(nn.Module):
    """ShuffleNetV2's shuffle between two convolutions (which want NHWC)."""

    def __init__(self, channels: int, groups: int) -> None:
        super().__init__()
        self.a, self.b, self.groups = nn.Conv2d(3, channels, 1), nn.Conv2d(channels, 4, 1), groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.a(x)
        b, c, h, w = x.shape
        x = x.view(b, self.groups, c // self.groups, h, w).transpose(1, 2).contiguous().view(b, c, h, w)
        return self.b(x)


@pytest.mark.parametrize("channels,groups", [pytest.param(12, 3, marks=pytest.mark.slow), (8, 2)])
def test_channel_shuffle_lowers_with_one_transpose(channels, groups, tmp_path):
    from arm_tosa_core import TosaCompileSpec, TOSAPartitioner

    torch.manual_seed(0)
    spec = TosaCompileSpec("TOSA-1.0+FP").dump_intermediate_artifacts_to(tmp_path)
    check_lowering(ChannelShuffle(channels, groups), (torch.randn(1, 3, 5, 7),), partitioner=TOSAPartitioner(spec),
                   rtol=1e-5)
    (graph,) = tmp_path.glob("*.tosa")
    # NCHW -> NHWC at the input, the shuffle, NHWC -> NCHW at the output (before: 5, via NCHW and back)
    assert tosa_op_counts(graph)["TRANSPOSE"] == 3


class HeadMerge(nn.Module):
    """An attention's head merge before its output projection: [1, heads, tokens, dim] -> [1, tokens, heads * dim]."""

    def __init__(self, heads: int = 2, dim: int = 16) -> None:
        super().__init__()
        self.proj = nn.Linear(heads * dim, heads * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, h, s, d = x.shape
        return self.proj(x.transpose(1, 2).reshape(b, s, h * d))


def test_head_merge_is_one_transpose(tmp_path):
    """The merge needs a TRANSPOSE in the value's own layout too, so it happens in PyTorch's order: one
    TRANSPOSE, and the linear reads the identity layout (before: a TRANSPOSE to [1, h, d, s], a RESHAPE and
    a second TRANSPOSE back; hf:vit on U85 paid 911 NPU cycles for them)."""
    from arm_tosa_core import TosaCompileSpec, TOSAPartitioner

    torch.manual_seed(0)
    spec = TosaCompileSpec("TOSA-1.0+FP").dump_intermediate_artifacts_to(tmp_path)
    check_lowering(HeadMerge(), (torch.randn(1, 2, 17, 16),), partitioner=TOSAPartitioner(spec), rtol=1e-5)
    (graph,) = tmp_path.glob("*.tosa")
    assert tosa_op_counts(graph)["TRANSPOSE"] == 1
