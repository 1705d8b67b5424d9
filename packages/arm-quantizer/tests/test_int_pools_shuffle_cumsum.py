"""INT op tables (arm_tosa_core.op_tables) for cumsum (int8 MATMUL with a triangle of ones, int32
accumulation), select/slice_scatter, adaptive pools with windows of different sizes (max on the codes;
average as exact int32 window sums divided per position) and pixel (un)shuffle of any rank: within
1 LSB of the PT2E fake-quantized module and of `run_exactly` (its exact evaluation), and every graph
valid for TOSA-1.0+INT under tosa-opt's strict validation. One lowering per family."""

import pytest
import torch
from quant_harness import output_scales, quantize

from arm_quantizer import run_exactly
from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report, run_on_reference_model
from arm_tosa_core.op_tables import TABLES, FamilyModule, family_inputs
from arm_tosa_core.profile_check import validate_tosa
from arm_tosa_core.testing import lower, max_relative_error

NOT_LOWERED = {"slice_select_scatter-slice_scatter_step"}  # TOSA 1.0 has no strided write


@pytest.mark.parametrize("family", ["cumsum", "slice_select_scatter", "pool_1d_adaptive", "pixel_shuffle"])
def test_family_int_within_one_lsb_of_fake_quant_and_exact(family, tmp_path):
    cases = [c for c in TABLES[family] if c.id not in NOT_LOWERED and "INT" in c.profiles]
    module, inputs = FamilyModule(cases), family_inputs(cases)
    converted = quantize(module, inputs)
    with torch.no_grad():
        fake = converted(*inputs)
    exact = run_exactly(converted, *[x.clone() for x in inputs])
    spec = TosaCompileSpec("TOSA-1.0+INT").dump_intermediate_artifacts_to(tmp_path)
    edge = lower(converted, inputs, TOSAPartitioner(spec))
    report = partition_report(edge)
    assert not [c for c in report.cpu_nodes if "quantize" not in c.target], report
    out = run_on_reference_model(edge, *inputs)
    for what, expected in (("fake-quant", fake), ("run_exactly", exact)):
        for i, (got, want, lsb) in enumerate(zip(out, expected, output_scales(converted), strict=True)):
            err, _ = max_relative_error(got, want)
            assert err <= lsb * 1.0001, f"[{family}] output {i}: {err / lsb:.2f} LSB off {what}\n{report}"
    graphs = sorted(tmp_path.glob("*.tosa"))
    assert graphs and not [p for g in graphs for p in validate_tosa(g, "TOSA-1.0+INT")]
