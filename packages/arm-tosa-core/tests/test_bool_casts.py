"""Casts to and from bool, and int32 clamps, lower to operators that TOSA 1.0 has.

TOSA 1.0 has no CAST between bool and float (1.1 adds it) and no int32 CLAMP in any profile:
bool -> float is SELECT(mask, 1, 0), float -> bool is LOGICAL_NOT(EQUAL(x, 0)), and an int32 clamp is
MAXIMUM/MINIMUM. Each graph matches eager on the reference model and passes tosa-opt's strict check.
"""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from arm_tosa_core import TosaCompileSpec, TOSAPartitioner
from arm_tosa_core.builder import DType, Op, TosaGraphBuilder, scalar_bytes
from arm_tosa_core.errors import LoweringError
from arm_tosa_core.ops.elementwise import nan_propagate
from arm_tosa_core.profile_check import validate_tosa
from arm_tosa_core.testing import FnModule, check_lowering

FP, INT = "TOSA-1.0+FP", "TOSA-1.0+INT"


def _problems(directory: Path, spec: str) -> list[str]:
    graphs = sorted(directory.glob("*.tosa"))
    assert graphs, f"no partition was written to {directory}"
    return [f"{g.name}: {p}" for g in graphs for p in validate_tosa(g, spec)]


def _check(module, inputs, spec: str, tmp_path: Path, case: str):
    partitioner = TOSAPartitioner(TosaCompileSpec(spec).dump_intermediate_artifacts_to(tmp_path))
    result = check_lowering(module, inputs, case=case, partitioner=partitioner)
    assert _problems(tmp_path, spec) == []
    assert len(result.report.delegates) == 1, result.report
    return result.report.delegates[0].ops


def _with_zeros(*shape) -> torch.Tensor:
    """Halves in [-1, 1]: about a fifth of them exactly 0, so float -> bool sees both outcomes."""
    return torch.randint(-2, 3, shape, generator=torch.Generator().manual_seed(0)).float() / 2


# -- the forms the lowering avoids are invalid TOSA 1.0 -----------------------------------------
def test_validator_rejects_bool_float_cast_and_int32_clamp():
    with pytest.raises(LoweringError, match="CAST has no BOOL -> FP32"):  # the builder refuses them itself
        TosaGraphBuilder().op(Op.CAST, [TosaGraphBuilder().input((2, 3), DType.BOOL, "m")], (2, 3), DType.FP32)
    b = TosaGraphBuilder()
    b.check_dtypes = False  # build the invalid graphs anyway, for tosa-opt
    b.output(b.op(Op.CAST, [b.input((2, 3), DType.BOOL, "m")], (2, 3), DType.FP32))
    assert any("tosa.cast" in p for p in validate_tosa(b.serialize(), "TOSA-1.0+FP+INT"))

    b = TosaGraphBuilder()
    b.check_dtypes = False
    b.output(b.op(Op.CLAMP, [b.input((2, 3), DType.INT32, "x")], (2, 3), DType.INT32,
                  scalar_bytes(-1, DType.INT32), scalar_bytes(1, DType.INT32), nan_propagate()))
    assert any("tosa.clamp" in p for p in validate_tosa(b.serialize(), INT))


# -- bool <-> float under FP -----------------------------------------------------------------------
_BOOL_FLOAT = [
    ("bool_to_float", lambda s, a: ((a > 0).float() * 3 + a, (a < 0).half() * 2), {"SELECT": 2}),
    ("float_to_bool", lambda s, a, b: (torch.where(a.bool(), a, b), torch.where((a * b).bool(), 1.0, b)),
     {"EQUAL": 2, "LOGICAL_NOT": 2}),
    ("round_trip", lambda s, a: a.bool().float() - a, {"EQUAL": 1, "LOGICAL_NOT": 1, "SELECT": 1}),
]


@pytest.mark.parametrize("name,fn,expected", _BOOL_FLOAT, ids=[c[0] for c in _BOOL_FLOAT])
def test_bool_float_casts_use_fp_operators(name, fn, expected, tmp_path):
    n_inputs = fn.__code__.co_argcount - 1
    inputs = tuple(_with_zeros(3, 5) for _ in range(n_inputs))
    ops = _check(FnModule(fn), inputs, FP, tmp_path, name)
    assert "CAST" not in ops, ops
    assert all(ops.get(op, 0) >= n for op, n in expected.items()), ops


def test_bool_float_casts_are_valid_with_both_profiles(tmp_path):
    module = FnModule(lambda s, a: (a > 0.25).float() + a.bool().float() * a)
    ops = _check(module, (_with_zeros(2, 3, 4),), "TOSA-1.0+FP+INT", tmp_path, "fp_int")
    assert "CAST" not in ops and ops.get("SELECT") == 2 and ops.get("LOGICAL_NOT") == 1, ops


# -- bool <-> int32 under INT: TOSA 1.0 has these CASTs --------------------------------------------
def test_bool_int_casts_are_casts_under_int(tmp_path):
    module = FnModule(lambda s, a: ((a > 1).int() + a, a.bool().int() * 3 - a))
    x = torch.randint(-3, 4, (3, 6), dtype=torch.int32, generator=torch.Generator().manual_seed(1))
    ops = _check(module, (x,), INT, tmp_path, "bool_int")
    assert ops.get("CAST") == 3, ops  # int -> bool and two bool -> int


# -- int32 clamps under INT ------------------------------------------------------------------------
_INT_CLAMPS = [
    ("clamp", lambda s, a: torch.clamp(a, -2, 3), {"MAXIMUM": 1, "MINIMUM": 1}),
    ("clamp_min_max_only", lambda s, a: (a.clamp(min=1), a.clamp(max=-1)), {"MAXIMUM": 1, "MINIMUM": 1}),
    ("relu", lambda s, a: torch.relu(a) - a, {"MAXIMUM": 1}),
    ("hardtanh", lambda s, a: F.hardtanh(a, -4, 2) * 2, {"MAXIMUM": 1, "MINIMUM": 1}),
    ("int64", lambda s, a: a.long().clamp(-3, 1) + 1, {"MAXIMUM": 1, "MINIMUM": 1}),
    ("constant_operand", lambda s, a: a + s.k.clamp(-1, 1), {}),  # folded at compile time
]


@pytest.mark.parametrize("name,fn,expected", _INT_CLAMPS, ids=[c[0] for c in _INT_CLAMPS])
def test_int32_clamps_are_maximum_minimum(name, fn, expected, tmp_path):
    k = torch.arange(-3, 3, dtype=torch.int32)
    x = torch.randint(-6, 7, (4, 6), dtype=torch.int32, generator=torch.Generator().manual_seed(2))
    ops = _check(FnModule(fn, k=k), (x,), INT, tmp_path, name)
    assert "CLAMP" not in ops, ops
    assert {op: ops.get(op, 0) for op in ("MAXIMUM", "MINIMUM") if ops.get(op)} == expected, ops


def test_float_clamps_still_use_clamp(tmp_path):
    ops = _check(FnModule(lambda s, a: F.hardtanh(a, -0.5, 0.5) + torch.relu(a)), (_with_zeros(3, 4),),
                 FP, tmp_path, "float_clamp")
    assert ops.get("CLAMP") == 2 and "MAXIMUM" not in ops, ops
