"""Public transformer models (`arm_tosa_core.public_transformers`, small random-init configs) quantized
int8 and compiled by vela for ethos-u85-256 as one partition with no CPU compute, and the TOSA INT
result within 1 LSB of the fake-quantized model. Slow: quantizing and compiling take ~1 min each."""

import arm_ethosu_test_flow as flow
import pytest
import torch

from arm_ethosu import EthosUCompileSpec, ethosu_report
from arm_tosa_core import run_on_reference_model
from arm_tosa_core.public_transformers import build_public


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert", "distilbert", "gpt2", "llama", "t5_encoder", "vit", "wav2vec2", "whisper_encoder"])
def test_u85_one_partition(name):
    model, inputs = build_public(name)
    quantized = flow.quantize(model, inputs)
    edge = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u85-256").include_host_graph())
    assert flow.cpu_compute(edge) == {}, flow.cpu_compute(edge)
    vela = ethosu_report(edge)
    assert len(vela.partitions) == 1 and vela.partitions[0].cpu_ops == 0 and vela.partitions[0].cycles_npu > 0
    with torch.no_grad():
        err = (run_on_reference_model(edge, *inputs) - quantized(*inputs)).abs().max().item()
    assert err <= flow.output_lsb(quantized) * 1.0001
    print(f"{name}: {vela.partitions[0].cycles_npu} NPU cycles")
