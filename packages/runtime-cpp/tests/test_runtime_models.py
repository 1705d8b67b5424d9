"""The four in-repo models through executorch.runtime with runtime_cpp's backends: outputs equal to
`run_on_reference_model` on the lowered program (TOSA FP and INT, Ethos-U INT8), bit for bit.

Small inputs keep compile time modest. The default session samples four cases (every target, each
model family); `nox -s test-runtime-full` (RUNTIME_CPP_FULL=1) runs all twelve: each model FP and
INT on TOSA, and INT8 on Ethos-U85.
"""

from __future__ import annotations

import os

import pytest
import torch
from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge_transform_and_lower
from executorch.runtime import Runtime
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

import runtime_cpp  # noqa: F401  (registers the backends)
from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report, run_on_reference_model
from arm_tosa_core.example_models import get_example

# image side / token count: small, but past each model's minimum
SIZES = {"mobilenet_v2": 32, "resnet18": 32, "deit_tiny_block": 8, "llama_block": 8}


def _quantize(model, inputs, quantizer):
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    with torch.no_grad():
        prepared(*inputs)
    return convert_pt2e(prepared)


def _lower(target: str, model, inputs):
    if target == "ethos-u85-256":
        from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer

        spec = EthosUCompileSpec(target).include_host_graph()  # what the host runs
        model = _quantize(model, inputs, EthosUQuantizer(spec))
        partitioner = EthosUPartitioner(spec)
    else:
        spec = TosaCompileSpec(target)
        if spec.tosa_spec.support_integer():
            from arm_quantizer import TOSAQuantizer, get_symmetric_quantization_config

            quantizer = TOSAQuantizer(spec).set_global(get_symmetric_quantization_config())
            model = _quantize(model, inputs, quantizer)
        partitioner = TOSAPartitioner(spec)
    return to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[partitioner],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))


ALL_CASES = [(m, t) for m in SIZES for t in ("TOSA-1.0+FP", "TOSA-1.0+INT", "ethos-u85-256")]
SAMPLED = [("deit_tiny_block", "TOSA-1.0+FP"), ("mobilenet_v2", "TOSA-1.0+FP"),
           ("deit_tiny_block", "TOSA-1.0+INT"), ("mobilenet_v2", "ethos-u85-256")]
CASES = ALL_CASES if os.environ.get("RUNTIME_CPP_FULL") == "1" else SAMPLED


@pytest.mark.parametrize(("model_name", "target"), CASES)
def test_runtime_matches_reference_model_on_the_lowered_program(model_name, target):
    model, inputs = get_example(model_name).build(seed=0, input_size=SIZES[model_name])
    edge = _lower(target, model, inputs)
    assert partition_report(edge).delegates, "nothing was delegated"
    pte = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False)).buffer
    expected = run_on_reference_model(edge, *inputs)
    program = Runtime.get().load_program(pte)  # kept alive: the Method does not own it
    method = program.load_method("forward")
    (got,) = method.execute(list(inputs))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert torch.equal(got, expected), f"max abs diff {(got - expected).abs().max().item()}"
