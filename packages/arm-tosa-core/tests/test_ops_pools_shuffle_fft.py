"""Op tables of arm_tosa_core.op_tables for adaptive pools with windows of different sizes, pixel
(un)shuffle of any rank, and the real FFT (TOSA 1.0's "+fft" RFFT2D): FP within 1e-4 relative of eager
on the reference model, every graph valid for its profile under tosa-opt's strict validation; the
cases that stay on the CPU say why (a TOSA limit, or the missing "+fft")."""

import pytest

from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report
from arm_tosa_core.op_tables import TABLES, FamilyModule, family_inputs
from arm_tosa_core.profile_check import validate_tosa
from arm_tosa_core.testing import check_lowering, lower

# case -> (spec, words its reason must contain)
ON_THE_CPU = {
    "fft-rfft_abs": ("TOSA-1.0+FP+fft", "a complex result cannot leave a TOSA delegate"),
    "fft-rfft_not_pow2": ("TOSA-1.0+FP+fft", "must be powers of two"),
    "fft-rfft_last_dim": ("TOSA-1.0+FP", '"TOSA-1.0+FP+fft"'),
}


@pytest.mark.parametrize("family", ["pool_1d_adaptive", "pixel_shuffle", "fft"])
def test_family_fp_matches_eager_on_the_reference_model(family, tmp_path):
    cases = [c for c in TABLES[family] if c.id not in ON_THE_CPU]
    spec_text = cases[0].spec("FP")
    spec = TosaCompileSpec(spec_text).dump_intermediate_artifacts_to(tmp_path)
    check_lowering(FamilyModule(cases), family_inputs(cases), case=family, partitioner=TOSAPartitioner(spec))
    graphs = sorted(tmp_path.glob("*.tosa"))
    assert graphs and not [p for g in graphs for p in validate_tosa(g, spec_text)]


@pytest.mark.parametrize("case_id", sorted(ON_THE_CPU))
def test_case_stays_on_the_cpu_with_its_reason(case_id):
    spec, says = ON_THE_CPU[case_id]
    case = next(c for cases in TABLES.values() for c in cases if c.id == case_id)
    report = partition_report(lower(case.module(), case.inputs(), spec=spec))
    fft = [c for c in report.cpu_nodes if "fft" in c.target]
    assert fft and all(says in c.reason for c in fft), report


def test_uneven_pools_use_no_operator_a_target_lacks(tmp_path):
    """Max: SLICE + REDUCE_MAX + CONCAT; average: one MATMUL (no per-window AVG_POOL2D, no GATHER)."""
    cases = [c for c in TABLES["pool_1d_adaptive"] if c.name in ("adaptive_avg_nondiv", "adaptive_max_nondiv")]
    report = partition_report(lower(FamilyModule(cases), family_inputs(cases)))
    ops = report.delegates[0].ops
    assert ops.get("MATMUL") == 1 and ops.get("REDUCE_MAX", 0) == 3 + 4 and "GATHER" not in ops, ops
