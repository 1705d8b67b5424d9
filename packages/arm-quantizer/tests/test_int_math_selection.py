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
    ("activations", lambda s, a, b: (F.leaky_relu(a, 0.1), F.elu(a), F.glu(a), torch.logit(b), F.prelu(a, s.w)),
     [torch.randn(2, 8), torch.rand(2, 8) * 0.9 + 0.05]),
    ("compare_select", lambda s, a, b: (torch.where(a > b, a, b), torch.where(a <= 0.2, a, b), torch.where(b != a, a, b),
                                        torch.where(a >= -0.3, b, a), torch.where(a < b, b, a),
                                        torch.where(a == 0.0, b, a)), [torch.randn(2, 3, 8), torch.randn(8)]),
    ("norms_addmm", lambda s, a, x, y: (torch.linalg.vector_norm(a, 1, dim=-1), torch.linalg.vector_norm(a, dim=1),
                                        torch.linalg.vector_norm(a, float("inf"), dim=(0, 2), keepdim=True),
                                        torch.addmm(a[0], x, y, beta=0.5, alpha=2.0)),
     [torch.randn(2, 3, 5), torch.randn(3, 4), torch.randn(4, 5)]),
    ("minimum_maximum_broadcast", lambda s, a, b: (torch.minimum(a, b), torch.maximum(b, a)),
     [torch.randn(2, 3, 8), torch.randn(8)]),
    ("clamp_tensor_bounds", lambda s, a, b: (torch.clamp(a, b, b + 1), torch.clamp(a, min=b)),
     [torch.randn(2, 3, 8), torch.randn(8)]),
]


@pytest.mark.parametrize("name,fn,inputs", CASES, ids=[c[0] for c in CASES])
def test_int_math_within_one_lsb(name, fn, inputs):
    _, report, lsb, _ = check_int(Fn(fn, w=torch.tensor([0.25])), tuple(inputs), case=name)
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


def test_bool_mask_cast_to_float_stays_on_the_cpu_with_a_reason():
    """(a == b).float() has no quantized input to take qparams from: not claimed, never a crash."""
    model = Fn(lambda s, a, b: (a == b).float() + a)
    _, report, _, _ = check_int(model, (torch.randn(2, 8), torch.randn(2, 8)), expect_full=False)
    reasons = [c.reason for c in report.cpu_nodes if "quantize" not in c.target]
    assert reasons and all("not legal for TOSA-1.0+INT" in r for r in reasons), reasons
