"""Bundled example models (FP, small inputs) through the VGF flow on Vulkan (lavapipe here)."""

import pytest
import torch
from vgf_flow_helpers import lower_vgf, payloads, relative_error, run_on_kept_tosa

from arm_tosa_core import partition_report
from arm_tosa_core.example_models import get_example
from arm_vgf import VgfCompileSpec, read_vgf, run_vgf_on_vulkan

# MobileNetV2 (conv/depthwise/ReLU6/residual/pooling/linear) and a Llama block (RMSNorm, rotary
# embedding, attention, SiLU MLP); each lowering costs ~5-10 s of exir time on 2 cores.
MODELS = [("mobilenet_v2", 64), ("llama_block", 16)]


@pytest.mark.parametrize("name,size", MODELS, ids=[m[0] for m in MODELS])
def test_example_model_fp_on_vulkan(name, size, tmp_path):
    model, inputs = get_example(name).build(seed=0, input_size=size)
    spec = VgfCompileSpec().dump_intermediate_artifacts_to(tmp_path)
    edge = lower_vgf(model, inputs, spec)
    report = partition_report(edge)
    assert not report.cpu_nodes and len(report.delegates) == 1, report
    with torch.no_grad():
        kept = run_on_kept_tosa(edge, inputs, tmp_path)  # before to_executorch, which runs passes
        out = run_vgf_on_vulkan(edge.to_executorch().buffer, *inputs)
        expected = model(*inputs)
    err, mag = relative_error(out, expected)
    assert err <= 1e-4, f"{name}: Vulkan vs eager {err:.3g} x max|out| {mag:.3g}"
    # The TOSA graph kept beside the VGF, on the reference model: the same numbers within 1e-5.
    err, mag = relative_error(out, kept)
    assert err <= 1e-5, f"{name}: Vulkan vs TOSA reference {err:.3g} x max|out| {mag:.3g}"
    ((backend, vgf),) = payloads(edge)
    assert backend == "VgfBackend"
    assert [list(t.shape) for t in read_vgf(vgf).inputs] == [list(x.shape) for x in inputs]
