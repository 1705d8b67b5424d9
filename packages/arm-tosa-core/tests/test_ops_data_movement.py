"""Op tables of arm_tosa_core.op_tables (flip, slice/select_scatter, stack, views, pad, repeat) vs eager on
the TOSA reference model, FP within 1e-4 relative. Each family's lowered cases run as one module (one
lowering per family: exir's per-program cost dominates, not the ops); a case the table expects to stay
on the CPU is checked for its reason."""

import pytest

from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report
from arm_tosa_core.op_tables import TABLES, FamilyModule, OpCase, family_inputs
from arm_tosa_core.profile_check import validate_tosa
from arm_tosa_core.testing import check_lowering, lower

# Cases that stay on the CPU, with the words their reason must contain (a TOSA or toolkit limit).
ON_THE_CPU = {
    "slice_select_scatter-slice_scatter_step": "TOSA 1.0 has no strided write",
}
LOWERED_FAMILIES = ["flip", "slice_select_scatter", "stack", "constant_pad", "repeat", "views", "cumsum"]
KNOWN_FAILURES: set[str] = set()  # none: the rank-0 `x.squeeze() + 1` case lowers since constants keep rank 0


def lowered_cases(family: str) -> list[OpCase]:
    return [c for c in TABLES[family] if c.id not in ON_THE_CPU.keys() | KNOWN_FAILURES]


@pytest.mark.parametrize("family", LOWERED_FAMILIES)
def test_family_fp_matches_eager_on_the_reference_model(family, tmp_path):
    """Within 1e-4 of eager, and every graph passes tosa-opt's strict validation for the FP profile."""
    cases = lowered_cases(family)
    spec = TosaCompileSpec("TOSA-1.0+FP").dump_intermediate_artifacts_to(tmp_path)
    check_lowering(FamilyModule(cases), family_inputs(cases), case=family, partitioner=TOSAPartitioner(spec))
    graphs = sorted(tmp_path.glob("*.tosa"))
    assert graphs and not [p for g in graphs for p in validate_tosa(g, "TOSA-1.0+FP")]


@pytest.mark.parametrize("case_id,says", sorted(ON_THE_CPU.items()))
def test_case_stays_on_the_cpu_with_its_reason(case_id, says):
    case = next(c for cases in TABLES.values() for c in cases if c.id == case_id)
    report = partition_report(lower(case.module(), case.inputs()))
    assert report.cpu_nodes and all(says in c.reason for c in report.cpu_nodes), report
