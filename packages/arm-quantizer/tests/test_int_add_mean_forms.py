"""The INT forms of add/sub and of the spatial mean are bit-exact against the PT2E fake-quant model.

add/sub: both int8 operands are RESCALEd to int32 in units of (larger scale) / 2^19, ADDed, and
RESCALEd once to int8 (the form vela folds into one NPU elementwise op). The spatial mean is one
REDUCE_SUM over the merged H*W axis and one RESCALE (exact single rounding), or a single AVG_POOL2D
for a global average pool (the quantizer gives its output the input's qparams).
"""

import pytest
import torch
import torch.nn.functional as F
from quant_harness import check_int
from torch import nn

from arm_quantizer import TOSAQuantizer, get_symmetric_quantization_config
from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report, run_on_reference_model
from arm_tosa_core.ops.elementwise import _NEARLY_UNIT, add_sub_factors
from arm_tosa_core.quantized import multiplier_shift
from arm_tosa_core.testing import FnModule as Fn
from arm_tosa_core.testing import lower

qd = torch.ops.quantized_decomposed


def test_add_factors_put_the_larger_scale_at_two_to_the_19():
    factors, unit = add_sub_factors([0.1, 0.025])
    assert factors == [2.0**19, 2.0**17] and unit == 0.1 / 2**19
    assert multiplier_shift(factors[0]) == (1 << 30, 11)  # the RESCALE vela folds into the ADD
    # equal scales: the second operand gets the equivalent factor with multiplier 2^31 - 1
    factors, _ = add_sub_factors([0.05, 0.05])
    assert factors[0] == 2.0**19 and factors[1] == _NEARLY_UNIT
    assert multiplier_shift(_NEARLY_UNIT) == ((1 << 31) - 1, 12)
    # int16 operands: 2^14 units per code (symmetric), 2^13 with a zero point (codes minus it need 17 bits)
    assert add_sub_factors([0.5, 0.25], wide=True)[0] == [2.0**14, 2.0**13]  # TFLite's int16 add: vela folds it
    assert add_sub_factors([0.5, 0.25], wide=True, zero_points=True)[0] == [2.0**13, 2.0**12]  # 17-bit codes


def test_nearly_unit_rescale_equals_two_to_the_19_for_every_int8_code():
    """TOSA RESCALE (SINGLE_ROUND): (x * m + 2^(s-1)) >> s. With (2^31 - 1, 12) it is x * 2^19 for
    every x = q - zero_point of int8 codes, so the equal-scale form changes no result."""
    x = torch.arange(-255, 256, dtype=torch.int64)
    m, s = multiplier_shift(_NEARLY_UNIT)
    assert torch.equal((x * m + (1 << (s - 1))) >> s, x * 2**19)


# the second input is 9x larger, so the two operands get different scales (except `same_tensor`)
ADD_CASES = [
    ("add", Fn(lambda s, a, b: a + b), [(1, 8, 16, 16), (1, 8, 16, 16)], "ADD"),
    ("sub", Fn(lambda s, a, b: a - b), [(4, 64), (4, 64)], "SUB"),
    ("same_tensor", Fn(lambda s, a: a + a), [(1, 8, 16, 16)], "ADD"),  # equal scales
    ("broadcast_relu", Fn(lambda s, a, b: F.relu(a + b)), [(2, 3, 40), (40,)], "ADD"),
    ("residual", Fn(lambda s, x: s.c(x) + x, c=nn.Conv2d(8, 8, 3, padding=1)), [(1, 8, 12, 12)], "ADD"),
]


@pytest.mark.parametrize("name,module,shapes,op", ADD_CASES, ids=[c[0] for c in ADD_CASES])
def test_add_sub_is_bit_exact_with_three_rescales(name, module, shapes, op):
    gen = torch.Generator().manual_seed(1)
    inputs = tuple(torch.randn(s, generator=gen) * (9.0 if i else 1.0) for i, s in enumerate(shapes))
    _, report, lsb, _ = check_int(module, inputs, max_lsb=0.0, case=name)
    ops = report.delegates[0].ops
    assert lsb == 0.0 and ops.get(op) == 1, ops
    # two operands to int32 and one back to int8 (plus the convolution's own RESCALE)
    assert ops.get("RESCALE") == 3 + ("CONV2D" in ops), ops


# module factories (built under a fixed seed in the test); odd windows, so no average is a tie (TOSA
# rounds a tie up, torch to even; ties are checked against the reference model on the NPU simulator)
GLOBAL_MEAN_CASES = [
    ("gap_linear", lambda: nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU6(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                         nn.Linear(16, 4)), (1, 3, 9, 9)),
    ("mean_hw", lambda: Fn(lambda s, x: s.c(x).mean((2, 3)), c=nn.Conv2d(3, 16, 1)), (2, 3, 7, 5)),
    ("mean_hw_keepdim", lambda: Fn(lambda s, x: s.c(x).mean((-1, -2), keepdim=True), c=nn.Conv2d(3, 8, 1)),
     (1, 3, 5, 5)),
]


def _pool_qparams(converted) -> list[tuple[tuple, tuple]]:
    """(input dequantize args, output quantize args) of every mean / adaptive average pool."""
    pairs = []
    for node in converted.graph.nodes:
        if node.op == "call_function" and ("mean" in str(node.target) or "adaptive_avg" in str(node.target)):
            (quantize,) = node.users
            pairs.append((tuple(node.args[0].args[1:]), tuple(quantize.args[1:])))
    return pairs


@pytest.mark.parametrize("name,module,shape", GLOBAL_MEAN_CASES, ids=[c[0] for c in GLOBAL_MEAN_CASES])
def test_global_average_shares_its_inputs_qparams_and_is_one_avg_pool(name, module, shape):
    """With `global_average_shares_qparams` (EthosUQuantizer's U85 default) the quantizer gives a global
    average pool (adaptive to 1x1, a mean over H and W) its input's qparams (`is_global_average`), as for
    max pooling: the INT form is one AVG_POOL2D (no REDUCE_SUM, no RESCALE of its own), bit-exact with the
    fake-quant model at odd windows (no ties)."""
    torch.manual_seed(0)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(2))
    quantizer = TOSAQuantizer(TosaCompileSpec("TOSA-1.0+INT")).set_global(get_symmetric_quantization_config())
    quantizer.global_average_shares_qparams = True
    _, report, lsb, converted = check_int(module(), (x,), max_lsb=0.0, quantizer=quantizer, case=name)
    (pair,) = _pool_qparams(converted)
    assert pair[0] == pair[1], pair
    ops = report.delegates[0].ops
    assert lsb == 0.0 and ops.get("AVG_POOL2D") == 1 and "REDUCE_SUM" not in ops, ops
    assert ops.get("TRANSPOSE", 0) == 1, ops  # the NCHW input only


OTHER_MEAN_CASES = [
    ("mean_h", lambda: Fn(lambda s, x: s.c(x).mean(2), c=nn.Conv2d(3, 16, 1)), (2, 3, 7, 5)),
    ("mean_chw", lambda: Fn(lambda s, x: s.c(x).mean((1, 2, 3)), c=nn.Conv2d(3, 8, 1)), (1, 3, 6, 6)),
]


@pytest.mark.parametrize("name,module,shape", OTHER_MEAN_CASES, ids=[c[0] for c in OTHER_MEAN_CASES])
def test_other_means_keep_their_own_qparams_and_round_once(name, module, shape):
    """A mean that is not a global average pool gets its own output qparams: the int32 sum of the
    codes (one REDUCE_SUM over the merged axes), rounded once by the RESCALE, like the fake-quant model."""
    torch.manual_seed(0)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(2))
    _, report, lsb, converted = check_int(module(), (x,), max_lsb=0.0, case=name)
    (pair,) = _pool_qparams(converted)
    assert pair[0] != pair[1], pair
    ops = report.delegates[0].ops
    assert lsb == 0.0 and ops.get("REDUCE_SUM") == 1 and "AVG_POOL2D" not in ops, ops


class SharedQparamsMean(nn.Module):
    """A quantized graph written out: the mean's output keeps its input's qparams (as a quantizer
    that shares them would produce)."""

    def forward(self, x):
        args = (0.04, -7, -128, 127, torch.int8)
        q = qd.quantize_per_tensor.default(x, *args)
        m = qd.dequantize_per_tensor.default(q, *args).mean((2, 3), keepdim=True)
        return qd.dequantize_per_tensor.default(qd.quantize_per_tensor.default(m, *args), *args)


def test_spatial_mean_with_shared_qparams_is_one_avg_pool():
    x = torch.randn(2, 1, 7, 7, generator=torch.Generator().manual_seed(3)) * 2
    module = SharedQparamsMean()
    edge = lower(module, (x,), TOSAPartitioner(TosaCompileSpec("TOSA-1.0+INT")))
    ops = partition_report(edge).delegates[0].ops
    assert ops.get("AVG_POOL2D") == 1 and "RESCALE" not in ops and "REDUCE_SUM" not in ops, ops
    assert torch.equal(run_on_reference_model(edge, x), module(x))


def test_adaptive_avg_pool2d_is_a_pooling_target():
    """Kept whole (not turned into mean.dim), adaptive_avg_pool2d lowers as adaptive pooling; the
    quantizer annotates it as an average (its own output qparams) unless it pools to 1x1."""
    from arm_tosa_core.registry import Quant, lookup, quant_lookup

    entry = lookup(torch.ops.aten.adaptive_avg_pool2d.default)
    assert entry is not None and entry.name == "adaptive_pool2d" and entry.quant == Quant.REDUCE
    assert quant_lookup(torch.ops.aten.adaptive_avg_pool2d.default) is entry
