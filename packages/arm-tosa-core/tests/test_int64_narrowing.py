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


def _grow_in_a_loop(s, x):
    """A while_loop whose body multiplies an int64 value past int32 (10^3 -> 10^12) beside a counter."""
    from torch._higher_order_ops.while_loop import while_loop

    _, out = while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 1000), (torch.zeros((), dtype=torch.int64), x))
    return out


def test_int64_arithmetic_in_a_loop_body_is_held_to_the_proof():
    """The body's `v * 1000` reached 10^12 and came back wrapped (INT32, 1e12 off); the int32 proof now covers
    loop bodies. A counter is proved by the loop's own condition (`control_flow.loop_counters`): the op table's
    `while_loop_counter` stays one partition (test_control_flow.py)."""
    res = check_lowering(Fn(_grow_in_a_loop), [torch.tensor([1000, -7, 3])], spec="TOSA-1.0+FP+INT+cf",
                         expect_full=False)
    reasons = {c.target: c.reason for c in res.report.cpu_nodes}
    assert "node aten_mul_tensor of its loop body" in reasons["while_loop"], reasons
    assert "would wrap past +-2^31" in reasons["while_loop"], reasons
