"""Op tables: the single-op cases that the tests and the coverage benchmark both read.

Each `OpCase` is a small function of its inputs (`fn(self, *inputs)`, built into a module with
`case.module()`), the input shapes, and the profiles it claims ("FP", "INT"). `TABLES` maps an op
family to its cases; add a family by adding a list here, and both the family's parametrized test
and `nox -s bench`'s coverage table (ours beside the competitor's, `bench/op_coverage.py`) pick it up.

This file imports only torch: the benchmark loads it by path in processes that must not import the
`arm_tosa_core` package (see bench/README.md, "Isolation").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F


class CaseModule(torch.nn.Module):
    """`fn(self, *inputs)` as a module; keyword tensors become buffers, modules submodules."""

    def __init__(self, fn: Callable, **attrs: Any) -> None:
        super().__init__()
        self.fn = fn
        for name, value in attrs.items():
            if isinstance(value, torch.Tensor):
                self.register_buffer(name, value)
            else:
                setattr(self, name, value)

    def forward(self, *xs):
        return self.fn(self, *xs)


@dataclass(frozen=True)
class OpCase:
    """One case of an op table: `fn` applied to seeded inputs of `shapes` (and `dtype`)."""

    family: str
    name: str
    fn: Callable
    shapes: tuple
    profiles: tuple[str, ...] = ("FP", "INT")
    dtype: torch.dtype = torch.float32
    spec_extra: str = ""  # extension(s) the case needs, e.g. "+cf"
    attrs: Callable[[], dict] = field(default=dict)  # builds buffers/submodules (seeded)

    @property
    def id(self) -> str:
        return f"{self.family}-{self.name}"

    def module(self) -> torch.nn.Module:
        torch.manual_seed(0)
        return CaseModule(self.fn, **self.attrs()).eval()

    def inputs(self, seed: int = 0) -> tuple[torch.Tensor, ...]:
        gen = torch.Generator().manual_seed(seed)
        if self.dtype.is_floating_point:
            return tuple(torch.randn(s, generator=gen).to(self.dtype) for s in self.shapes)
        return tuple(torch.randint(-50, 50, s, generator=gen).to(self.dtype) for s in self.shapes)

    def spec(self, profile: str) -> str:
        return f"TOSA-1.0+{profile}{self.spec_extra}"


def _cases(family: str, rows: list, **common: Any) -> list[OpCase]:
    return [OpCase(family, name, fn, tuple(shapes), **{**common, **opts})
            for name, fn, shapes, *rest in rows for opts in (rest[0] if rest else {},)]


# -- data movement ---------------------------------------------------------------------------------
FLIP = _cases("flip", [
    ("rank1", lambda s, x: x.flip(0), [(7,)]),
    ("rank2_neg", lambda s, x: x.flip(-1), [(3, 5)]),
    ("rank3_two_dims", lambda s, x: x.flip(0, 2), [(2, 3, 4)]),
    ("rank4_all", lambda s, x: torch.flip(x, [0, 1, 2, 3]), [(2, 3, 4, 5)]),
    ("rank5", lambda s, x: x.flip(-2), [(1, 2, 3, 2, 4)]),
    ("fliplr_ud", lambda s, x: (torch.fliplr(x), torch.flipud(x)), [(4, 6)]),
])

CUMSUM = _cases("cumsum", [
    ("rank1", lambda s, x: x.cumsum(0), [(9,)]),
    ("rank2_neg", lambda s, x: x.cumsum(-1), [(3, 8)]),
    ("rank3_mid", lambda s, x: torch.cumsum(x, 1), [(2, 5, 3)]),
    ("rank4", lambda s, x: x.cumsum(2), [(1, 2, 6, 3)]),
])

SCATTER = _cases("slice_select_scatter", [
    ("slice_scatter", lambda s, x, y: torch.slice_scatter(x, y, 1, 1, 3), [(2, 5, 3), (2, 2, 3)]),
    ("slice_scatter_step", lambda s, x, y: torch.slice_scatter(x, y, 0, 0, 6, 2), [(6, 4), (3, 4)]),
    ("slice_scatter_neg", lambda s, x, y: torch.slice_scatter(x, y, -1, 2), [(3, 6), (3, 4)]),
    ("select_scatter", lambda s, x, y: torch.select_scatter(x, y, 0, 1), [(3, 4), (4,)]),
    ("select_scatter_neg", lambda s, x, y: torch.select_scatter(x, y, -1, -1), [(2, 3, 5), (2, 3)]),
])

VIEWS = _cases("views", [
    ("as_strided_view", lambda s, x: torch.as_strided(x, (3, 4), (4, 1)) * 2, [(12,)]),
    ("as_strided_transpose", lambda s, x: torch.as_strided(x, (4, 3), (1, 4)) + 1, [(3, 4)]),
    ("unfold_rank1", lambda s, x: x.unfold(0, 3, 2), [(9,)]),
    ("unfold_rank3_neg", lambda s, x: x.unfold(-1, 2, 2), [(2, 3, 8)]),
    ("unflatten", lambda s, x: x.unflatten(1, (2, -1)) + 1, [(3, 8)]),
    ("unflatten_neg", lambda s, x: x.unflatten(-1, (2, 2, 3)) * 2, [(2, 12)]),
    ("squeeze_all_ones", lambda s, x: x.squeeze() + 1, [(1, 1, 1)]),
    ("squeeze_dims_neg", lambda s, x: x.squeeze((-1, 0)) * 2, [(1, 3, 1)]),
    ("squeeze_non_one", lambda s, x: x.squeeze(1) - 1, [(2, 3)]),
])

STACK = _cases("stack", [
    ("rank1", lambda s, a, b: torch.stack([a, b]), [(5,), (5,)]),
    ("rank3_neg", lambda s, a, b: torch.stack([a, b, a], -1), [(2, 3, 4), (2, 3, 4)]),
    ("rank4_mid", lambda s, a, b: torch.stack([a, b], 2), [(1, 2, 3, 4), (1, 2, 3, 4)]),
])

PAD = _cases("constant_pad", [
    ("rank1", lambda s, x: F.pad(x, (2, 1)), [(5,)]),
    ("rank2_value", lambda s, x: F.pad(x, (1, 0, 0, 2), value=0.5), [(3, 4)]),
    ("rank3", lambda s, x: F.pad(x, (1, 1, 2, 2, 0, 1)), [(2, 3, 4)]),
    ("rank4", lambda s, x: F.pad(x, (1, 2, 3, 0)), [(1, 2, 3, 4)]),
    ("rank5", lambda s, x: F.pad(x, (1, 1, 1, 1, 1, 1)), [(1, 2, 2, 3, 3)]),
    ("negative_crop", lambda s, x: F.pad(x, (-1, 2, 0, -1)), [(3, 5)]),
])

REPEAT = _cases("repeat", [
    ("rank1", lambda s, x: x.repeat(3), [(4,)]),
    ("new_leading_dims", lambda s, x: x.repeat(2, 1, 3), [(3, 2)]),
    ("rank4", lambda s, x: x.repeat(1, 2, 1, 2), [(1, 2, 3, 2)]),
    ("rank5", lambda s, x: x.repeat(2, 1, 1, 1, 2), [(1, 2, 1, 2, 3)]),
    ("repeat_interleave", lambda s, x: x.repeat_interleave(2, dim=1), [(2, 3)]),
])

PIXEL_SHUFFLE = _cases("pixel_shuffle", [
    ("shuffle2", lambda s, x: F.pixel_shuffle(x, 2), [(1, 8, 3, 4)]),
    ("shuffle3_rank3", lambda s, x: F.pixel_shuffle(x, 3), [(9, 2, 2)]),
    ("unshuffle2", lambda s, x: F.pixel_unshuffle(x, 2), [(1, 2, 4, 6)]),
    ("shuffle_rank5", lambda s, x: F.pixel_shuffle(x, 2), [(2, 1, 4, 2, 3)]),
    ("unshuffle_rank5", lambda s, x: F.pixel_unshuffle(x, 2), [(2, 3, 2, 4, 6)]),
    ("unshuffle3_rank3", lambda s, x: F.pixel_unshuffle(x, 3), [(2, 6, 3)]),
    ("shuffle_module_after_conv", lambda s, x: s.shuffle(s.conv(x)), [(1, 3, 5, 4)],
     {"attrs": lambda: {"conv": torch.nn.Conv2d(3, 8, 3, padding=1), "shuffle": torch.nn.PixelShuffle(2)}}),
])

POOL_1D_ADAPTIVE = _cases("pool_1d_adaptive", [
    ("max_pool1d", lambda s, x: F.max_pool1d(x, 3), [(1, 4, 12)]),
    ("max_pool1d_stride_pad", lambda s, x: F.max_pool1d(x, 3, 2, 1), [(2, 3, 11)]),
    ("adaptive_avg_nondiv", lambda s, x: F.adaptive_avg_pool2d(x, (3, 2)), [(1, 4, 7, 5)]),
    ("adaptive_max_nondiv", lambda s, x: F.adaptive_max_pool2d(x, (3, 4)), [(1, 3, 8, 7)]),
    ("adaptive_avg_1d", lambda s, x: F.adaptive_avg_pool1d(x, 3), [(1, 4, 10)]),
    ("adaptive_max_1d", lambda s, x: F.adaptive_max_pool1d(x, 4), [(1, 2, 9)]),
    ("adaptive_avg_nondiv_after_conv", lambda s, x: F.adaptive_avg_pool2d(s.conv(x), (4, 3)), [(1, 3, 9, 7)],
     {"attrs": lambda: {"conv": torch.nn.Conv2d(3, 4, 3, padding=1)}}),
    ("adaptive_max_nondiv_after_conv", lambda s, x: F.adaptive_max_pool2d(s.conv(x), 5), [(1, 3, 7, 8)],
     {"attrs": lambda: {"conv": torch.nn.Conv2d(3, 4, 3, padding=1)}}),
    # global average pooling: quantized, its output takes the input's qparams (one int8 AVG_POOL2D)
    ("adaptive_avg_global_after_conv", lambda s, x: F.adaptive_avg_pool2d(F.relu(s.conv(x)), 1), [(1, 3, 7, 7)],
     {"attrs": lambda: {"conv": torch.nn.Conv2d(3, 8, 3, padding=1)}}),
])

# -- control flow (TOSA's controlflow extension: COND_IF, WHILE_LOOP) -----------------------------
def _cond_sum(s, x):
    return torch.cond(x.sum() > 0, lambda t: t * 2, lambda t: t - 1, (x,))


def _cond_two_operands(s, x, y):
    return torch.cond(x.mean() > y.mean(), lambda a, b: a + b, lambda a, b: a * b, (x, y))


def _while_double(s, x):
    from torch._higher_order_ops.while_loop import while_loop

    i = torch.zeros((), dtype=torch.int64)
    _, out = while_loop(lambda i, t: i < 3, lambda i, t: (i + 1, t * 2), (i, x))
    return out


def _cond_nested(s, x):
    def outer_true(t):
        return torch.cond(t.mean() > 0.5, lambda u: u * 4.0, lambda u: u + 4.0, (t,))

    return torch.cond(x.sum() > 0, outer_true, lambda t: t.neg(), (x,))


def _while_float_state(s, x):
    """A float loop state, and a buffer the body reads (export makes it an additional input)."""
    from torch._higher_order_ops.while_loop import while_loop

    _, out = while_loop(lambda n, y: y.abs().sum() < 40.0, lambda n, y: (n + 1.0, y * 2 + s.k),
                        (torch.zeros(()), x))
    return out


CONTROL_FLOW = _cases("control_flow", [
    ("cond_scalar_pred", _cond_sum, [(2, 3)]),
    ("cond_two_operands", _cond_two_operands, [(4,), (4,)]),
    ("while_loop_counter", _while_double, [(3, 2)]),  # int64 counter: FP alone has no int32 compare
    # FP only: torchao's convert_pt2e fails on a nested cond (its DuplicateDQPass lint: "Node true_graph_0
    # ... references nonexistent attribute true_graph_0"), inside PT2E, before this toolkit runs
    ("cond_nested", _cond_nested, [(2, 3)], {"profiles": ("FP",)}),
    ("while_float_state", _while_float_state, [(3,)], {"attrs": lambda: {"k": torch.full((3,), 0.5)}}),
], spec_extra="+cf")

# -- TOSA 1.0's FFT extension ("+fft": RFFT2D) ------------------------------------------------------
FFT = _cases("fft", [
    ("rfft_last_dim", lambda s, x: torch.view_as_real(torch.fft.rfft(x)), [(2, 16)]),
    ("rfft_rank3_ortho", lambda s, x: torch.view_as_real(torch.fft.rfft(x, norm="ortho")), [(2, 3, 8)]),
    ("rfft2", lambda s, x: torch.view_as_real(torch.fft.rfft2(x)), [(1, 2, 8, 16)]),
    ("rfft2_forward", lambda s, x: torch.view_as_real(torch.fft.rfft2(x, norm="forward")) * 2, [(4, 32)]),
    ("rfft_abs", lambda s, x: torch.fft.rfft(x).abs(), [(2, 16)]),  # complex abs: stays on the CPU
    ("rfft_not_pow2", lambda s, x: torch.view_as_real(torch.fft.rfft(x)), [(2, 12)]),  # CPU
], profiles=("FP",), spec_extra="+fft")

TABLES: dict[str, list[OpCase]] = {
    "flip": FLIP, "cumsum": CUMSUM, "slice_select_scatter": SCATTER, "views": VIEWS, "stack": STACK,
    "constant_pad": PAD, "repeat": REPEAT, "pixel_shuffle": PIXEL_SHUFFLE,
    "pool_1d_adaptive": POOL_1D_ADAPTIVE, "control_flow": CONTROL_FLOW, "fft": FFT,
}


class FamilyModule(torch.nn.Module):
    """Several cases side by side (one lowering for a whole table): inputs concatenated in case
    order (`family_inputs`), outputs as one flat tuple."""

    def __init__(self, cases: list[OpCase]) -> None:
        super().__init__()
        self.cases = torch.nn.ModuleList(c.module() for c in cases)
        self.arity = [len(c.shapes) for c in cases]

    def forward(self, *xs):
        outs, i = [], 0
        for module, n in zip(self.cases, self.arity, strict=True):
            out = module(*xs[i:i + n])
            outs += list(out) if isinstance(out, tuple) else [out]
            i += n
        return tuple(outs)


def family_inputs(cases: list[OpCase]) -> tuple[torch.Tensor, ...]:
    """The inputs of `FamilyModule(cases)`."""
    return tuple(x for c in cases for x in c.inputs())


def all_cases(families: list[str] | None = None) -> list[OpCase]:
    """Every case of the named families (all families when None), in table order."""
    unknown = set(families or ()) - set(TABLES)
    if unknown:
        raise ValueError(f"unknown op families {sorted(unknown)}; known: {sorted(TABLES)}")
    return [c for name, cases in TABLES.items() if families is None or name in families for c in cases]


# -- dtype and form variants (issue 10, "How to know it is wide enough") ---------------------------
# Plain integer tensors under the INT profile (nothing to quantize): TOSA's int32-only operators run
# on int8/int16 through int32 CASTs (wrapping like torch); int32 add/sub/mul also under FP.
_I8, _I16, _I32 = torch.int8, torch.int16, torch.int32


def _int_rows(dtype: torch.dtype) -> list:
    return [
        ("add_rank1", lambda s, a, b: a + b, [(5,), (5,)]),
        ("sub_rank5", lambda s, a, b: torch.sub(a, b), [(1, 2, 3, 2, 2), (1, 2, 3, 2, 2)]),
        ("mul_bcast", lambda s, a, b: a * b, [(2, 3, 4), (4,)]),
        ("rsub_scalar", lambda s, a: 2 - a, [(2, 3)]),
        ("add_inplace_scalar", lambda s, a: a.clone().__iadd__(3), [(2, 3)]),
        ("mul_inplace", lambda s, a, b: a.clone().mul_(b), [(2, 3), (2, 3)]),
        ("compare_bcast", lambda s, a, b: (a > b, a <= 0, a == b), [(2, 3), (3,)]),
        ("where_scalar", lambda s, a, b: (torch.where(a > 0, a, b), torch.where(a > 0, a, 0)), [(2, 3), (2, 3)]),
        ("maximum_minimum", lambda s, a, b: (torch.maximum(a, b), torch.minimum(a, b)), [(2, 3), (2, 3)]),
        ("clamp", lambda s, a: (a.clamp(-10, 10), a.clamp(min=0)), [(2, 3, 4)]),
        ("abs_neg", lambda s, a: (a.abs(), -a), [(2, 3)]),
        # torch sums int8/16/32 into int64, which TOSA carries as int32: int8/int16 sums are bounded by their
        # input's range; an int32 sum only where its values are (clamp), else it stays on the CPU
        ("sum_int64", (lambda s, a: (a.sum(-1), a.sum())) if dtype != _I32 else
         (lambda s, a: (a.clamp(-2**20, 2**20).sum(-1), a.clamp(-2**20, 2**20).sum())), [(2, 3, 4)]),
        ("amax_keepdim", lambda s, a: (a.amax(-1, keepdim=True), torch.amin(a, (0, 2))), [(2, 3, 4)]),
        ("cat_stack_neg", lambda s, a, b: (torch.cat([a, b], -1), torch.stack([a, b], -1)), [(2, 3), (2, 3)]),
        ("split_select", lambda s, a: (*a.split(2, -1), a[:, -1]), [(2, 5)]),
        ("views", lambda s, a: (a.view(-1, 2), a.permute(2, 0, 1), a.flatten(1), a.unsqueeze(-1)), [(2, 3, 4)]),
        ("bitwise", lambda s, a, b: (a & b, a | b, a ^ b, ~a, a & 3), [(2, 3), (2, 3)]),
        ("shifts", lambda s, a: (a << 2, a >> 1), [(2, 3)]),
        ("index_select_gather", lambda s, a: (a.index_select(-1, torch.tensor([2, 0])), a[torch.tensor([1, 0])],
                                              torch.gather(a, -1, torch.tensor([[2, 0], [1, 1]]))), [(2, 3)]),
        ("strided_slice", lambda s, a: (a[:, ::2], a[..., 1::3]), [(3, 5)]),
    ] + ([("max_pool2d_argmax", lambda s, a: (F.max_pool2d(a, 2), a.argmax(-1), a.argmin(1, keepdim=True)),
           [(1, 2, 4, 4)])] if dtype == _I8 else [])


DTYPE_INT8 = _cases("dtype_int8", _int_rows(_I8), profiles=("INT",), dtype=_I8)
DTYPE_INT16 = _cases("dtype_int16", _int_rows(_I16), profiles=("INT",), dtype=_I16)
DTYPE_INT32 = _cases("dtype_int32", _int_rows(_I32), profiles=("INT",), dtype=_I32) + _cases("dtype_int32", [
    ("index_math_fp", lambda s, a, b: (a + b, a - 3, a * b, a.float() * 0.5), [(2, 3), (2, 3)], {"profiles": ("FP",)}),
], dtype=_I32)

# float16 under FP (TOSA PRO-FP has it): multi-step families are computed in float32 and rounded once,
# like PyTorch's CPU kernels (see arm_tosa_core/half_math.py).
DTYPE_FP16 = _cases("dtype_fp16", [
    ("elementwise", lambda s, a, b: (a + b, 2 - a, a * 3, a / (b.abs() + 1), torch.maximum(a, b)), [(2, 3), (3,)]),
    ("unary", lambda s, a: (a.exp(), a.sigmoid(), a.tanh(), F.gelu(a), F.silu(a), F.hardswish(a)), [(2, 3, 4)]),
    ("softmax_neg_dim", lambda s, a: (a.softmax(-1), F.log_softmax(a, 0)), [(2, 3, 4)]),
    ("argmax_strided_gather", lambda s, a: (a.argmax(-1), a.argmin(), a.argmax(0, keepdim=True), a[:, ::2],
                                            torch.gather(a, 1, torch.tensor([[4, 0], [1, 1], [0, 3]]))), [(3, 5)]),
    ("reductions", lambda s, a: (a.mean(-1, keepdim=True), a.sum((0, 2)), a.amax(1), a.var(-1)), [(2, 3, 4)]),
    ("layer_norm", lambda s, a, w, b: F.layer_norm(a, (3, 4), w, b), [(2, 3, 4), (3, 4), (3, 4)]),
    ("matmul", lambda s, a, b: (a @ b, torch.bmm(a, b)), [(2, 3, 4), (2, 4, 5)]),
    ("linear_addmm", lambda s, a, w, b: (F.linear(a, w, b), torch.addmm(b, a, w.t())), [(3, 4), (5, 4), (5,)]),
    ("pools", lambda s, a: (F.avg_pool2d(a, 2), F.max_pool2d(a, 2), F.adaptive_avg_pool2d(a, 1)), [(1, 2, 6, 6)]),
    ("data_movement", lambda s, a, b: (torch.cat([a, b], -1), a.transpose(-1, -2), a[:, 1:], b.flip(0)),
     [(2, 3), (2, 3)]),
], profiles=("FP",), dtype=torch.float16)

# Quantized (float) forms a user writes: numbers on either side, in-place ops, negative dims, keepdim.
FORMS_INT = _cases("forms_quantized", [
    ("where_scalar", lambda s, a: (torch.where(a > 0, a, 0.0), torch.where(a < 0, 1.0, a)), [(2, 3)]),
    ("inplace_div", lambda s, a, b: (a.clone().div_(b.abs() + 1), a.clone().__itruediv__(2)), [(2, 3), (2, 3)]),
    ("scalar_first", lambda s, a: (2 - a, 3 * a, a + 1.5), [(2, 3)]),
    ("avg_pool1d", lambda s, a: F.avg_pool1d(a, 2), [(1, 2, 8)]),
    ("reduce_neg_keepdim", lambda s, a: (a.mean(-1, keepdim=True), a.amax(-2)), [(2, 3, 4)]),
    ("gather_strided_narrow", lambda s, a: (a.index_select(1, torch.tensor([2, 0])), a[:, ::2], a.narrow(-1, 1, 2)),
     [(2, 4, 3)]),
])
# Integer results of a quantized float graph: argmax/argmin indices are never quantized.
ARGMAX_INT = _cases("argmax_quantized", [
    ("argmax_argmin", lambda s, a: (a.argmax(-1), a.argmin(0), a.argmax()), [(3, 4)]),
], profiles=("INT",))

# -- issue 10, "Missing or FP-only today": one op (or a couple of close variants) per case ---------
# Inputs are seeded randn; a function with a domain maps it in `fn` (those extra ops lower too).
def _inside(x, bound=0.95):
    """(-bound, bound) from randn: asin/acos/atanh/erfinv's domain."""
    return torch.tanh(x) * bound


def _above_one(x):
    return x.abs() + 1.05


def _unit(x):
    """(0.05, 0.95): logit's domain."""
    return torch.sigmoid(x) * 0.9 + 0.05


ELEMENTWISE_MATH = _cases("elementwise_math", [
    ("tan", lambda s, x: torch.tan(_inside(x, 1.4)), [(2, 7)]),
    ("sinh_rank4", lambda s, x: torch.sinh(x), [(2, 3, 4, 5)]),
    ("cosh_rank1", lambda s, x: torch.cosh(x), [(9,)]),
    ("asin", lambda s, x: torch.asin(_inside(x)), [(3, 6)]),
    ("acos_rank3", lambda s, x: torch.acos(_inside(x)), [(2, 3, 5)]),
    ("atan", lambda s, x: torch.atan(x * 4), [(3, 1, 5)]),
    ("asinh", lambda s, x: torch.asinh(x * 10), [(4, 6)]),
    ("acosh_rank5", lambda s, x: torch.acosh(_above_one(x)), [(1, 2, 3, 2, 2)]),
    ("atanh", lambda s, x: torch.atanh(_inside(x)), [(2, 8)]),
    ("sign", lambda s, x: torch.sign(x), [(4, 5)]),
    ("expm1", lambda s, x: torch.expm1(x), [(3, 6)]),
    ("log1p", lambda s, x: torch.log1p(x.abs()), [(3, 6)]),
    ("log10", lambda s, x: torch.log10(_above_one(x)), [(2, 3, 4)]),
    ("round_trunc", lambda s, x: (torch.round(x * 3), torch.trunc(x * 3)), [(4, 5)]),
    ("erfinv", lambda s, x: torch.erfinv(_inside(x, 0.99)), [(4, 8)]),
    ("logit", lambda s, x: torch.logit(_unit(x)), [(4, 6)]),
    ("logit_eps", lambda s, x: torch.logit(_unit(x), eps=0.2), [(2, 3, 4)]),
])

DIVISION = _cases("division", [
    ("div_floor_tensor", lambda s, a, b: torch.div(a, b.abs() + 0.5, rounding_mode="floor"), [(3, 8), (8,)]),
    ("div_trunc_tensor", lambda s, a, b: torch.div(a * 4, b, rounding_mode="trunc"), [(3, 8), (3, 8)]),
    ("div_trunc_scalar", lambda s, a: torch.div(a * 4, -0.7, rounding_mode="trunc"), [(2, 3, 4)]),
    ("floor_divide_scalar", lambda s, a: torch.floor_divide(a * 4, 3.0), [(3, 8)]),
    ("floordiv_operator", lambda s, a, b: (a * 4) // (b.abs() + 0.5), [(2, 3, 4), (4,)]),
    ("scalar_floordiv_tensor", lambda s, b: 2.0 // (b.abs() + 0.5), [(3, 5)]),
    ("remainder_tensor", lambda s, a, b: torch.remainder(a * 4, b), [(3, 8), (8,)]),
    ("remainder_scalar", lambda s, a: torch.remainder(a * 4, 1.75), [(3, 8)]),
    ("mod_operator_neg", lambda s, a: (a * 4) % -3.0, [(2, 3, 4)]),
    ("fmod", lambda s, a, b: torch.fmod(a * 4, b), [(3, 8), (3, 8)]),
])

ACTIVATIONS = _cases("activations", [
    ("glu_last", lambda s, x: F.glu(x), [(4, 6)]),
    ("glu_dim0", lambda s, x: F.glu(x, dim=0), [(4, 3, 2)]),
    ("prelu_single", lambda s, x: s.act(x), [(2, 4, 5)], {"attrs": lambda: {"act": torch.nn.PReLU(init=0.25)}}),
    ("prelu_per_channel", lambda s, x: s.act(x), [(1, 3, 4, 4)],
     {"attrs": lambda: {"act": torch.nn.PReLU(3, init=0.1)}}),
    ("leaky_relu", lambda s, x: F.leaky_relu(x, 0.2), [(3, 8)]),
    ("leaky_relu_default_rank4", lambda s, x: F.leaky_relu(x), [(1, 2, 3, 4)]),
    ("elu", lambda s, x: F.elu(x), [(3, 8)]),
    ("elu_alpha", lambda s, x: F.elu(x, alpha=0.5), [(2, 3, 4)]),
])

COMPARE_SELECT = _cases("compare_select", [
    ("gt_bcast", lambda s, a, b: a > b, [(2, 3, 8), (8,)]),
    ("lt_scalar", lambda s, a: a < 0.2, [(3, 5)]),
    ("ge_le", lambda s, a, b: (a >= b, a <= b), [(3, 5), (3, 5)]),
    ("eq_ne", lambda s, a, b: (a.round() == b.round(), a.round() != 1.0), [(3, 5), (3, 5)]),
    ("where", lambda s, a, b: torch.where(a > b, a, b), [(2, 3, 8), (8,)]),
    ("where_scalar_either_side", lambda s, a: (torch.where(a > 0, a, 0.5), torch.where(a < 0.3, -1.0, a)), [(3, 5)]),
    ("minimum_bcast", lambda s, a, b: torch.minimum(a, b), [(2, 3, 8), (8,)]),
    ("maximum_bcast_swapped", lambda s, a, b: torch.maximum(b, a), [(2, 3, 8), (3, 1)]),
    ("clamp_tensor_bounds", lambda s, a, b: torch.clamp(a, b, b + 1), [(2, 3, 8), (8,)]),
    ("clamp_min_tensor", lambda s, a, b: torch.clamp(a, min=b), [(3, 8), (3, 8)]),
    ("clamp_max_buffer", lambda s, a: torch.clamp(a, max=s.hi), [(2, 8)], {"attrs": lambda: {"hi": torch.full((8,), 0.3)}}),
    ("amax_keepdim_neg", lambda s, a: a.amax(-1, keepdim=True), [(2, 3, 4)]),
    ("amin_two_dims", lambda s, a: torch.amin(a, (0, 2)), [(2, 3, 4)]),
    ("amax_all", lambda s, a: a.amax(), [(3, 5)]),
])
COMPARE_SELECT += _cases("compare_select", [  # integer tensors: nothing to quantize
    ("amax_amin_int32", lambda s, a: (a.amax(1), a.amin(-1, keepdim=True)), [(2, 3, 8)]),
    ("compare_where_int32", lambda s, a, b: (torch.where(a > b, a, b), a == b, a <= 3), [(2, 3, 8), (8,)]),
    ("minimum_clamp_int32", lambda s, a, b: (torch.minimum(a, b), torch.clamp(a, b, b + 5)), [(2, 3, 8), (8,)]),
], profiles=("INT",), dtype=torch.int32)

REDUCE_NORM = _cases("reduce_norm", [
    ("prod_all", lambda s, a: (a.abs() + 0.5).prod(), [(2, 3, 4)]),
    ("prod_dim_keepdim", lambda s, a: (a.abs() + 0.5).prod(1, keepdim=True), [(2, 3, 4)]),
    ("var_default", lambda s, a: a.var(1), [(3, 5, 4)]),
    ("var_correction0_neg", lambda s, a: a.var(-1, correction=0), [(3, 5, 4)]),
    ("var_correction2_dims", lambda s, a: a.var((0, 2), correction=2), [(3, 5, 4)]),
    ("var_fractional_keepdim", lambda s, a: a.var(1, correction=1.5, keepdim=True), [(3, 5, 4)]),
    ("vector_norm_2_all", lambda s, a: torch.linalg.vector_norm(a), [(2, 5, 6)]),
    ("vector_norm_1", lambda s, a: torch.linalg.vector_norm(a, 1, dim=-1), [(2, 5, 6)]),
    ("vector_norm_inf", lambda s, a: torch.linalg.vector_norm(a, float("inf"), dim=(0, 2)), [(2, 5, 6)]),
    ("vector_norm_2_keepdim", lambda s, a: torch.linalg.vector_norm(a, 2, dim=1, keepdim=True), [(2, 5, 6)]),
    ("addmm", lambda s, b, x, y: torch.addmm(b, x, y), [(3, 5), (3, 4), (4, 5)]),
    ("addmm_beta_alpha", lambda s, b, x, y: torch.addmm(b, x, y, beta=0.5, alpha=2.0), [(5,), (3, 4), (4, 5)]),
    ("addmm_const_weight", lambda s, x: torch.addmm(s.b, x, s.m, beta=3, alpha=-1), [(3, 4)],
     {"attrs": lambda: {"b": torch.randn(5), "m": torch.randn(4, 5)}}),
])


def _conv(factory: Callable, *args: Any, **kwargs: Any) -> dict:
    return {"attrs": lambda: {"conv": factory(*args, **kwargs)}}


_C1, _C2, _C3, _T2 = torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.ConvTranspose2d
CONV = _cases("convolution", [
    ("conv1d", lambda s, x: s.conv(x), [(2, 4, 16)], _conv(_C1, 4, 6, 3, padding=1)),
    ("conv1d_stride_nobias", lambda s, x: s.conv(x), [(1, 4, 20)], _conv(_C1, 4, 6, 5, stride=2, bias=False)),
    ("conv2d_stride_pad", lambda s, x: s.conv(x), [(2, 4, 10, 10)], _conv(_C2, 4, 6, 3, stride=2, padding=1)),
    ("conv2d_dilation", lambda s, x: s.conv(x), [(1, 3, 12, 12)], _conv(_C2, 3, 4, 3, dilation=2, padding=2)),
    ("conv2d_depthwise", lambda s, x: s.conv(x), [(1, 6, 8, 8)], _conv(_C2, 6, 6, 3, padding=1, groups=6)),
    ("conv2d_grouped", lambda s, x: s.conv(x), [(1, 8, 7, 7)], _conv(_C2, 8, 6, 3, padding=1, groups=2)),
    ("conv3d", lambda s, x: s.conv(x), [(1, 3, 4, 5, 5)], _conv(_C3, 3, 4, 3, padding=1)),
    ("conv3d_stride_dilation", lambda s, x: s.conv(x), [(2, 2, 3, 9, 8)],
     _conv(_C3, 2, 4, (1, 3, 3), stride=(1, 2, 2), dilation=(1, 2, 1))),
    ("conv_transpose2d", lambda s, x: s.conv(x), [(1, 4, 5, 5)], _conv(_T2, 4, 3, 3, stride=2, padding=1,
                                                                       output_padding=1)),
    ("conv_transpose2d_grouped", lambda s, x: s.conv(x), [(1, 4, 5, 5)], _conv(_T2, 4, 6, 3, stride=2, padding=1,
                                                                               groups=2)),
    ("conv_transpose2d_depthwise", lambda s, x: s.conv(x), [(1, 3, 4, 4)], _conv(_T2, 3, 3, 2, stride=2, groups=3)),
    ("conv1d_same", lambda s, x: s.conv(x), [(2, 3, 9)], _conv(_C1, 3, 4, 4, padding="same")),
    ("conv2d_same_even_kernel", lambda s, x: s.conv(x), [(1, 3, 7, 6)], _conv(_C2, 3, 4, 4, padding="same")),
    ("conv2d_same_dilated", lambda s, x: s.conv(x), [(1, 3, 8, 8)], _conv(_C2, 3, 4, 3, padding="same", dilation=2)),
    ("conv3d_same", lambda s, x: s.conv(x), [(1, 2, 3, 4, 4)], _conv(_C3, 2, 3, 2, padding="same", bias=False)),
    ("conv2d_valid", lambda s, x: s.conv(x), [(1, 3, 6, 6)], _conv(_C2, 3, 4, 3, padding="valid")),
    ("conv2d_reflect", lambda s, x: s.conv(x), [(1, 3, 6, 5)], _conv(_C2, 3, 4, 3, padding=1, padding_mode="reflect")),
    ("conv2d_replicate", lambda s, x: s.conv(x), [(1, 3, 5, 5)],
     _conv(_C2, 3, 4, 3, padding=2, padding_mode="replicate")),
    ("conv2d_circular", lambda s, x: s.conv(x), [(2, 3, 5, 6)], _conv(_C2, 3, 4, 3, padding=1, padding_mode="circular")),
    ("conv1d_reflect", lambda s, x: s.conv(x), [(2, 3, 8)], _conv(_C1, 3, 4, 3, padding=1, padding_mode="reflect")),
    ("conv1d_circular", lambda s, x: s.conv(x), [(1, 3, 8)], _conv(_C1, 3, 4, 3, padding=1, padding_mode="circular")),
])


def _resize(**kwargs: Any) -> Callable:
    return lambda s, x: F.interpolate(x, **kwargs)


RESIZE = _cases("resize", [
    ("nearest_x2", _resize(scale_factor=2, mode="nearest"), [(1, 3, 4, 5)]),
    ("nearest_size_up_down", _resize(size=(7, 3), mode="nearest"), [(2, 2, 4, 5)]),
    ("nearest_fractional_scales", _resize(scale_factor=(1.5, 3.0), mode="nearest"), [(1, 2, 4, 3)]),
    ("nearest_downscale", _resize(scale_factor=0.5, mode="nearest"), [(1, 2, 8, 6)]),
    ("nearest_exact_size", _resize(size=(9, 4), mode="nearest-exact"), [(1, 2, 5, 6)]),
    ("bilinear_x2", _resize(scale_factor=2, mode="bilinear"), [(1, 3, 4, 5)]),
    ("bilinear_size", _resize(size=(9, 7), mode="bilinear"), [(1, 2, 5, 3)]),
    ("bilinear_downscale", _resize(scale_factor=0.5, mode="bilinear"), [(1, 2, 8, 6)]),
    ("bilinear_mixed_scales", _resize(scale_factor=(0.6, 2.5), mode="bilinear"), [(1, 2, 5, 6)]),
    ("bilinear_align_corners_x2", _resize(scale_factor=2, mode="bilinear", align_corners=True), [(2, 1, 3, 4)]),
    ("bilinear_align_corners_size", _resize(size=(7, 9), mode="bilinear", align_corners=True), [(1, 2, 4, 5)]),
    ("upsample_module_after_conv", lambda s, x: s.up(s.conv(x)), [(1, 3, 5, 4)],
     {"attrs": lambda: {"conv": torch.nn.Conv2d(3, 4, 3, padding=1),
                        "up": torch.nn.Upsample(scale_factor=2, mode="bilinear")}}),
])


def _sdpa(**kwargs: Any) -> Callable:
    return lambda s, q, k, v: F.scaled_dot_product_attention(q, k, v, **kwargs)


_QKV = [(1, 2, 4, 8)] * 3


def _neg_inf_mask() -> dict:
    keep = torch.rand(4, 6, generator=torch.Generator().manual_seed(1)) > 0.3
    keep[:, 0] = True  # every query row attends to something (else torch returns NaN)
    return {"m": torch.where(keep, 0.0, float("-inf"))}


ATTENTION = _cases("attention", [
    ("sdpa", _sdpa(), _QKV),
    ("sdpa_cross_lengths_value_dim", _sdpa(), [(2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6)]),
    ("sdpa_causal", _sdpa(is_causal=True), [(1, 2, 6, 8)] * 3),
    ("sdpa_scale", _sdpa(scale=0.3), [(1, 2, 4, 8), (1, 2, 6, 8), (1, 2, 6, 8)]),
    ("sdpa_additive_neg_inf_mask", lambda s, q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=s.m),
     [(1, 2, 4, 8), (1, 2, 6, 8), (1, 2, 6, 8)], {"attrs": _neg_inf_mask}),
    ("sdpa_float_mask_runtime", lambda s, q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
     [(2, 2, 4, 8), (2, 2, 5, 8), (2, 2, 5, 8), (2, 1, 4, 5)]),
    # a runtime bool mask (m > -1: about one in six keys masked; no row of this seed is fully masked)
    ("sdpa_bool_mask_runtime", lambda s, q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m > -1),
     [(1, 2, 4, 8), (1, 2, 6, 8), (1, 2, 6, 8), (1, 2, 4, 6)]),
    ("sdpa_const_bool_mask", lambda s, q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=s.m),
     [(1, 2, 4, 8), (1, 2, 6, 8), (1, 2, 6, 8)],
     {"attrs": lambda: {"m": torch.tril(torch.ones(4, 6, dtype=torch.bool), diagonal=2)}}),
])

POOLS = _cases("pools", [
    ("max_pool1d", lambda s, x: F.max_pool1d(x, 2), [(2, 3, 10)]),
    ("max_pool1d_dilated", lambda s, x: F.max_pool1d(x, 3, 1, dilation=2), [(1, 4, 12)]),
    ("max_pool2d_dilated", lambda s, x: F.max_pool2d(x, 3, 1, dilation=2), [(1, 3, 9, 9)]),
    ("max_pool2d_dilated_stride_pad", lambda s, x: F.max_pool2d(x, 3, 2, 1, dilation=2), [(1, 3, 11, 10)]),
    ("max_pool2d_dilated_ceil", lambda s, x: F.max_pool2d(x, 2, 2, dilation=2, ceil_mode=True), [(2, 2, 9, 8)]),
    ("max_pool2d_dilated_after_conv", lambda s, x: s.pool(s.conv(x)), [(1, 3, 9, 9)],
     {"attrs": lambda: {"conv": torch.nn.Conv2d(3, 4, 1), "pool": torch.nn.MaxPool2d(3, 1, dilation=2)}}),
])

TABLES.update({"elementwise_math": ELEMENTWISE_MATH, "division": DIVISION, "activations": ACTIVATIONS,
               "compare_select": COMPARE_SELECT, "reduce_norm": REDUCE_NORM, "convolution": CONV,
               "resize": RESIZE, "attention": ATTENTION, "pools": POOLS})

TABLES.update({"dtype_int8": DTYPE_INT8, "dtype_int16": DTYPE_INT16, "dtype_int32": DTYPE_INT32,
               "dtype_fp16": DTYPE_FP16, "forms_quantized": FORMS_INT, "argmax_quantized": ARGMAX_INT})
