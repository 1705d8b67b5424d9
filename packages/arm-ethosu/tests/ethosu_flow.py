"""The quantize -> lower -> run flow the Ethos-U tests share (imported as ``arm_ethosu_test_flow``)."""

from __future__ import annotations

import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from tosa.DType import DType
from tosa.TosaGraph import TosaGraph

from arm_ethosu import (
    EthosUCompileSpec,
    EthosUPartitioner,
    EthosUQuantizer,
    ethosu_payloads,
    ethosu_report,
)
from arm_ethosu.backend import tosa_graph_of
from arm_quantizer import get_symmetric_a16w8_quantization_config, run_exactly
from arm_tosa_core import partition_report, run_on_reference_model
from arm_tosa_core.testing import compare_outputs

BOUNDARY = "at the float boundary of the program"


def quantize(model: torch.nn.Module, inputs: tuple, calibration: list[tuple] | None = None,
             target: str = "ethos-u55-128"):
    """PT2E int8 quantization with `target`'s EthosUQuantizer. The families differ only in a global average
    pool's form (U85: the input's qparams, one AVG_POOL2D; U55/U65: its own, within 1 LSB of fake-quant), so
    the U55 default serves every test that does not check that form."""
    spec = EthosUCompileSpec(target)
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


def quantize_mixed(model: torch.nn.Module, inputs: tuple, spec: EthosUCompileSpec, a16w8: tuple[str, ...] | None):
    """PT2E with EthosUQuantizer: a16w8 everywhere (None) or only for the modules named."""
    quantizer = EthosUQuantizer(spec)
    if a16w8 is None:
        quantizer.set_global(get_symmetric_a16w8_quantization_config())
    for name in a16w8 or ():
        quantizer.set_module_name(name, get_symmetric_a16w8_quantization_config())
    prepared = prepare_pt2e(torch.export.export(model.eval(), inputs).module(), quantizer)
    prepared(*inputs)
    return convert_pt2e(prepared)


def _blocks(tosa: bytes):
    """Every block of every region of a TOSA flatbuffer."""
    graph = TosaGraph.GetRootAs(tosa, 0)
    for r in range(graph.RegionsLength()):
        region = graph.Regions(r)
        for b in range(region.BlocksLength()):
            yield region.Blocks(b)


def rescale_forms(tosa: bytes) -> set[tuple[int, int, int]]:
    """(input, multiplier, output) DType of every RESCALE in a TOSA flatbuffer (a 16-bit multiplier is
    RESCALE's scale32=False form)."""
    from tosa.Op import Op

    forms = set()
    for block in _blocks(tosa):
        types = {block.Tensors(t).Name(): block.Tensors(t).Type() for t in range(block.TensorsLength())}
        for op in (block.Operators(o) for o in range(block.OperatorsLength())):
            if op.Op() == Op.RESCALE:
                forms.add((types[op.Inputs(0)], types[op.Inputs(1)], types[op.Outputs(0)]))
    return forms


def tensor_dtypes(tosa: bytes) -> set[int]:
    """The DType of every tensor in a TOSA flatbuffer."""
    return {block.Tensors(t).Type() for block in _blocks(tosa) for t in range(block.TensorsLength())}


def _lsb(out: torch.Tensor, expected: torch.Tensor, converted) -> float:
    # rounded: a float32 output of ~32767 codes carries ~0.002 LSB of its own rounding
    # (inf where out and expected disagree about NaN or inf)
    return round(compare_outputs(out, expected).max_error / output_lsb(converted), 2)


def check_one_partition(model: torch.nn.Module, inputs: tuple, target: str, a16w8=None):
    """Quantize, compile, and check: one Ethos-U partition, int16 in its TOSA graph, vela's cycles.
    Returns (max LSB vs run_exactly, cycles, converted, edge)."""
    spec = EthosUCompileSpec(target).include_host_graph()  # runs on the reference model
    converted = quantize_mixed(model, inputs, spec, a16w8)
    edge = lower(converted, inputs, spec)
    report = partition_report(edge)
    assert len(report.delegates) == 1 and not cpu_compute(edge), report
    (payload,) = ethosu_payloads(edge)
    assert DType.INT16 in tensor_dtypes(tosa_graph_of(payload))
    cycles = ethosu_report(edge).cycles_total
    assert cycles > 0
    out = run_on_reference_model(edge, *inputs)
    return _lsb(out, run_exactly(converted, *inputs), converted), cycles, converted, edge


def check_on_npu_alone(model: torch.nn.Module, inputs: tuple, target: str, max_lsb: float = 1.0):
    """Quantize, lower with the host graph kept, and check: no CPU compute, one vela partition with no
    CPU operator and NPU cycles, and the reference model within `max_lsb` output LSB of the fake-quantized
    model. Returns vela's partition report."""
    quantized = quantize(model, inputs, target=target)
    edge = lower(quantized, inputs, EthosUCompileSpec(target).include_host_graph())
    assert cpu_compute(edge) == {}, cpu_compute(edge)
    vela = ethosu_report(edge)
    assert len(vela.partitions) == 1 and vela.partitions[0].cpu_ops == 0 and vela.partitions[0].cycles_npu > 0
    with torch.no_grad():
        err = (run_on_reference_model(edge, *inputs) - quantized(*inputs)).abs().max().item()
    assert err <= max_lsb * output_lsb(quantized) * 1.0001, f"{err / output_lsb(quantized):.2f} LSB"
    return vela.partitions[0]
