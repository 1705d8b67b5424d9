"""Spec strings from the ExecuTorch docs parse or are refused with what to write instead; without "+cf",
torch.cond and torch.while_loop stay on the CPU with a reason that names the control-flow extension, and
the program still computes eager's result (the rest of it on the reference model)."""

import pytest
import torch

from arm_tosa_core import TosaSpecification, partition_report, run_on_reference_model
from arm_tosa_core.op_tables import CONTROL_FLOW
from arm_tosa_core.testing import lower, max_relative_error


@pytest.mark.parametrize("text,extension", [("TOSA-1.0+FP+cf", "controlflow"), ("TOSA-1.0+INT+cf", "controlflow"),
                                            ("TOSA-1.0+INT+var", "variable"), ("TOSA-1.0+FP+controlflow",
                                                                               "controlflow")])
def test_short_extension_names_from_the_docs_parse(text, extension):
    spec = TosaSpecification.create_from_string(text)
    assert spec.support_extension(extension)
    assert spec.control_flow == (extension == "controlflow")


@pytest.mark.parametrize("text,says", [
    ("TOSA-1.1+FP", 'TOSA 1.1 .* not supported: tosa-tools ships it only as a draft.*after "TOSA-1.0"'),
    ("TOSA-1.1+INT+int16", "TOSA 1.1 .* not supported"),
    ("TOSA-0.80+BI", '"TOSA-1.0\\+INT" for 0.80\'s BI profile'),
    ("TOSA-0.80+MI", '"TOSA-1.0\\+FP" for MI'),
])
def test_other_versions_are_refused_naming_what_to_write(text, says):
    with pytest.raises(ValueError, match=says) as info:
        TosaSpecification.create_from_string(text)
    assert 'valid forms: "TOSA-1.0+FP"' in str(info.value)


def _cpu_reasons(edge) -> dict[str, str]:
    return {c.target: c.reason for c in partition_report(edge).cpu_nodes}


@pytest.mark.parametrize("case,spec,says", [
    (CONTROL_FLOW[1], "TOSA-1.0+FP", 'TOSA-1.0+FP lacks it: use "TOSA-1.0+FP+cf"'),
], ids=["cond_without_cf"])  # with +cf it lowers: test_control_flow.py
def test_control_flow_stays_on_the_cpu_with_the_extension_named(case, spec, says):
    module, inputs = case.module(), case.inputs()
    edge = lower(module, inputs, spec=spec)
    reasons = [r for t, r in _cpu_reasons(edge).items() if "cond" in t or "while_loop" in t]
    assert reasons and all(says in r for r in reasons), partition_report(edge)
    with torch.no_grad():
        err, mag = max_relative_error(run_on_reference_model(edge, *inputs), module(*inputs))
    assert err <= 1e-5 * max(mag, 1.0)
