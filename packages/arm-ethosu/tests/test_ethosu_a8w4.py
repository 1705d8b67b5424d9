"""4-bit weights on Ethos-U: vela 5.2 takes TOSA INT4 convolution weights (EXT-INT4, listed for U55/U65
and U85) on every family, so an a8w4 MLP is one partition on ethos-u55-128 and ethos-u85-256, within
1 LSB of `run_exactly` on the reference model, with its weight stream (the bytes that go to flash) at
most 0.55x of the a8w8 model's (the weights halve; vela's per-channel bias and scale words, 10 bytes a
channel, do not: 36,000 -> 19,616 bytes here)."""

import arm_ethosu_test_flow as flow
import pytest
import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from torch import nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer, ethosu_report
from arm_quantizer import (
    get_symmetric_a8w4_quantization_config,
    get_symmetric_quantization_config,
    run_exactly,
)
from arm_tosa_core import partition_report, run_on_reference_model


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64)).eval()


def _compile(target: str, config):
    model, inputs = _mlp(), (torch.randn(4, 64),)
    spec = EthosUCompileSpec(target).include_host_graph()
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), EthosUQuantizer(spec).set_global(config))
    prepared(*inputs)
    converted = convert_pt2e(prepared)
    edge = to_edge_transform_and_lower(torch.export.export(converted, inputs), partitioner=[EthosUPartitioner(spec)],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    return converted, edge, inputs


@pytest.mark.parametrize("target", ["ethos-u85-256", pytest.param("ethos-u55-128", marks=pytest.mark.slow)])
def test_a8w4_mlp_on_ethosu_halves_the_weight_stream(target):
    flash = {}
    for name, config in (("a8w8", get_symmetric_quantization_config()),
                         ("a8w4", get_symmetric_a8w4_quantization_config(is_per_channel=True))):
        converted, edge, inputs = _compile(target, config)
        assert len(partition_report(edge).delegates) == 1 and not flow.cpu_compute(edge), partition_report(edge)
        (part,) = ethosu_report(edge).partitions
        flash[name] = part.weight_bytes
        out, exact = run_on_reference_model(edge, *inputs), run_exactly(converted, *inputs)
        assert (out - exact).abs().max().item() <= flow.output_lsb(converted) * 1.0001, name
    print(target, flash)
    assert flash["a8w4"] <= 0.55 * flash["a8w8"], flash
