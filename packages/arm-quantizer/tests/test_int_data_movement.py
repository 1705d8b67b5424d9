"""INT op tables of arm_tosa_core.op_tables (flip, slice/select_scatter, stack, views, pad, repeat,
cumsum): the
TOSA INT result is within 1 LSB of the PT2E fake-quantized module (one lowering per family)."""

import pytest
from quant_harness import check_int

from arm_tosa_core.op_tables import TABLES, FamilyModule, family_inputs

# Cases that stay on the CPU in INT (their reasons are checked by the FP table test or listed here).
NOT_LOWERED = {"slice_select_scatter-slice_scatter_step"}


@pytest.mark.parametrize("family", ["flip", "slice_select_scatter", "stack", "constant_pad", "repeat", "views",
                                    "cumsum"])
def test_family_int_within_one_lsb(family):
    cases = [c for c in TABLES[family] if c.id not in NOT_LOWERED and "INT" in c.profiles]
    _, report, lsb, _ = check_int(FamilyModule(cases), family_inputs(cases), case=family)
    assert report.delegates and lsb <= 1.0
