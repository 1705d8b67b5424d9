"""Dtype variants of the common families (arm_tosa_core.op_tables: dtype_int8/int16/int32, dtype_fp16).

Plain int8/int16/int32 tensors under TOSA-1.0+INT must match eager exactly (integer arithmetic wraps
the same way); float16 under TOSA-1.0+FP within 1e-3 of the largest output (about one float16 ulp).
Each family is one module (one lowering), and every written graph passes tosa-opt's strict
validation for its profile. Variants TOSA 1.0 cannot express stay on the CPU with a reason that
names the limit."""

import pytest
import torch
import torch.nn.functional as F

from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report
from arm_tosa_core.op_tables import TABLES, FamilyModule, family_inputs
from arm_tosa_core.profile_check import validate_tosa
from arm_tosa_core.testing import FnModule, check_lowering, lower

FAMILIES = [("dtype_int8", "INT", 0.0), ("dtype_int16", "INT", 0.0), ("dtype_int32", "INT", 0.0),
            ("dtype_int32", "FP", 0.0), ("dtype_fp16", "FP", 1e-3)]


@pytest.mark.parametrize("family,profile,rtol", FAMILIES, ids=[f"{f}-{p}" for f, p, _ in FAMILIES])
def test_family_matches_eager_and_validates(family, profile, rtol, tmp_path):
    cases = [c for c in TABLES[family] if profile in c.profiles]
    spec = f"TOSA-1.0+{profile}"
    compile_spec = TosaCompileSpec(spec).dump_intermediate_artifacts_to(tmp_path)
    check_lowering(FamilyModule(cases), family_inputs(cases), case=family, rtol=rtol,
                   partitioner=TOSAPartitioner(compile_spec))
    graphs = sorted(tmp_path.glob("*.tosa"))
    assert graphs and not [p for g in graphs for p in validate_tosa(g, spec)]


def _ints(*shape, dtype=torch.int32):
    return torch.randint(-50, 50, shape, generator=torch.Generator().manual_seed(0)).to(dtype)


# (name, fn, inputs, spec, words the CPU reason must contain): TOSA 1.0 limits, not missing rules
ON_THE_CPU = [
    ("int32_compare_under_fp", lambda s, a: a > 0, (_ints(2, 3),), "TOSA-1.0+FP", "needs the INT profile"),
    ("int32_reshape_under_fp", lambda s, a: a.view(-1) + 1, (_ints(2, 3),), "TOSA-1.0+FP", "INT profile"),
    ("int16_max_pool_without_extension", lambda s, a: F.max_pool2d(a, 2), (_ints(1, 1, 4, 4, dtype=torch.int16),),
     "TOSA-1.0+INT", "int16"),
    ("int32_argmax", lambda s, a: a.argmax(-1), (_ints(2, 3),), "TOSA-1.0+INT", "ARGMAX has no INT32"),
    ("int_true_division_under_int", lambda s, a, b: a / (b.abs() + 1), (_ints(2, 3), _ints(2, 3)),
     "TOSA-1.0+INT", "float32, not legal"),
]


@pytest.mark.parametrize("name,fn,inputs,spec,says", ON_THE_CPU, ids=[c[0] for c in ON_THE_CPU])
def test_inexpressible_variant_stays_on_the_cpu_with_its_reason(name, fn, inputs, spec, says):
    report = partition_report(lower(FnModule(fn), inputs, spec=spec))
    reasons = [c.reason for c in report.cpu_nodes]
    assert reasons and any(says in r for r in reasons), report
