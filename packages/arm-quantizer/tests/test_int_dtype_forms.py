"""INT forms a new user writes (arm_tosa_core.op_tables: forms_quantized, dtype_int8), quantized with
TOSAQuantizer + get_symmetric_quantization_config:
- float models: numbers on either side of where, in-place division, avg_pool1d, negative dims and
  keepdim lower fully and stay within 1 LSB of the fake-quantized module;
- integer models: the quantizer leaves int8 tensors (and the python numbers added to them) alone, so
  the lowered graph matches eager bit for bit (`int8 + 2` used to become a float op, and
  `int8 += 2` failed in prepare_pt2e)."""

import torch
from quant_harness import check_int, quantize

from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report, run_on_reference_model
from arm_tosa_core.op_tables import TABLES, FamilyModule, family_inputs
from arm_tosa_core.testing import lower


def test_quantized_forms_within_one_lsb():
    cases = TABLES["forms_quantized"]
    _, report, lsb, _ = check_int(FamilyModule(cases), family_inputs(cases), case="forms_quantized")
    assert report.delegates and lsb <= 1.0


def _lowers_exactly(family: str):
    """Quantize, lower for TOSA-1.0+INT, and compare every (integer) output with the converted module
    bit for bit; returns the converted module."""
    cases = TABLES[family]
    module, inputs = FamilyModule(cases), family_inputs(cases)
    converted = quantize(module, inputs)
    edge = lower(converted, inputs, TOSAPartitioner(TosaCompileSpec("TOSA-1.0+INT")))
    compute = [c for c in partition_report(edge).cpu_nodes if "quantize" not in c.target]
    assert not compute, partition_report(edge)
    got, expected = run_on_reference_model(edge, *inputs), converted(*inputs)
    assert len(got) == len(expected)
    for index, (a, b) in enumerate(zip(got, expected, strict=True)):
        assert not b.is_floating_point(), index
        assert torch.equal(a.to(b.dtype), b), f"[{family}] output {index}: {a} != {b}"
    return converted


def test_int8_model_passes_the_quantizer_unchanged_and_lowers_exactly():
    converted = _lowers_exactly("dtype_int8")
    assert not [n for n in converted.graph.nodes if "quantize_per" in str(n.target)]


def test_argmax_of_a_quantized_model_matches_fake_quant_exactly():
    """The indices come from the int8 codes (same order and ties as the fake-quantized values)."""
    converted = _lowers_exactly("argmax_quantized")
    assert [n for n in converted.graph.nodes if "quantize_per" in str(n.target)]
