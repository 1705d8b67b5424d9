"""`transpose_forms`: a TRANSPOSE written "collapsed" (RESHAPE, TRANSPOSE of the fewest axes, RESHAPE) moves
the same bytes to the same places as the one TRANSPOSE, on the TOSA reference model."""

import pytest
import torch

from arm_tosa_core.builder import DType, Op, TosaGraphBuilder
from arm_tosa_core.reference import run_tosa
from arm_tosa_core.transpose_forms import collapse, collapse_for_vela, transpose_form


def test_collapse_merges_axes_that_stay_together_and_drops_unit_axes():
    assert collapse((1, 3, 128, 128), (0, 2, 3, 1)) == ((3, 16384), (1, 0))  # NCHW -> NHWC of an image
    assert collapse((1, 128, 128, 3), (0, 3, 1, 2)) == ((16384, 3), (1, 0))  # NHWC -> NCHW
    assert collapse((1, 58, 2, 28, 28), (0, 2, 1, 3, 4)) == ((58, 2, 784), (1, 0, 2))  # channel shuffle
    assert collapse((1, 1, 5, 1), (0, 2, 1, 3)) == ((5,), (0,))  # only unit axes move: a reshape
    assert collapse((2, 3, 4, 5), (0, 2, 1, 3)) is None  # nothing to merge
    # within vela's TRANSPOSE limits only: [3, 262144] has an axis past 2^16, [2, 3, 4, 5] keeps four axes
    assert collapse_for_vela((1, 3, 128, 128), (0, 2, 3, 1)) == ((3, 16384), (1, 0))
    assert collapse_for_vela((1, 3, 512, 512), (0, 2, 3, 1)) is None
    assert collapse_for_vela((1, 1, 5, 1), (0, 2, 1, 3)) == ((5,), (0,))  # a reshape has no axis limit
    with pytest.raises(ValueError, match="transpose form"):
        with transpose_form("diagonal"):
            pass


def _graph(shape: tuple[int, ...], perm: tuple[int, ...], form: str) -> tuple[bytes, dict[str, int]]:
    b = TosaGraphBuilder()
    x = b.input(shape, DType.INT8, "x")
    b.output(b.op(Op.TRANSPOSE, [x], [shape[p] for p in perm], DType.INT8, list(perm)))
    with transpose_form(form):
        flatbuffer = b.serialize()
    return flatbuffer, b.op_counts()


@pytest.mark.parametrize(("shape", "perm"), [((1, 3, 16, 16), (0, 2, 3, 1)), ((1, 16, 16, 3), (0, 3, 1, 2)),
                                             ((1, 6, 2, 5, 5), (0, 2, 1, 3, 4)), ((1, 1, 5, 1), (0, 2, 1, 3)),
                                             ((2, 3, 4, 5), (0, 2, 1, 3)), ((4, 1, 3, 2), (3, 1, 0, 2))])
def test_collapsed_transpose_is_bit_exact_on_the_reference_model(shape, perm):
    x = torch.randint(-128, 128, shape, dtype=torch.int8, generator=torch.Generator().manual_seed(0))
    expected = x.permute(*perm)
    as_is, as_is_ops = _graph(shape, perm, "as-is")
    collapsed, collapsed_ops = _graph(shape, perm, "collapsed")
    assert as_is_ops == {"TRANSPOSE": 1}
    fewer = collapse_for_vela(shape, perm)
    if fewer is None:
        assert collapsed == as_is
    elif list(fewer[1]) == sorted(fewer[1]):
        assert collapsed_ops == {"RESHAPE": 1}
    else:
        assert collapsed_ops == {"RESHAPE": 2, "TRANSPOSE": 1}
    for flatbuffer in (as_is, collapsed):
        (out,) = run_tosa(flatbuffer, [x])
        assert torch.equal(out.to(torch.int8), expected)
