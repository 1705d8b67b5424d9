"""The shared comparison is NaN-aware: it can fail on NaN or inf, and passes where both sides agree on them."""

import pytest
import torch

from arm_tosa_core.testing import FnModule, check_lowering, compare_outputs, max_relative_error

NAN, INF = float("nan"), float("inf")


def test_an_all_nan_output_fails():
    expected = torch.tensor([[0.5, -1.0], [2.0, 0.0]])
    comparison = compare_outputs(torch.full((2, 2), NAN), expected)
    assert comparison.max_error == INF and not comparison.within(1e9)
    assert "4 NaN where the reference is finite" in comparison.nonfinite
    assert max_relative_error(torch.full((2, 2), NAN), expected) == (INF, 2.0)


def test_an_inf_where_the_reference_is_finite_fails_and_says_where():
    actual, expected = torch.zeros(2, 3), torch.zeros(2, 3)
    actual[1, 2] = -INF
    comparison = compare_outputs((torch.zeros(1), actual), (torch.zeros(1), expected))
    assert not comparison.within(1e9)
    assert "output 1: 1 of 6" in comparison.nonfinite and "first at (1, 2)" in comparison.nonfinite


@pytest.mark.parametrize("got", [1.0, INF, -INF], ids=["finite", "inf", "other_sign"])
def test_a_nan_or_inf_reference_needs_the_same_value(got):
    assert not compare_outputs(torch.tensor([0.0, got]), torch.tensor([0.0, NAN])).within(1e9)
    if got != -INF:
        assert not compare_outputs(torch.tensor([got]), torch.tensor([-INF])).within(1e9)


def test_both_nan_and_same_signed_inf_pass_with_the_error_over_the_rest():
    actual = torch.tensor([NAN, INF, -INF, 1.0, 2.5])
    expected = torch.tensor([NAN, INF, -INF, 1.0, 2.0])
    comparison = compare_outputs(actual, expected)
    assert comparison.nonfinite == "" and comparison.max_error == 0.5 and comparison.max_magnitude == 2.0
    assert comparison.within(0.5) and not comparison.within(0.4)


def test_check_lowering_fails_on_a_nan_output_of_the_reference_model():
    zero = torch.zeros(1, 4)
    with pytest.raises(AssertionError, match="4 NaN where the reference is finite"):
        check_lowering(FnModule(lambda s, x: x / x), (zero,), expected=torch.zeros(1, 4))
    check_lowering(FnModule(lambda s, x: x / x), (zero,))  # torch gives NaN too: they agree
