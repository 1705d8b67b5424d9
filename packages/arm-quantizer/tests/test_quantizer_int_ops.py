"""INT op table: the TOSA INT result is within 1 LSB of the PT2E fake-quantized module."""

import pytest
import torch
import torch.nn.functional as F
from quant_harness import check_int
from torch import nn

from arm_tosa_core.testing import FnModule as Fn

torch.manual_seed(0)


CASES = [
    ("conv", nn.Conv2d(3, 8, 3, padding=1), [(1, 3, 8, 8)]),
    ("conv_stride_relu", nn.Sequential(nn.Conv2d(4, 8, 3, stride=2), nn.ReLU()), [(1, 4, 9, 9)]),
    ("conv_relu6", nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU6()), [(2, 4, 6, 6)]),
    ("depthwise", nn.Sequential(nn.Conv2d(6, 6, 3, padding=1, groups=6), nn.Hardtanh(0, 6)), [(1, 6, 7, 7)]),
    ("grouped", nn.Conv2d(8, 4, 3, padding=1, groups=2), [(1, 8, 6, 6)]),
    ("conv1d", nn.Conv1d(4, 6, 3), [(1, 4, 12)]),
    ("conv_transpose", nn.ConvTranspose2d(4, 3, 2, stride=2), [(1, 4, 4, 4)]),
    ("linear", nn.Linear(16, 8), [(4, 16)]),
    ("linear_3d_relu", nn.Sequential(nn.Linear(16, 8), nn.ReLU()), [(2, 3, 16)]),
    ("add", Fn(lambda s, a, b: a + b), [(1, 4, 5, 5), (1, 4, 5, 5)]),
    ("add_broadcast_relu", Fn(lambda s, a, b: F.relu(a + b)), [(2, 3, 4), (4,)]),
    ("sub", Fn(lambda s, a, b: a - b), [(3, 5), (3, 5)]),
    ("mul", Fn(lambda s, a, b: a * b), [(2, 8), (2, 8)]),
    ("residual", Fn(lambda s, x: s.c(x) + x, c=nn.Conv2d(4, 4, 3, padding=1)), [(1, 4, 6, 6)]),
    ("cat", Fn(lambda s, a, b: torch.cat([a, b], 1)), [(1, 2, 4, 4), (1, 3, 4, 4)]),
    ("view_permute", Fn(lambda s, x: s.l(x.permute(0, 2, 1).reshape(2, -1)), l=nn.Linear(24, 4)),
     [(2, 4, 6)]),
    ("bmm", Fn(lambda s, a, b: torch.bmm(a, b)), [(2, 3, 4), (2, 4, 5)]),
    ("sigmoid", Fn(lambda s, x: torch.sigmoid(x)), [(2, 16)]),
    ("tanh", Fn(lambda s, x: torch.tanh(x)), [(2, 16)]),
    ("gelu", Fn(lambda s, x: F.gelu(x)), [(2, 16)]),
    ("silu", Fn(lambda s, x: F.silu(x)), [(2, 16)]),
    ("hardswish", Fn(lambda s, x: F.hardswish(x)), [(2, 16)]),
    ("exp", Fn(lambda s, x: torch.exp(x)), [(2, 16)]),
    ("conv_hardswish", nn.Sequential(nn.Conv2d(3, 8, 1), nn.Hardswish()), [(1, 3, 5, 5)]),
]


@pytest.mark.parametrize("name,module,shapes", CASES, ids=[c[0] for c in CASES])
def test_int_op_within_one_lsb(name, module, shapes):
    inputs = tuple(torch.randn(s) for s in shapes)
    _, report, lsb, _ = check_int(module, inputs, case=name)
    assert report.delegates, f"{name}: nothing delegated"
    assert lsb <= 1.0


def test_clamp_after_conv_is_fused_into_rescale():
    """conv -> ReLU6 lowers to CONV2D + RESCALE only: the clamp is implied by the output range."""
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU6())
    _, report, lsb, _ = check_int(model, (torch.randn(1, 3, 8, 8),))
    ops = report.delegates[0].ops
    assert "CLAMP" not in ops and ops.get("RESCALE") == 1, ops
    assert lsb == 0.0
