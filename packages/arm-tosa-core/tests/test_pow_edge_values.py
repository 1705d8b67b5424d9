"""pow under TOSA FP gives what torch gives for every base, including those TOSA POW leaves
UNPREDICTABLE (a negative base, 0 ** y with y <= 0): the reference model runs the lowered graph to a
valid status (any other status raises) and the NaN-aware comparison matches NaN for NaN, inf for inf."""

import pytest
import torch

from arm_tosa_core.testing import FnModule as Fn
from arm_tosa_core.testing import check_lowering

NAN, INF = float("nan"), float("inf")
BASES = [0.0, -2.0, 3.0, -1.5, 0.5, -0.5, 1.0, -1.0, 2.0, NAN, INF, -INF]
EXPONENTS = [0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, 2.5, 70.0, -71.0, INF, -INF, NAN]


def test_tensor_exponent_every_base_and_exponent():
    base, exponent = torch.tensor(BASES)[:, None], torch.tensor(EXPONENTS)[None, :]
    expected = torch.pow(base, exponent)
    assert expected[0, 0] == 1 and expected[1, 0] == 1  # pow(0, 0) and pow(negative, 0): 1 in torch
    check_lowering(Fn(lambda s, a, b: torch.pow(a, b)), (base, exponent), case="pow tensor")


def test_pow_zero_and_negative_base_to_the_zero():
    """The issue's case: a graph the reference model called UNPREDICTABLE."""
    inputs = (torch.tensor([[0.0, -3.0, 0.0, -0.25]]), torch.tensor([[0.0, 0.0, 2.0, 2.0]]))
    result = check_lowering(Fn(lambda s, a, b: torch.pow(a, b)), inputs, case="pow(0, 0)")
    assert result.outputs.tolist() == [[1.0, 1.0, 0.0, 0.0625]]


@pytest.mark.parametrize("exponent", [0.5, -0.5, 2.5, 70.0, -71.0, INF, -INF, NAN, 0.0, 3.0, -1.0, -2.0])
def test_constant_exponent_every_base(exponent):
    base = torch.tensor([BASES])
    check_lowering(Fn(lambda s, a: a ** exponent), (base,), case=f"x ** {exponent}")


def test_zero_dim_result():
    check_lowering(Fn(lambda s, a, b: torch.pow(a.sum(), b.sum())), (torch.tensor([-1.0, -1.0]), torch.ones(2)),
                   case="0-d")
