"""The quantize -> lower -> run flow the Ethos-U tests share (imported as ``arm_ethosu_test_flow``)."""

from __future__ import annotations

import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer
from arm_tosa_core import partition_report

BOUNDARY = "at the float boundary of the program"


def quantize(model: torch.nn.Module, inputs: tuple, calibration: list[tuple] | None = None):
    """PT2E int8 quantization with EthosUQuantizer (the same for every Ethos-U family)."""
    spec = EthosUCompileSpec("ethos-u85-256")
    prepared = prepare_pt2e(torch.export.export(model.eval(), inputs).module(), EthosUQuantizer(spec))
    with torch.no_grad():
        for sample in calibration or [inputs]:
            prepared(*sample)
    return convert_pt2e(prepared)


def lower(module, inputs: tuple, spec: EthosUCompileSpec, additional_checks=None):
    """export + to_edge_transform_and_lower with EthosUPartitioner, as the seed example does."""
    return to_edge_transform_and_lower(
        torch.export.export(module, inputs),
        partitioner=[EthosUPartitioner(spec, additional_checks)],
        compile_config=EdgeCompileConfig(_check_ir_validity=False))


def cpu_compute(edge) -> dict[str, str]:
    """CPU nodes other than the float-boundary quantize/dequantize: name -> reason."""
    return {c.name: c.reason for c in partition_report(edge).cpu_nodes if BOUNDARY not in c.reason}


def output_lsb(quantized) -> float:
    """The scale of the dequantize that produces the model's (single) output."""
    (out,) = [n for n in quantized.graph.nodes if n.op == "output"]
    node = out.args[0][0] if isinstance(out.args[0], (tuple, list)) else out.args[0]
    if "dequantize" not in str(node.target):
        raise AssertionError(f"the output comes from {node.target}, not a dequantize")
    return float(node.args[1])
