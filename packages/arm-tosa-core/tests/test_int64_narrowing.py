"""int64 arithmetic that TOSA computes in INT32 (add, sub, mul, sum): it lowers only where `int_range`
proves the result within int32, so a value torch computes past +-2^31 is never silently wrapped."""

import pytest
import torch

from arm_tosa_core.testing import FnModule as Fn
from arm_tosa_core.testing import check_lowering


@pytest.mark.parametrize("spec", ["TOSA-1.0+FP", "TOSA-1.0+INT"])
def test_int64_product_past_int32_stays_on_cpu(spec):
    """x * x with x = 2^20 (inputs within int32, product 2^40) came back 0 from the delegate."""
    x = torch.tensor([2**20, 3, -(2**21), 46341])
    res = check_lowering(Fn(lambda s, x: (x * x, x + x - 1)), [x], spec=spec, expect_full=False)
    reasons = {c.target: c.reason for c in res.report.cpu_nodes}
    assert "would wrap past +-2^31" in reasons["aten.mul.Tensor"], reasons
    assert "would wrap past +-2^31" in reasons["aten.add.Tensor"], reasons


def test_bounded_int64_arithmetic_still_lowers():
    """Bounds from constants, shapes and index uses prove these within int32: still one partition."""
    table = torch.randn(64, 4)
    model = Fn(lambda s, i, m: (torch.nn.functional.embedding(i + 1, s.t), (torch.arange(8) * 3 - 2) * i.shape[0],
                                m.sum(-1) * 2 + 1), t=table)
    check_lowering(model, [torch.tensor([[3, 60]]), torch.tensor([[True, False, True]])], spec="TOSA-1.0+INT",
                   expect_full=False)
    res = check_lowering(Fn(lambda s, i: torch.nn.functional.embedding(i * 2 + 1, s.t), t=table),
                         [torch.tensor([[3, 31]])])
    assert not res.report.cpu_nodes, str(res.report)


def test_float_to_int64_cast_stays_on_cpu():
    """TOSA computes int64 as int32 and CAST saturates: (x * 1e10).long() came back 2147483647 for 1e10.
    The cast stays on the CPU with the reason; the float math before it is still delegated, and the result
    equals eager (check_lowering runs the program with the reference model)."""
    x = torch.tensor([1.0, -2.5, 0.3, 7.0])
    res = check_lowering(Fn(lambda s, x: (x * 1e10).to(torch.int64)), [x], spec="TOSA-1.0+FP", expect_full=False)
    reasons = {c.target: c.reason for c in res.report.cpu_nodes}
    assert any("float to int64 cast" in r for r in reasons.values()), reasons
    assert "aten.mul.Tensor" not in reasons, reasons
