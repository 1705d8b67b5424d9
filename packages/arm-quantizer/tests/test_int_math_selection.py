"""INT op tables: elementwise math as TABLE, selection on shared qparams, and observers that see only
finite float values (an additive -inf attention mask, max.dim's int64 indices). Each result is within
1 LSB of the PT2E fake-quantized module on the TOSA reference model.
"""

import warnings

import pytest
import torch
import torch.nn.functional as F
from quant_harness import check_int, quantize

from arm_tosa_core.testing import FnModule as Fn

torch.manual_seed(0)


def inside(*shape, bound=0.9):
    return (torch.rand(*shape) * 2 - 1) * bound


CASES = [
    ("trig_tables", lambda s, a: (torch.tan(a), torch.asin(a), torch.acos(a), torch.atan(a * 3), torch.atanh(a)),
     [inside(2, 3, 8)]),
    ("hyperbolic_exp_log_tables", lambda s, a, b: (torch.sinh(a), torch.cosh(a), torch.asinh(a), torch.acosh(b),
                                                   torch.expm1(a), torch.log1p(b), torch.log10(b)),
     [torch.randn(4, 8), torch.rand(4, 8) * 3 + 1.05]),
    ("sign_round_erfinv_tables", lambda s, a: (torch.sign(a), torch.round(a * 3), torch.erfinv(a * 0.9)),
     [inside(3, 16)]),
    ("activations", lambda s, a: (F.leaky_relu(a, 0.1), F.elu(a)), [torch.randn(2, 8)]),
    ("minimum_maximum_broadcast", lambda s, a, b: (torch.minimum(a, b), torch.maximum(b, a)),
     [torch.randn(2, 3, 8), torch.randn(8)]),
    ("clamp_tensor_bounds", lambda s, a, b: (torch.clamp(a, b, b + 1), torch.clamp(a, min=b)),
     [torch.randn(2, 3, 8), torch.randn(8)]),
]


@pytest.mark.parametrize("name,fn,inputs", CASES, ids=[c[0] for c in CASES])
def test_int_math_within_one_lsb(name, fn, inputs):
    _, report, lsb, _ = check_int(Fn(fn), tuple(inputs), case=name)
    assert report.delegates and lsb <= 1.0


def test_sdpa_with_additive_minus_inf_mask_input_quantizes_and_lowers():
    """A runtime additive mask holding -inf: observers leave the -inf out (and warn), not NaN ranges."""
    mask = torch.zeros(1, 1, 4, 4)
    mask[..., 2:] = float("-inf")
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    model = Fn(lambda s, q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, report, lsb, _ = check_int(model, (q, k, v, mask), expect_full=False)
    assert any("non-finite" in str(w.message) for w in caught), [str(w.message) for w in caught]
    assert report.delegates and lsb <= 1.0


def test_integer_indices_are_never_observed():
    """max(dim) returns int64 indices next to the values: quantizing must not observe them."""
    model = Fn(lambda s, x, i: (x.max(1)[0], x.max(1)[1], i.amax(1), x * i.amin(-1, keepdim=True)))
    converted = quantize(model, (torch.randn(2, 8), torch.randint(-5, 5, (2, 8))))
    with torch.no_grad():
        values, indices, imax, _ = converted(torch.randn(2, 8), torch.randint(-5, 5, (2, 8)))
    assert indices.dtype == torch.int64 and imax.dtype == torch.int64 and values.dtype == torch.float32
