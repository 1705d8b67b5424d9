"""Graph forms where data moves, on Ethos-U: bit-exact on the TOSA reference model and cheaper for vela."""

import arm_ethosu_test_flow as flow
import pytest
import torch
from torch import nn

from arm_ethosu import EthosUCompileSpec, ethosu_payloads, ethosu_report
from arm_ethosu.backend import tosa_graph_of
from arm_tosa_core import run_on_reference_model
from arm_tosa_core.tosa_inspect import tosa_op_counts


class ChannelShuffle(nn.Module):
    def __init__(self, channels: int = 32, groups: int = 2) -> None:
        super().__init__()
        self.a, self.b, self.groups = nn.Conv2d(channels, channels, 1), nn.Conv2d(channels, channels, 1), groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.a(x)
        b, c, h, w = x.shape
        x = x.view(b, self.groups, c // self.groups, h, w).transpose(1, 2).contiguous().view(b, c, h, w)
        return self.b(x)


def test_channel_shuffle_is_one_transpose_on_u55():
    torch.manual_seed(0)
    inputs = (torch.randn(1, 32, 16, 16),)
    quantized = flow.quantize(ChannelShuffle().eval(), inputs)
    edge = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u55-128").include_host_graph())
    (payload,) = ethosu_payloads(edge)
    assert tosa_op_counts(tosa_graph_of(payload))["TRANSPOSE"] == 3  # input edge, the shuffle, output edge
    (part,) = ethosu_report(edge).partitions
    # vela 5.2: 35,872 NPU cycles through NCHW and back (5 TRANSPOSEs), 19,232 with the shuffle in NHWC
    assert part.cycles_npu < 25_000, part.cycles_npu
    with torch.no_grad():
        assert torch.equal(run_on_reference_model(edge, *inputs), quantized(*inputs))


class Upsample(nn.Module):
    """conv -> bilinear k x (half-pixel, LRASPP's form) -> conv."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.a, self.b, self.k = nn.Conv2d(3, 4, 1), nn.Conv2d(4, 4, 1), k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(nn.functional.interpolate(self.a(x), scale_factor=self.k, mode="bilinear"))


@pytest.mark.parametrize("k", [4, pytest.param(8, marks=pytest.mark.slow)])
def test_bilinear_upscale_on_u55_equals_the_resize_form(k):
    """U55 runs k x bilinear as NEAREST + (k+1)^2 depthwise conv; on the reference model that form gives the
    very integers of the BILINEAR RESIZE form U85 compiles (whose accuracy the core's resize tests check)."""
    torch.manual_seed(0)
    inputs = (torch.randn(1, 3, 5, 6),)
    quantized = flow.quantize(Upsample(k).eval(), inputs)
    outs = {}
    for target in ("ethos-u55-128", "ethos-u85-256"):
        edge = flow.lower(quantized, inputs, EthosUCompileSpec(target).include_host_graph())
        assert flow.cpu_compute(edge) == {}, flow.cpu_compute(edge)
        (payload,) = ethosu_payloads(edge)
        ops = tosa_op_counts(tosa_graph_of(payload))
        assert (ops["DEPTHWISE_CONV2D"], ops["RESIZE"]) == ((1, 1) if target == "ethos-u55-128" else (0, 1))
        assert all(p.cpu_ops == 0 for p in ethosu_report(edge).partitions)
        with torch.no_grad():
            outs[target] = run_on_reference_model(edge, *inputs)
    assert torch.equal(outs["ethos-u55-128"], outs["ethos-u85-256"])
