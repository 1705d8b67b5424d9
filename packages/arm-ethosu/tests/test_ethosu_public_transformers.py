"""Public transformer models (`arm_tosa_core.public_transformers`, small random-init configs) quantized
int8 and compiled by vela for ethos-u85-256 as one partition with no CPU compute, and the TOSA INT
result within 1 LSB of the fake-quantized model; on ethos-u55-128 the same for the models that run there,
and for the others only their embeddings on the CPU (GATHER is outside the U55 operator set). Slow:
quantizing and compiling take 1-6 min each on the shared 2-core machine."""

import arm_ethosu_test_flow as flow
import pytest

from arm_ethosu import EthosUCompileSpec, ethosu_report
from arm_tosa_core.public_transformers import build_public


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert", "distilbert", "gpt2", "llama", "t5_encoder", "vit", "wav2vec2", "whisper_encoder"])
def test_u85_one_partition(name):
    partition = flow.check_on_npu_alone(*build_public(name), "ethos-u85-256")
    print(f"{name}: {partition.cycles_npu} NPU cycles")


#: run on ethos-u55-128 as one partition with no CPU compute (bench/results/u55_transformers.md)
U55_RUNS = ["vit"]
#: one partition, but their embeddings (TOSA GATHER) stay on the CPU: {model: embeddings on the CPU}
U55_EMBEDDINGS_ON_CPU = {"bert": 3, "distilbert": 2, "llama": 1, "whisper_encoder": 1}


@pytest.mark.slow
@pytest.mark.parametrize("name", U55_RUNS)
def test_u55_one_partition(name):
    flow.check_on_npu_alone(*build_public(name), "ethos-u55-128")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(U55_EMBEDDINGS_ON_CPU))
def test_u55_only_embeddings_on_cpu(name):
    model, inputs = build_public(name)
    quantized = flow.quantize(model, inputs)
    edge = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u55-128"))
    cpu = {n: why for n, why in flow.cpu_compute(edge).items() if "quantize" not in n}
    assert len(cpu) == U55_EMBEDDINGS_ON_CPU[name], cpu
    assert all(n.startswith("aten_embedding") and "GATHER, which Ethos-U55/U65 do not run" in why
               for n, why in cpu.items()), cpu
    assert len(ethosu_report(edge).partitions) == 1
