"""Programs that used to crash lowering or the reference run (issue 9): each now lowers within
tolerance, or keeps the node on the CPU with a reason in `partition_report`."""

import torch

from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report, run_on_reference_model
from arm_tosa_core.testing import FnModule as Fn
from arm_tosa_core.testing import check_lowering, lower

torch.manual_seed(0)


class CatTupleDim(torch.nn.Module):
    def forward(self, t: tuple, dim: int):
        return torch.cat(t, dim)


def test_tuple_of_tensors_and_python_int():
    """Pytree inputs `((x, y), 1)`: an input named like a builder tensor (`t_1`) no longer clashes."""
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    edge = lower(CatTupleDim(), ((x, y), 1))
    assert not partition_report(edge).cpu_nodes
    torch.testing.assert_close(run_on_reference_model(edge, (x, y), 1), torch.cat((x, y), 1), rtol=0, atol=0)


def test_rsub_alpha_scales_the_subtracted_operand():
    check_lowering(Fn(lambda s, a, b: torch.rsub(a, b, alpha=3)), (torch.randn(2, 5), torch.randn(2, 5)))
    check_lowering(Fn(lambda s, a: torch.ops.aten.rsub.Scalar(a, 2.0, 0.5)), (torch.randn(2, 5),))


def test_integer_pow_with_tensor_exponent_stays_on_cpu_with_reason():
    """TOSA POW is float-only: an int32 pow with a tensor exponent used to be an invalid graph."""
    a = torch.randint(-4, 5, (2, 6), dtype=torch.int32)
    b = torch.randint(0, 4, (2, 6), dtype=torch.int32)
    module = Fn(lambda s, a, b: torch.pow(a, b) + a)
    edge = lower(module, (a, b), TOSAPartitioner(TosaCompileSpec("TOSA-1.0+INT")))
    reasons = [c.reason for c in partition_report(edge).cpu_nodes if "pow" in c.target]
    assert reasons and "TOSA POW is float-only" in reasons[0], partition_report(edge)
    assert torch.equal(run_on_reference_model(edge, a, b), module(a, b))


def test_integer_pow_with_constant_exponent_lowers_exactly():
    a = torch.randint(-5, 6, (2, 8), dtype=torch.int32)
    module = Fn(lambda s, a: torch.pow(a, 3))
    edge = lower(module, (a,), TOSAPartitioner(TosaCompileSpec("TOSA-1.0+INT")))
    assert not partition_report(edge).cpu_nodes
    assert torch.equal(run_on_reference_model(edge, a), module(a))
