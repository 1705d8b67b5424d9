"""Standalone batch norm, resize, dilated max pooling and convolution variants on Ethos-U.

Each case is quantized, partitioned for the target, compiled by vela with no CPU operator and no CPU
compute left (only the float boundary's quantize/dequantize), and matches the fake-quantized model
within 1 LSB on the reference model. The cases vela cannot compile stay on the CPU with a reason.
"""

import arm_ethosu_test_flow as flow
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from arm_ethosu import EthosUCompileSpec, ethosu_report
from arm_tosa_core import run_on_reference_model
from arm_tosa_core.testing import FnModule as Fn


def _bn(channels: int) -> nn.BatchNorm2d:
    bn = nn.BatchNorm2d(channels)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        bn.weight.copy_(torch.randn(channels, generator=g))
        bn.bias.copy_(torch.randn(channels, generator=g))
        bn.running_var.copy_(torch.rand(channels, generator=g) + 0.2)
    return bn


def _resize(**kwargs) -> nn.Module:
    return Fn(lambda s, x: F.interpolate(s.c(x), **kwargs), c=nn.Conv2d(3, 4, 1))


torch.manual_seed(0)
CASES = {
    "bn_after_gelu": (nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.GELU(), _bn(8), nn.Conv2d(8, 4, 1)),
                      (1, 3, 8, 8)),
    "nearest_x2": (_resize(scale_factor=2, mode="nearest"), (1, 3, 4, 4)),
    "nearest_x3": (_resize(scale_factor=3, mode="nearest"), (1, 3, 4, 4)),  # U55: copies, no RESIZE
    "bilinear_x2": (_resize(scale_factor=2, mode="bilinear"), (1, 3, 4, 5)),
    "maxpool_dilated": (nn.Sequential(nn.Conv2d(3, 4, 1), nn.MaxPool2d(3, 2, 1, dilation=2)), (1, 3, 11, 10)),
    "conv_reflect": (nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), (1, 3, 6, 6)),
    "conv_circular": (nn.Conv2d(3, 4, 3, padding=1, padding_mode="circular"), (1, 3, 6, 6)),
    "conv_same": (nn.Conv2d(3, 4, 4, padding="same"), (1, 3, 6, 6)),
    "conv3d_depth1": (nn.Conv3d(3, 4, (1, 3, 3), padding=(0, 1, 1)), (1, 3, 4, 5, 5)),
}
# what vela 5.2 cannot compile on U55/U65, with the reason the partitioner gives
U55_CPU = {
    "bilinear_align_corners": (_resize(scale_factor=2, mode="bilinear", align_corners=True), (1, 3, 4, 4),
                               "vela 5.2 compiles no bilinear RESIZE"),
    "nearest_x2_x3": (_resize(scale_factor=(2, 3), mode="nearest"), (1, 3, 4, 4), "integer upscale by"),
    # vela's stream for it upscales both axes by 4 (NPU simulator, 1.36 off)
    "nearest_x2_x4": (_resize(scale_factor=(2, 4), mode="nearest"), (1, 3, 4, 4), "different factors per axis"),
    "conv3d_depth3": (nn.Conv3d(3, 4, 3, padding=1), (1, 3, 4, 5, 5), "kernel depth 1"),
}


def _run(module, shape, target):
    inputs = (torch.randn(shape),)
    quantized = flow.quantize(module, inputs)
    edge = flow.lower(quantized, inputs, EthosUCompileSpec(target).include_host_graph())
    return quantized, inputs, edge


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
@pytest.mark.parametrize("name", list(CASES))
def test_on_npu_within_one_lsb(name, target):
    module, shape = CASES[name]
    quantized, inputs, edge = _run(module, shape, target)
    assert flow.cpu_compute(edge) == {}, f"[{name}] CPU compute: {flow.cpu_compute(edge)}"
    vela = ethosu_report(edge)
    assert len(vela.partitions) == 1 and vela.partitions[0].cpu_ops == 0 and vela.partitions[0].npu_ops >= 1
    with torch.no_grad():
        err = (run_on_reference_model(edge, *inputs) - quantized(*inputs)).abs().max().item()
    assert err <= flow.output_lsb(quantized) * 1.0001, f"[{name}] {err / flow.output_lsb(quantized):.2f} LSB"


@pytest.mark.parametrize("name", list(U55_CPU))
def test_u55_limits_stay_on_cpu_with_reason(name):
    module, shape, reason = U55_CPU[name]
    _, _, edge = _run(module, shape, "ethos-u55-128")
    reasons = list(flow.cpu_compute(edge).values())
    assert any(reason in r for r in reasons), reasons


@pytest.mark.parametrize("name", list(U55_CPU))
def test_u85_takes_what_u55_cannot(name):
    module, shape, _ = U55_CPU[name]
    _, _, edge = _run(module, shape, "ethos-u85-256")
    assert flow.cpu_compute(edge) == {}
    assert all(p.cpu_ops == 0 for p in ethosu_report(edge).partitions)
