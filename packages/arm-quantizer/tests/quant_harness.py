"""Quantize -> lower for TOSA INT -> compare with the PT2E fake-quantized module, in output LSBs."""

from __future__ import annotations

import torch
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from arm_quantizer import TOSAQuantizer, get_symmetric_quantization_config
from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report, run_on_reference_model
from arm_tosa_core.testing import compare_outputs, lower


def quantize(module, inputs, spec="TOSA-1.0+INT", config=None, quantizer=None, calibration=None):
    """PT2E quantize `module` (export -> prepare -> calibrate -> convert)."""
    quantizer = quantizer or TOSAQuantizer(TosaCompileSpec(spec)).set_global(
        config or get_symmetric_quantization_config())
    prepared = prepare_pt2e(torch.export.export(module.eval(), tuple(inputs)).module(), quantizer)
    for sample in calibration or [inputs]:
        prepared(*sample)
    return convert_pt2e(prepared)


def output_scales(converted) -> list[float]:
    """Scale of each model output (from the dequantize feeding it)."""
    out = [n for n in converted.graph.nodes if n.op == "output"][0]
    scales = []
    for arg in torch.utils._pytree.tree_leaves(out.args[0]):
        node = arg
        while node.op == "call_function" and "dequantize" not in str(node.target):
            node = node.args[0]
        scales.append(float(node.args[1]))
    return scales


def check_int(module, inputs, *, spec="TOSA-1.0+INT", max_lsb=1.0, config=None, quantizer=None,
              expect_full=True, case=""):
    """Lower the quantized module for TOSA INT and assert it is within `max_lsb` of fake-quant."""
    converted = quantize(module, inputs, spec, config, quantizer)
    with torch.no_grad():
        fake = converted(*inputs)
    edge = lower(converted, inputs, TOSAPartitioner(TosaCompileSpec(spec)))
    report = partition_report(edge)
    compute = [c for c in report.cpu_nodes if "quantize" not in c.target]
    if expect_full:
        assert not compute, f"[{case}] not fully delegated:\n{report}"
    out = run_on_reference_model(edge, *inputs)
    comparison = compare_outputs(out, fake)
    assert not comparison.nonfinite, f"[{case}] {comparison.nonfinite}\n{report}"
    err, scale = comparison.max_error, max(output_scales(converted))
    assert err <= max_lsb * scale * 1.0001, (
        f"[{case}] max error {err:.4g} = {err / scale:.2f} LSB (scale {scale:.4g})\n{report}")
    return edge, report, err / scale, converted
