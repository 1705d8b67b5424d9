"""PT2E-quantized torch.cond / torch.while_loop against the fake-quantized module.

What torchao's PT2E does decides what INT can mean here: it quantizes no cond branch (only the predicate
around it) and prepares a while_loop body as a model of its own (quantize at entry, dequantize at exit,
float between iterations). So:
- cond under "TOSA-1.0+FP+INT+cf": the int8 predicate and COND_IF with float branches lower as one graph,
  equal to fake-quant for inputs taking either branch (0 LSB: same predicate bit, same float math);
- cond under "TOSA-1.0+INT+cf": COND_IF stays on the CPU with a reason naming PT2E and the FP+INT spec;
- while_loop: quantizes and lowers without error (an int64 loop counter stays int64, the body gets no
  tensor attribute that torch.export would leave as a FakeTensor), and stays on the CPU with its body's
  quantize as reason.
"""

import torch
from quant_harness import quantize

from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report, run_on_reference_model
from arm_tosa_core.op_tables import CONTROL_FLOW, FamilyModule, family_inputs
from arm_tosa_core.profile_check import validate_tosa
from arm_tosa_core.testing import lower, max_relative_error
from arm_tosa_core.tosa_inspect import tosa_op_counts

# cond_nested is not here: torchao's convert_pt2e fails on it (its DuplicateDQPass), before our code runs.
CONDS = [c for c in CONTROL_FLOW if c.name in ("cond_scalar_pred", "cond_two_operands")]


def _lower(converted, inputs, spec):
    return lower(converted, inputs, TOSAPartitioner(TosaCompileSpec(spec)))


def _matches_fake_quant(edge, converted, inputs):
    with torch.no_grad():
        err, mag = max_relative_error(run_on_reference_model(edge, *inputs), converted(*inputs))
    assert err <= 1e-6 * max(mag, 1.0), (err, mag)


def test_cond_int_predicate_float_branches_match_fake_quant():
    module, inputs = FamilyModule(CONDS), family_inputs(CONDS)
    converted = quantize(module, inputs, "TOSA-1.0+INT+cf")
    spec = "TOSA-1.0+FP+INT+cf"
    edge = _lower(converted, inputs, spec)
    report = partition_report(edge)
    assert not [c for c in report.cpu_nodes if "quantize" not in c.target], report
    graph = next(bytes(m.processed_bytes) for _, m in edge.exported_program().graph_module.named_modules()
                 if hasattr(m, "processed_bytes"))
    counts = tosa_op_counts(graph)
    assert counts.get("COND_IF") == 2 and counts.get("RESCALE", 0) >= 4, counts  # predicates in int8
    assert not validate_tosa(graph, spec)
    flipped = tuple(-x for x in inputs)  # the other branch of each cond
    for sample in (inputs, flipped):
        _matches_fake_quant(edge, converted, sample)


def _cpu_reason(name: str, spec: str, target: str) -> str:
    """Quantize table case `name`, lower it for `spec`, check it equals fake-quant; `target`'s reason."""
    case = next(c for c in CONTROL_FLOW if c.name == name)
    module, inputs = case.module(), case.inputs()
    converted = quantize(module, inputs, "TOSA-1.0+INT+cf")
    edge = _lower(converted, inputs, spec)
    _matches_fake_quant(edge, converted, inputs)
    return next(c.reason for c in partition_report(edge).cpu_nodes if c.target == target)


def test_cond_under_int_only_stays_on_the_cpu_naming_the_fp_int_spec():
    reason = _cpu_reason("cond_scalar_pred", "TOSA-1.0+INT+cf", "cond")
    assert "PT2E (torchao) quantizes no cond branch" in reason and '"TOSA-1.0+FP+INT+cf"' in reason


def test_quantized_while_loop_lowers_without_error_and_stays_on_the_cpu():
    reason = _cpu_reason("while_loop_counter", "TOSA-1.0+FP+INT+cf", "while_loop")
    assert "of its loop body cannot be lowered" in reason and "the loop carries float values" in reason


def test_quantized_while_loop_passes_exirs_default_core_aten_check():
    """exir's default EdgeCompileConfig (IR validity checked) on a quantized while_loop whose loop condition
    holds `aten.sum.default`: the top level holds only the loop and quantize/dequantize, where exir skipped
    decomposing the loop's graphs. It lowers, stays on the CPU with its reason, and equals fake-quant."""
    from executorch.exir import to_edge_transform_and_lower

    case = next(c for c in CONTROL_FLOW if c.name == "while_float_state")
    module, inputs = case.module(), case.inputs()
    converted = quantize(module, inputs, "TOSA-1.0+INT+cf")
    spec = "TOSA-1.0+FP+INT+cf"
    edge = to_edge_transform_and_lower(torch.export.export(converted, tuple(inputs)),
                                       partitioner=[TOSAPartitioner(TosaCompileSpec(spec))])
    reason = next(c.reason for c in partition_report(edge).cpu_nodes if c.target == "while_loop")
    assert "of its loop body cannot be lowered" in reason
    _matches_fake_quant(edge, converted, inputs)
