"""Graph forms where data moves, on Ethos-U: bit-exact on the TOSA reference model and cheaper for vela."""

import arm_ethosu_test_flow as flow
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
