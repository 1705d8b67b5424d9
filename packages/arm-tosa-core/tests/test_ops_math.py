"""Op tables: elementwise math, rounding division, selection, products and norms (FP) vs eager on the
TOSA reference model (within 1e-4 of the output magnitude), each graph checked by tosa-opt's strict
validation for the FP profile. Several variants share one lowering: exir's overhead dominates.
"""

import pytest
import torch
import torch.nn.functional as F

from arm_tosa_core import TosaCompileSpec, TOSAPartitioner
from arm_tosa_core.profile_check import validate_tosa
from arm_tosa_core.testing import FnModule as Fn
from arm_tosa_core.testing import check_lowering

torch.manual_seed(0)
FP = "TOSA-1.0+FP"


def inside(*shape, bound=0.95):
    return (torch.rand(*shape) * 2 - 1) * bound


def above_one(*shape):
    return torch.rand(*shape) * 3 + 1.05


_TIES = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49999, 8388609.0, -8388609.0, 0.49999997, -0.49999997,
                      2.5000002])
_DIVISORS = torch.tensor([3.0, -3.0, 7.0, -7.0, 0.5, -0.25, 1.75, 6.0])

CASES = [
    ("trig_rank1_to_3", lambda s, a, b, c: (torch.tan(a), torch.asin(a), torch.acos(b), torch.atan(c * 4),
                                            torch.atan(-c)), [inside(9), inside(2, 7), torch.randn(3, 1, 5)]),
    ("hyperbolic_rank4_5", lambda s, a, b, c: (torch.sinh(a), torch.cosh(a), torch.asinh(a * 10), torch.acosh(b),
                                               torch.atanh(c)),
     [torch.randn(2, 3, 4, 5), above_one(2, 1, 2, 3, 4), inside(1, 2, 3, 2, 2)]),
    ("exp_log_variants", lambda s, a, b: (torch.expm1(a), torch.log1p(b), torch.log10(b), torch.log2(b),
                                          torch.special.expm1(a), a.expm1_() * 1), [torch.randn(3, 6), above_one(6)]),
    ("sign_round_trunc", lambda s, a, t: (torch.sign(a), torch.round(a * 3), torch.trunc(a * 3), torch.round(t),
                                          torch.sign(a * 0), torch.fix(a * 2)), [torch.randn(4, 5), _TIES]),
    ("erfinv", lambda s, a: (torch.erfinv(a), torch.special.erfinv(a * 0.5)), [inside(4, 8, bound=0.999)]),
    ("decomposed_by_torch", lambda s, a, b: (torch.logit(b), torch.logit(b, eps=0.2), F.glu(a), F.glu(a, dim=0),
                                             F.prelu(a, s.w), F.leaky_relu(a, 0.2), F.elu(a)),
     [torch.randn(4, 6), torch.rand(4, 6) * 0.9 + 0.05]),
    ("div_rounding", lambda s, a, b: (torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"),
                                      a // b, torch.floor_divide(a, 3.0), torch.div(a, -7, rounding_mode="trunc"),
                                      2.0 // b), [torch.arange(-24.0, 24.0).reshape(6, 8), _DIVISORS]),
    ("remainder_fmod", lambda s, a, b: (torch.remainder(a, b), a % b, torch.fmod(a, b), a % 7, torch.fmod(a, -3.0),
                                        torch.remainder(a * 0.37, 1.75)),
     [torch.arange(-24.0, 24.0).reshape(6, 8), _DIVISORS]),
    ("minmax_clamp_tensor", lambda s, a, b: (torch.minimum(a, b), torch.maximum(b, a), torch.clamp(a, b, b + 1),
                                             torch.clamp(a, min=b), torch.clamp(a, max=s.w2)),
     [torch.randn(2, 3, 8), torch.randn(8)]),
    ("prod", lambda s, a: (a.prod(), a.prod(-1), a.prod(1, keepdim=True), a.prod(0)), [torch.rand(2, 3, 4) + 0.5]),
    ("var_every_correction", lambda s, a: (a.var(1), a.var(-1, correction=0), a.var((0, 2), correction=2),
                                           a.var(1, correction=1.5, keepdim=True), torch.var(a, unbiased=False)),
     [torch.randn(3, 5, 4)]),
    ("vector_norms", lambda s, a: (torch.linalg.vector_norm(a), torch.linalg.vector_norm(a, 1, dim=-1),
                                   torch.linalg.vector_norm(a, float("inf"), dim=(0, 2)),
                                   torch.linalg.vector_norm(a, 2, dim=1, keepdim=True), a.norm(dim=-1)),
     [torch.randn(2, 5, 6)]),
    ("addmm_beta_alpha", lambda s, b, x, y: (torch.addmm(b, x, y), torch.addmm(b, x, y, beta=0.5, alpha=2.0),
                                             torch.addmm(b[0], x, y, alpha=-1), torch.addmm(s.b, x, s.m, beta=3)),
     [torch.randn(3, 5), torch.randn(3, 4), torch.randn(4, 5)]),
]

_ATTRS = {"w": torch.tensor([0.25]), "w2": torch.full((8,), 0.3), "b": torch.randn(5), "m": torch.randn(4, 5)}


@pytest.mark.parametrize("name,fn,inputs", CASES, ids=[c[0] for c in CASES])
def test_math_family_matches_eager_and_is_valid_fp(name, fn, inputs, tmp_path):
    spec = TosaCompileSpec(FP).dump_intermediate_artifacts_to(str(tmp_path))
    inputs = [x.clone() for x in inputs]
    module = Fn(lambda s, *xs: fn(s, *(x.clone() for x in xs)), **_ATTRS)
    check_lowering(module, inputs, case=name, partitioner=TOSAPartitioner(spec))
    graphs = sorted(tmp_path.glob("*.tosa"))
    assert graphs, "no TOSA graph was written"
    problems = [p for g in graphs for p in validate_tosa(g, FP)]
    assert not problems, problems


def test_integer_floor_division_needs_the_int_profile():
    """TOSA 1.0 FP has INTDIV (truncation) but no int32 comparison: floor mode stays on the CPU, saying why;
    trunc mode and fmod lower; under the INT profile all of them lower and match torch exactly."""
    a = torch.arange(-24, 24, dtype=torch.int32).reshape(6, 8)
    b = torch.tensor([3, -3, 7, -7, 1, -1, 5, 6], dtype=torch.int32)
    floor = Fn(lambda s, x, y: (torch.div(x, y, rounding_mode="floor"), torch.remainder(x, y), x // 3))
    res = check_lowering(floor, [a, b], spec=FP, expect_full=False)
    reasons = {c.reason for c in res.report.cpu_nodes}
    assert reasons and all("only the INT profile" in r for r in reasons), reasons
    trunc = Fn(lambda s, x, y: (torch.div(x, y, rounding_mode="trunc"), torch.fmod(x, y)))
    check_lowering(trunc, [a, b], spec=FP)
    check_lowering(floor, [a, b], spec="TOSA-1.0+INT")


def test_erfinv_is_not_rejected_by_exirs_core_aten_check():
    """erfinv is not core ATen: it is kept whole for our lowering instead of failing exir's check."""
    res = check_lowering(Fn(lambda s, x: torch.erfinv(x)), [inside(16)], spec=FP)
    assert res.report.delegates and not res.report.cpu_nodes


def test_int32_selection_and_extrema_lower_under_the_int_profile(tmp_path):
    """Integer tensors (not quantized): amax/amin, comparisons, where, minimum, clamp with tensor bounds."""
    a = torch.randint(-50, 50, (2, 3, 8), dtype=torch.int32)
    b = torch.randint(-50, 50, (8,), dtype=torch.int32)
    module = Fn(lambda s, x, y: (x.amax(1), x.amin(-1, keepdim=True), torch.where(x > y, x, y), x == y, x <= 3,
                                 torch.minimum(x, y), torch.clamp(x, y, y + 5)))
    spec = TosaCompileSpec("TOSA-1.0+INT").dump_intermediate_artifacts_to(str(tmp_path))
    check_lowering(module, [a, b], partitioner=TOSAPartitioner(spec))
    problems = [p for g in sorted(tmp_path.glob("*.tosa")) for p in validate_tosa(g, "TOSA-1.0+INT")]
    assert not problems, problems
