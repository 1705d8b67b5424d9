"""Op table: convolutions and matrix products (FP) vs eager on the TOSA reference model."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from arm_tosa_core.testing import FnModule as Fn
from arm_tosa_core.testing import check_lowering

torch.manual_seed(0)


def _param(*shape):
    """A frozen parameter: weights reach the lowering as parameters, not buffers."""
    return nn.Parameter(torch.randn(*shape), requires_grad=False)


CONV_CASES = [
    ("conv2d_basic", nn.Conv2d(3, 8, 3), (1, 3, 9, 9)),
    ("conv2d_stride_pad", nn.Conv2d(4, 6, 3, stride=2, padding=1), (2, 4, 10, 10)),
    ("conv2d_stride_uneven", nn.Conv2d(4, 6, 3, stride=2, padding=0), (1, 4, 10, 10)),
    ("conv2d_dilation", nn.Conv2d(3, 4, 3, dilation=2, padding=2), (1, 3, 12, 12)),
    # off-centre taps past the input read only padding: lowered as 1x1 / 3x1 kernels (drop_padding_taps)
    ("conv2d_dilation_past_input", nn.Conv2d(3, 4, 3, dilation=(8, 2), padding=(8, 2), stride=(1, 2)), (1, 3, 6, 7)),
    ("conv2d_depthwise_dilation_past_input", nn.Conv2d(4, 4, 3, dilation=5, padding=5, groups=4), (1, 4, 5, 4)),
    ("conv2d_nobias_rect", nn.Conv2d(3, 5, (1, 3), bias=False, padding=(0, 1)), (1, 3, 6, 7)),
    ("conv2d_depthwise", nn.Conv2d(6, 6, 3, padding=1, groups=6), (1, 6, 8, 8)),
    ("conv2d_depthwise_mult", nn.Conv2d(4, 8, 3, padding=1, groups=4), (1, 4, 8, 8)),
    ("conv2d_grouped", nn.Conv2d(8, 6, 3, padding=1, groups=2), (1, 8, 7, 7)),
    ("conv1d", nn.Conv1d(4, 6, 3, padding=1), (2, 4, 16)),
    ("conv1d_stride", nn.Conv1d(4, 6, 5, stride=2, bias=False), (1, 4, 20)),
    ("conv_transpose2d", nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1), (1, 4, 5, 5)),
    ("conv_transpose2d_plain", nn.ConvTranspose2d(3, 2, 2, stride=2), (1, 3, 4, 4)),
    ("conv_transpose2d_grouped", nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, groups=2), (1, 4, 5, 5)),
    ("conv_transpose2d_depthwise", nn.ConvTranspose2d(3, 3, 2, stride=2, groups=3), (1, 3, 4, 4)),
    ("conv2d_same_even_kernel", nn.Conv2d(3, 4, 4, padding="same"), (1, 3, 7, 6)),
    ("conv2d_same_dilated", nn.Conv2d(3, 4, 3, padding="same", dilation=2), (1, 3, 8, 8)),
    ("conv2d_valid", nn.Conv2d(3, 4, 3, padding="valid"), (1, 3, 6, 6)),
    ("conv1d_same", nn.Conv1d(3, 4, 4, padding="same"), (2, 3, 9)),
    ("conv2d_reflect", nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), (1, 3, 6, 5)),
    ("conv2d_reflect_rect", nn.Conv2d(3, 4, (3, 5), padding=(1, 2), padding_mode="reflect"), (1, 3, 6, 5)),
    ("conv2d_replicate", nn.Conv2d(3, 4, 3, padding=2, padding_mode="replicate"), (1, 3, 5, 5)),
    ("conv2d_circular", nn.Conv2d(3, 4, 3, padding=1, padding_mode="circular"), (2, 3, 5, 6)),
    ("conv1d_circular", nn.Conv1d(3, 4, 3, padding=1, padding_mode="circular"), (1, 3, 8)),
    ("conv3d", nn.Conv3d(3, 4, 3, padding=1), (1, 3, 4, 5, 5)),
    ("conv3d_stride_dilation", nn.Conv3d(2, 4, (1, 3, 3), stride=(1, 2, 2), dilation=(1, 2, 1)), (2, 2, 3, 9, 8)),
    ("conv3d_same", nn.Conv3d(2, 3, 2, padding="same", bias=False), (1, 2, 3, 4, 4)),
]


@pytest.mark.parametrize("name,module,shape", CONV_CASES, ids=[c[0] for c in CONV_CASES])
def test_convolution(name, module, shape):
    check_lowering(module, (torch.randn(shape),), case=name)


MATMUL_CASES = [
    ("linear", nn.Linear(16, 8), [(4, 16)]),
    ("linear_3d_nobias", nn.Linear(16, 8, bias=False), [(2, 5, 16)]),
    ("mm", Fn(lambda s, a, b: a @ b), [(4, 6), (6, 3)]),
    ("bmm", Fn(lambda s, a, b: torch.bmm(a, b)), [(2, 4, 6), (2, 6, 3)]),
    ("matmul_4d", Fn(lambda s, a, b: a @ b), [(2, 3, 4, 5), (2, 3, 5, 2)]),
    ("matmul_broadcast_weight", Fn(lambda s, a: a @ s.w, w=_param(6, 3)), [(2, 4, 6)]),
    ("addmm", Fn(lambda s, a, b: torch.addmm(s.bias, a, b), bias=_param(3)), [(4, 6), (6, 3)]),
]


@pytest.mark.parametrize("name,module,shapes", MATMUL_CASES, ids=[c[0] for c in MATMUL_CASES])
def test_matmul(name, module, shapes):
    check_lowering(module, tuple(torch.randn(s) for s in shapes), case=name)


def test_conv_chain_needs_only_boundary_transposes():
    """Two convs with activations between them run NHWC end to end: one TRANSPOSE in, one out."""
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1),
                          nn.Hardtanh(0, 6))
    result = check_lowering(model, (torch.randn(1, 3, 8, 8),), case="chain")
    ops = result.report.delegates[0].ops
    assert ops.get("TRANSPOSE", 0) == 2, ops
    assert F is not None
