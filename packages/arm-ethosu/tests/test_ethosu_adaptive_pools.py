"""Adaptive pools whose windows differ in size (core: SLICE + REDUCE_MAX + CONCAT for max, one int8
MATMUL + a per-position int32 MUL for average) and a global average (one AVG_POOL2D with its input's
qparams) compile through vela for ethos-u55-128 with nothing left on the CPU, and the delegated result is within 1 LSB of the fake-quantized module."""

import arm_ethosu_test_flow as flow
import pytest
import torch

from arm_ethosu import EthosUCompileSpec, ethosu_report
from arm_tosa_core import run_on_reference_model
from arm_tosa_core.op_tables import TABLES, FamilyModule, family_inputs

CASES = [c for c in TABLES["pool_1d_adaptive"] if c.name.startswith("adaptive")]


@pytest.mark.parametrize("kind", ["avg", "max"])
def test_u55_uneven_adaptive_pools_compile_with_vela(kind):
    cases = [c for c in CASES if f"_{kind}_" in c.name]
    module, inputs = FamilyModule(cases), family_inputs(cases)
    quantized = flow.quantize(module, inputs)
    edge = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u55-128").include_host_graph())
    assert flow.cpu_compute(edge) == {}, flow.cpu_compute(edge)
    vela = ethosu_report(edge)
    assert len(vela.partitions) == 1 and vela.partitions[0].cpu_ops == 0 and vela.partitions[0].cycles_npu > 0
    with torch.no_grad():
        expected = quantized(*inputs)
    out = run_on_reference_model(edge, *inputs)
    (output,) = [n for n in quantized.graph.nodes if n.op == "output"]
    lsbs = [float(n.args[1]) for n in output.args[0]]  # each output's dequantize scale
    for got, want, lsb in zip(out, expected, lsbs, strict=True):
        assert (got - want).abs().max().item() <= lsb * 1.0001
