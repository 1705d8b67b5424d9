"""Bundled example models quantized to INT8 and run as VGF on Vulkan (lavapipe here).

Each model is PT2E-quantized with VgfQuantizer + get_symmetric_quantization_config (calibrated on
its example input), lowered with VgfPartitioner for TOSA-1.0+INT, serialized to a .pte, and run:

- every delegate call on Vulkan and on the TOSA reference model (the partition's TOSA graph that
  VgfBackend keeps beside its VGF), with the same delegate inputs: the integer outputs must be
  bit-identical; so must the whole program's outputs (`run_vgf_on_vulkan` against the reference run);
- the program on Vulkan against the fake-quantized model (convert_pt2e's output) within the core's
  INT tolerances, in output LSBs (see arm-quantizer's test_models_int.py): ResNet-18 bit-exact,
  MobileNetV2 within 2 LSBs (1-LSB rounding ties inside the network propagate through 53 layers),
  the transformer blocks within 1 LSB (a RESCALE rounding tie against torch's half-to-even, or a
  float CPU island requantizing its result; measured: 0 LSB for all four models).

The CNNs must be fully delegated (only the float-boundary quantize/dequantize stay on the CPU).
The transformer blocks are checked on whatever is delegated, which depends on the core's INT rules
for softmax / layer norm / attention (measured: everything but the boundary Q/DQ); the share is
printed (`pytest -s`) and must be above zero. Small inputs keep each case at ~10-20 s on 2 cores.
"""

import executorch.kernels.quantized  # noqa: F401  (out variants of the CPU-side quantize/dequantize)
import pytest
import torch
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from vgf_flow_helpers import compare_delegates_on_kept_tosa, lower_vgf

from arm_quantizer import get_symmetric_quantization_config
from arm_tosa_core import partition_report
from arm_tosa_core.example_models import get_example
from arm_vgf import VgfCompileSpec, VgfPartitioner, VgfQuantizer, run_vgf_on_vulkan

SPEC = "TOSA-1.0+INT"
# name -> (input size: image side or tokens, max error against the fake-quant model in output LSBs)
MODELS = {
    "mobilenet_v2": (32, 2),
    "resnet18": (32, 0),
    "deit_tiny_block": (16, 1),
    "llama_block": (8, 1),
}
CNNS = ("mobilenet_v2", "resnet18")
_BOUNDARY_QDQ = ("quantize_per_tensor", "dequantize_per_tensor")


def _quantize(model, inputs, spec: VgfCompileSpec):
    quantizer = VgfQuantizer(spec).set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    prepared(*inputs)  # calibration on the example input
    return convert_pt2e(prepared)


def _output_scale(converted) -> float:
    """Scale of the model's output (the dequantize that feeds it)."""
    (output,) = [n for n in converted.graph.nodes if n.op == "output"]
    node = torch.utils._pytree.tree_leaves(output.args[0])[0]
    while "dequantize" not in str(node.target):
        node = node.args[0]
    return float(node.args[1])


@pytest.mark.parametrize("name", list(MODELS))
def test_example_model_int8_on_vulkan(name, tmp_path):
    size, max_lsb = MODELS[name]
    model, inputs = get_example(name).build(seed=0, input_size=size)
    spec = VgfCompileSpec(SPEC).dump_intermediate_artifacts_to(tmp_path)
    converted = _quantize(model, inputs, spec)
    edge = lower_vgf(converted, inputs, partitioner=VgfPartitioner(spec))
    report = partition_report(edge)
    compute_on_cpu = [c for c in report.cpu_nodes
                      if not any(q in c.target for q in _BOUNDARY_QDQ)]
    compute_share = report.delegated_count / (report.delegated_count + len(compute_on_cpu))
    print(f"\n{name}: {100 * compute_share:.1f} % of compute nodes delegated "
          f"(boundary Q/DQ not counted) in {len(report.delegates)} VGF partition(s)")
    assert report.delegates and all(d.backend_id == "VgfBackend" for d in report.delegates), str(report)
    if name in CNNS:
        assert not compute_on_cpu and len(report.delegates) == 1, str(report)

    # The delegated part: Vulkan against the reference model on the same TOSA graph, bit for bit
    # (the graph walk runs before to_executorch, whose passes rewrite the edge program).
    with torch.no_grad():
        reference, calls = compare_delegates_on_kept_tosa(edge, inputs, tmp_path)
        out = run_vgf_on_vulkan(edge.to_executorch().buffer, *inputs)
        fake = converted(*inputs)
    assert len(calls) == len(report.delegates)
    for call in calls:
        assert all(not t.dtype.is_floating_point for t in call.vulkan), call.describe()
        assert call.bit_exact, f"{name}: {call.describe()}\n{report}"
    # the comparison means something only if the int8 results spread over many levels
    assert len(torch.unique(calls[-1].vulkan[0])) > 32, calls[-1].describe()
    assert torch.equal(out, reference), f"{name}: run_vgf_on_vulkan differs from the reference run"

    # The whole program against the fake-quantized model, in output LSBs.
    scale = _output_scale(converted)
    err = (out - fake).abs().max().item()
    assert err <= max_lsb * scale * 1.0001, (
        f"{name}: {err:.4g} = {err / scale:.2f} LSB from the fake-quant model (scale {scale:.4g}, "
        f"allowed {max_lsb})\n{report}")
