"""ResNet-18 and the DeiT-tiny block compile for ethos-u55-128, ethos-u65-256 and ethos-u85-256.

Each model is quantized and lowered once for U55; U65 and U85 compile the same partitions through
EthosUBackend. U65 runs the same rules, so its partitioner chooses the same partitions; U85's rules
are a subset of U55's, so these partitions are valid for it too (its partitioner also takes the
boolean ops of the float attention's decomposition). What stays on the CPU is what the core has no
INT rule for yet (layer norm, softmax/attention) and the float code around it.
"""

import arm_ethosu_test_flow as flow
import pytest
import torch

from arm_ethosu import EthosUBackend, EthosUCompileSpec, ethosu_payloads, ethosu_report
from arm_ethosu.constraints import RULES
from arm_ethosu.program_report import partition_report_of
from arm_tosa_core import partition_report, run_on_reference_model
from arm_tosa_core.example_models import get_example

MODELS = {"resnet18": 32, "deit_tiny_block": 16}  # image side / tokens, small to keep the suite fast
_cache: dict = {}


def _compiled(name: str):
    if name not in _cache:
        model, inputs = get_example(name).build(seed=0, input_size=MODELS[name])
        quantized = flow.quantize(model, inputs)
        edge = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u55-128").include_host_graph())
        _cache[name] = (quantized, inputs, edge, partition_report(edge))
    return _cache[name]


@pytest.mark.parametrize("name", list(MODELS))
def test_u55(name):
    quantized, inputs, edge, report = _compiled(name)
    vela = ethosu_report(edge)
    assert vela.partitions and all(p.cpu_ops == 0 and p.npu_ops >= 1 for p in vela.partitions)
    # everything but the float boundary's quantize/dequantize runs on the NPU, in one vela partition
    assert flow.cpu_compute(edge) == {} and len(vela.partitions) == 1
    with torch.no_grad():
        out = run_on_reference_model(edge, *inputs)
        expected = quantized(*inputs)
    assert (out - expected).abs().max().item() <= 1e-6  # bit-exact against the fake-quant model


@pytest.mark.parametrize("target", ["ethos-u65-256", "ethos-u85-256"])
@pytest.mark.parametrize("name", list(MODELS))
def test_u65_u85(name, target):
    assert set(RULES["U85"]) <= set(RULES["U55"]) and RULES["U65"] == RULES["U55"]
    _, _, edge, report = _compiled(name)
    gm = edge.exported_program().graph_module
    lowered = [m for _, m in gm.named_children() if getattr(m, "backend_id", None) == "EthosUBackend"]
    assert len(lowered) == len(ethosu_payloads(edge))
    spec = EthosUCompileSpec(target).to_list()
    for module in lowered:
        part = partition_report_of(EthosUBackend.preprocess(module.original_module, spec).processed_bytes)
        assert part.target == target and part.cpu_ops == 0 and part.npu_ops >= 1
        assert part.cycles_npu > 0 and part.nn_macs > 0
