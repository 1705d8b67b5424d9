"""Non-float dtypes and the families that need them: int32/int64/bool tensors (int64 computed as int32),
fp16 tensors at the delegate boundary, comparisons, logic, where, index reads, argmax/argmin, fills and
casts. Integer and bool outputs must equal eager exactly; float ones within 1e-4 (NaN-aware)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from vulkan_delegate import partition_report, run_on_vulkan

aten = torch.ops.aten


class Fn(nn.Module):
    def __init__(self, fn, *buffers):
        super().__init__()
        self.fn = fn
        for i, b in enumerate(buffers):
            self.register_buffer(f"b{i}", b)

    def forward(self, *xs):
        return self.fn(*xs, *(getattr(self, f"b{i}") for i in range(len(self._buffers))))


def g(seed=0):
    return torch.Generator().manual_seed(seed)


def fl(*shape, seed=0):
    return torch.randn(*shape, generator=g(seed))


def ints(*shape, high=10, seed=0, dtype=torch.int64):
    return torch.randint(-high, high, shape, generator=g(seed), dtype=dtype)


def with_nan(x):
    x = x.clone()
    x.view(-1)[::5] = torch.nan
    return x


def bools(*shape, seed=0):
    return torch.rand(*shape, generator=g(seed)) > 0.5


def assert_same(y, ref):
    """Integer and bool outputs exactly; floats within 1e-4 of the output's scale, NaN where eager's is."""
    ys, refs = (y, ref) if isinstance(ref, tuple) else ((y,), (ref,))
    for a, b in zip(ys, refs, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
        if b.dtype.is_floating_point:
            torch.testing.assert_close(a.float(), b.float(), rtol=0, atol=1e-4 * max(b.float().nan_to_num().abs().max().item(), 1e-12),
                                       equal_nan=True)
        else:
            assert torch.equal(a, b), f"\n{a}\n!=\n{b}"


def check(vk_lower, model, inputs, fully=True, **kw):
    edge = vk_lower(model.eval(), inputs, **kw)
    report = partition_report(edge)
    if fully:
        assert not report.cpu_nodes, str(report)
    assert_same(run_on_vulkan(edge.to_executorch(), *inputs), model(*inputs))
    return edge


CASES = {
    # comparisons: Tensor and Scalar overloads, float (with NaN) and int inputs, bool outputs
    "compare_float_nan": (Fn(lambda a, b: (a == b, a != b, a < b, a <= b, a > b, a >= b)),
                          (with_nan(fl(4, 5)), torch.cat([fl(2, 5, seed=1), fl(2, 5)]))),
    "compare_scalar": (Fn(lambda a: (a > 0.25, a <= -0.5, aten.eq.Scalar(a, 0.0), aten.ne.Scalar(a, 1.0),
                                     aten.lt.Scalar(a, 0.0), aten.ge.Scalar(a, 0.1))), (fl(3, 7),)),
    "compare_int64_bcast": (Fn(lambda a, b: (a < b, a == 3, a >= b)), (ints(4, 6), ints(6, seed=1))),
    # logic on bool, bitwise on int32 and bool
    "logical": (Fn(lambda a, b: (a & b, a | b, a ^ b, ~a, torch.logical_and(a, b), torch.logical_or(a, b),
                                 torch.logical_xor(a, b), torch.logical_not(a))), (bools(3, 8), bools(3, 8, seed=1))),
    "logical_of_floats": (Fn(lambda a, b: (torch.logical_and(a, b), torch.logical_not(a))),
                          (torch.tensor([0.0, 1.5, -2.0, 0.0]), torch.tensor([0.0, 0.0, 3.0, 1.0]))),
    "bitwise_int32": (Fn(lambda a, b: (a & b, a | b, a ^ b, ~a, aten.bitwise_and.Scalar(a, 6),
                                       aten.bitwise_or.Scalar(a, 1), aten.bitwise_xor.Scalar(a, 3))),
                      (ints(5, 4, high=100, dtype=torch.int32), ints(5, 4, high=100, seed=1, dtype=torch.int32))),
    # where: tensor/tensor, scalar other (masked_fill), scalar self, both scalars, int values
    "where": (Fn(lambda c, a, b: (torch.where(c, a, b), torch.where(c, a, -1.5), torch.where(c, 2.0, b),
                                  a.masked_fill(c, float("-inf")))), (bools(3, 1, 5), fl(3, 4, 5), fl(4, 5))),
    "where_int": (Fn(lambda c, a: (torch.where(c, a, 7), torch.where(c, 1, 0))), (bools(4, 6), ints(4, 6))),
    # index reads
    "embedding": (Fn(lambda i, w: F.embedding(i, w), fl(11, 6)), (torch.tensor([[0, 10, 3], [5, 5, 1]]),)),
    "index_select": (Fn(lambda x, i: (x.index_select(1, i), x.index_select(0, i[2:]))),
                     (fl(3, 7, 2), torch.tensor([6, 0, 1, 2], dtype=torch.int32))),
    "index_tensor": (Fn(lambda x, i: (x[i], x[:, i], x[:, :, i[0] - 1])), (fl(5, 6, 4), torch.tensor([[4, 0], [1, 1]], dtype=torch.int32))),
    "gather": (Fn(lambda x, i: (torch.gather(x, 1, i), torch.gather(x, -1, i.transpose(0, 1)[:2, :1]))),
               (fl(3, 4), torch.tensor([[3, 0, 1], [2, 2, 2], [0, 1, 3]]))),
    # argmax / argmin: a dim, keepdim, every element, int input, NaN
    "argmax_argmin": (Fn(lambda x: (x.argmax(1), x.argmin(-1, keepdim=True), x.argmax(), x.argmin(0))),
                      (fl(4, 9, 3),)),
    "argmax_nan_int": (Fn(lambda x, i: (x.argmax(-1), i.argmin(0), i.argmax(1, keepdim=True))),
                       (with_nan(fl(3, 7)), ints(5, 4, high=3))),
    # fills (folded at compile time with static shapes) and casts
    "fills_casts": (Fn(lambda x, i: (x + torch.arange(5), torch.full_like(x, 2.5) * x, torch.zeros_like(i) + 3,
                                     torch.ones(3, 5) + x, x.to(torch.int32), i.float() * 0.5, (x * 2).bool(),
                                     i.bool(), i.to(torch.int32), x > torch.scalar_tensor(0.3))),
                    (fl(3, 5) * 4, ints(3, 5))),
    # int32 arithmetic wraps as torch's int32 does; int64 is computed as int32 where bounded (a constant
    # operand, an index read from a bounded table)
    "int_arith": (Fn(lambda i, c: (i + c, i * 3 - 1, -i, torch.maximum(i, c), torch.minimum(i, c) - c),
                     torch.arange(6, dtype=torch.int32) * 1000), (ints(2, 6, high=2**31 - 1, dtype=torch.int32),)),
    "int64_bounded": (Fn(lambda i, t: t[i] * 7 + torch.arange(4) - 3, torch.arange(10) * 1000), (ints(3, 4, high=5) + 5,)),
    "bool_in_out": (Fn(lambda m, x: (m, ~m, (x > 0) & m)), (bools(2, 5), fl(2, 5))),
    # fmod: C semantics (the dividend's sign), float and integer, Tensor and Scalar; int64 from a bounded
    # table read (as Swin-T's shifted-window roll computes its indices)
    "fmod": (Fn(lambda x, d, i, j, c, t, k: (torch.fmod(x, d), torch.fmod(x, 0.7), torch.fmod(x, -1.5), torch.fmod(i, c),
                                             torch.fmod(i, -3), torch.fmod(t[j], 6), torch.fmod(t[j] + 5, k[j])),
             torch.tensor([3, -4, 5, -7, 2, 9], dtype=torch.int32), torch.arange(-20, 20), torch.arange(40) % 7 - 9),
             (fl(4, 6) * 5, fl(6, seed=1), ints(4, 6, high=50, dtype=torch.int32), ints(3, 4, high=20) + 20)),
    # cache writes (the functional forms a buffer write exports as; the stateful forms:
    # test_vulkan_kv_cache.py): index_copy, single-index index_put (negative positions count from the
    # end), slice_scatter, copy (values broadcast into a slice), on float and int32 tensors
    "cache_write": (Fn(lambda x, s, i, n: (torch.index_copy(x, 1, i, s), aten.index_put(x, [None, i.int() - 4], s),
                                           torch.slice_scatter(x, s, dim=1, start=1, end=3), aten.copy(x, s[:, :1]),
                                           torch.index_copy(n, 0, i, n[:2] * 3))),
                    (fl(2, 4, 3), fl(2, 2, 3, seed=1), torch.tensor([3, 0]), ints(4, 5, dtype=torch.int32))),
}

# one case per family in the default suite (CI time); the rest under -m slow
DEFAULT = ["compare_float_nan", "logical", "where", "embedding", "gather", "argmax_nan_int", "fills_casts", "int_arith",
           "fmod", "cache_write"]


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in DEFAULT else pytest.mark.slow) for n in CASES])
def test_dtype_op(name, vk_lower):
    model, inputs = CASES[name]
    check(vk_lower, model, inputs)


def test_int64_arithmetic_without_a_bound_stays_on_cpu_with_reason(vk_lower):
    """int64 values from an input can be anything int64 holds: their sum is not computed as int32."""
    model, i = Fn(lambda i: (i + 1) * 2), ints(4, 3)
    edge = vk_lower(model, (i,))
    reasons = {c.target: c.reason for c in partition_report(edge).cpu_nodes}
    assert "not provably within int32" in reasons["aten.add.Tensor"], reasons
    assert torch.equal(run_on_vulkan(edge.to_executorch(), i), model(i))


def test_int64_bound_through_a_cpu_node_stays_on_cpu_not_an_exception(vk_lower):
    """The whole program bounds abs(t[j]) + 1 (t is a constant), but abs runs on the CPU, so in its
    partition the sum's operand is an input of unknown range: that claim must be withdrawn (it used to
    raise LoweringError out of to_edge_transform_and_lower)."""
    model = Fn(lambda j, t: torch.fmod(t[j] + 5, t[j].abs() + 1), torch.arange(-8, 8))
    j = torch.tensor([1, 3, 5])
    edge = vk_lower(model, (j,))
    reasons = {c.target: c.reason for c in partition_report(edge).cpu_nodes}
    assert "within its partition" in reasons["aten.add.Tensor"], reasons
    assert torch.equal(run_on_vulkan(edge.to_executorch(), j), model(j))


def test_int64_input_outside_int32_is_an_error_not_a_wrapped_value(vk_lower):
    model = Fn(lambda i, t: t[i], torch.arange(8.0))
    pte = vk_lower(model, (torch.tensor([1, 2]),)).to_executorch()
    assert torch.equal(run_on_vulkan(pte, torch.tensor([3, 7])), torch.tensor([3.0, 7.0]))
    with pytest.raises(RuntimeError):
        run_on_vulkan(pte, torch.tensor([1, 2**32 + 1]))  # wrapped to int32 it would read row 1


def test_dynamic_arange_is_filled_on_the_device(vk_lower):
    """arange over a dynamic length (a position id) is no constant: the fill shader writes it per call."""
    model = Fn(lambda x: (torch.arange(x.shape[1]) + 2, x * torch.arange(x.shape[1], dtype=torch.float32)))
    x = fl(2, 5)
    edge = vk_lower(model, (x,), dynamic_shapes=(({1: torch.export.Dim("s", min=2, max=16)},),))
    assert not partition_report(edge).cpu_nodes, str(partition_report(edge))
    pte = edge.to_executorch()
    for n in (3, 16):
        x = fl(2, n, seed=n)
        assert_same(run_on_vulkan(pte, x), model(x))


@pytest.mark.slow  # 16.8M elements on lavapipe
def test_dynamic_float_arange_past_2_pow_24_matches_torch(vk_lower):
    """Past 2^24, float(i) rounds: y[i] = float(i) * step + start in fp32 (before) was an ulp off torch on
    1 in 4 elements, whose CPU kernel sums in double per 8-wide block (fill.comp). arange(1, n + 1): every
    element, torch's own 1-ulp steps from the exact i + 1 included, must be equal. The reference runs on
    one thread: torch's result depends on where its threads split the range (each part starts a block)."""
    model = Fn(lambda x: x + torch.arange(1, x.shape[0] + 1, dtype=torch.float32))
    n = (1 << 24) + 4099  # a tail of 3 after the last 8-wide block
    edge = vk_lower(model, (torch.zeros(40),), dynamic_shapes=(({0: torch.export.Dim("n", max=1 << 25)},),))
    # only the size arithmetic (x.shape[0] + 1, a Python int) stays on the CPU
    assert all("built-in" in c.target for c in partition_report(edge).cpu_nodes), str(partition_report(edge))
    x = torch.zeros(n)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ref = model(x)
    finally:
        torch.set_num_threads(threads)
    y = run_on_vulkan(edge.to_executorch(), x)
    differ = (y != ref).nonzero().flatten()
    assert differ.numel() == 0, f"{differ.numel()} differ, first at {differ[:4].tolist()}: {y[differ[:4]]} vs {ref[differ[:4]]}"


def test_half_model_is_delegated_with_fp16_inputs_and_outputs(vk_lower):
    """A model.half() program: fp16 tensors at the boundary (stored fp16, computed in fp32)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 8)).eval().half()
    x = fl(3, 16).half()
    edge = vk_lower(model, (x,))
    assert not partition_report(edge).cpu_nodes, str(partition_report(edge))
    y, ref = run_on_vulkan(edge.to_executorch(), x), model.float()(x.float())
    assert y.dtype == torch.float16
    err = ((y.float() - ref).abs().max() / ref.abs().max()).item()
    assert err <= 1e-2, err


def test_rounding_division_of_floats_is_not_a_true_division(vk_lower):
    """div.Tensor_mode was lowered as a plain division, its rounding_mode ignored (-7.0 // 2 came back
    -3.5, 0.83 off). Trunc mode is the quotient truncated; floor mode (torch corrects floor(a / b) with
    fmod: 1.0 // 0.1 is 9) stays on the CPU with the reason."""
    x, d = torch.tensor([-7.0, 7.0, -7.0, 7.0, -1.0, 0.5, 1.0]), torch.tensor([2.0, -2.0, -2.0, 2.0, 3.0, -3.0, 0.1])
    model = Fn(lambda a, b: (torch.div(a, b, rounding_mode="trunc"), torch.div(a, b, rounding_mode="floor"),
                             a // 4))
    edge = vk_lower(model, (x, d))
    reasons = [c.reason for c in partition_report(edge).cpu_nodes]
    assert len(reasons) == 2 and all("rounding_mode='floor'" in r for r in reasons), reasons
    assert_same(run_on_vulkan(edge.to_executorch(), x, d), model(x, d))


def test_negative_power_of_zero_is_inf(vk_lower):
    """x ** -1 at x = 0 came back 0 (GLSL's pow is undefined there), torch gives inf; -0.5 of a negative
    base is NaN, of an odd negative integer power keeps the sign."""
    x = torch.tensor([0.0, -2.0, 0.5, 3.0, -1.5, 4.0])
    model = Fn(lambda a: (a ** -1, torch.pow(a, -2.0), torch.pow(a, -3), torch.pow(a, -0.5)))
    check(vk_lower, model, (x,))
