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


def check_within_one_lsb(converted, inputs, spec_text, tmp_path, slack=1.0001):
    """Lower fully for `spec_text`; each output within 1 LSB (times `slack`) of fake-quant and of
    run_exactly; every graph valid for the spec. Returns the partition report."""
    with torch.no_grad():
        fake = converted(*inputs)
    exact = run_exactly(converted, *[x.clone() for x in inputs])
    spec = TosaCompileSpec(spec_text).dump_intermediate_artifacts_to(tmp_path)
    edge = lower(converted, inputs, TOSAPartitioner(spec))
    report = partition_report(edge)
    assert not [c for c in report.cpu_nodes if "quantize" not in c.target], report
    out = run_on_reference_model(edge, *inputs)
    for what, expected in (("fake-quant", fake), ("run_exactly", exact)):
        for i, (got, want, lsb) in enumerate(zip(out, expected, output_scales(converted), strict=True)):
            err, _ = max_relative_error(got, want)
            assert err <= lsb * slack, f"output {i}: {err / lsb:.2f} LSB off {what}\n{report}"
    graphs = sorted(tmp_path.glob("*.tosa"))
    assert graphs and not [p for g in graphs for p in validate_tosa(g, spec_text)]
    return report


@pytest.mark.parametrize("family", ["cumsum", "slice_select_scatter", "pool_1d_adaptive", "pixel_shuffle"])
def test_family_int_within_one_lsb_of_fake_quant_and_exact(family, tmp_path):
    cases = [c for c in TABLES[family] if c.id not in NOT_LOWERED and "INT" in c.profiles]
    module, inputs = FamilyModule(cases), family_inputs(cases)
    check_within_one_lsb(quantize(module, inputs), inputs, "TOSA-1.0+INT", tmp_path)


# -- int16 activations: unary functions as TOSA's interpolated int16 TABLE ---------------------------
INT16 = "TOSA-1.0+INT+int16"
SMOOTH = [torch.sigmoid, torch.tanh, torch.atan, torch.asinh, torch.nn.functional.elu, torch.nn.functional.gelu]


def _quantize_a16w8(module, inputs):
    from arm_quantizer import TOSAQuantizer, get_symmetric_a16w8_quantization_config

    quantizer = TOSAQuantizer(TosaCompileSpec(INT16)).set_global(get_symmetric_a16w8_quantization_config())
    return quantize(module, inputs, INT16, quantizer=quantizer)


def test_int16_table_within_one_lsb_of_fake_quant_and_exact(tmp_path):
    """sigmoid, tanh, atan, asinh, elu, gelu with int16 activations: one TABLE (513 entries) + RESCALE
    each, within 1 int16 LSB of fake-quant and of run_exactly, valid for TOSA-1.0+INT+int16."""
    from arm_tosa_core.testing import FnModule

    module = FnModule(lambda self, x: tuple(f(x * (i + 1) / 2) for i, f in enumerate(SMOOTH)))
    half = torch.randn(2, 3, 32, generator=torch.Generator().manual_seed(3))
    # symmetric data: with the symmetric int16 scale every input code is a value the observer saw, so
    # no output saturates inside the code range (that kink would send the node to the CPU, see below)
    inputs = (torch.cat([half, -half], -1),)
    # 1.01: an int16 LSB is small enough that float32 rounding of the dequantized outputs shows
    report = check_within_one_lsb(_quantize_a16w8(module, inputs), inputs, INT16, tmp_path, slack=1.01)
    assert report.delegates[0].ops.get("TABLE") == len(SMOOTH), report


def test_int16_table_that_cannot_follow_the_function_stays_on_the_cpu():
    """exp saturating inside the int16 input range (a kink between table samples) would be far more than
    1 LSB off: it stays on the CPU with the measured error as the reason."""
    from arm_tosa_core.testing import FnModule

    inputs = (torch.randn(2, 64, generator=torch.Generator().manual_seed(3)),)
    converted = _quantize_a16w8(FnModule(lambda self, x: torch.exp(x)), inputs)
    report = partition_report(lower(converted, inputs, TOSAPartitioner(TosaCompileSpec(INT16))))
    reasons = [c.reason for c in report.cpu_nodes if "exp" in c.target]
    assert reasons and "int16 TABLE" in reasons[0] and "LSB off" in reasons[0], report
