"""Op tables: elementwise arithmetic, activations and data movement (FP) vs eager on the TOSA reference model.

Each case is a small module computing a few related ops (returned as a tuple), so that one lowering
exercises a family's variants: exir's per-lowering overhead dominates the run time, not the ops.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from arm_tosa_core.testing import FnModule as Fn
from arm_tosa_core.testing import check_lowering

torch.manual_seed(0)


def positive(*shape):
    """Inputs bounded away from 0 (for log/rsqrt/reciprocal/pow/div)."""
    return torch.rand(*shape) + 0.5


class Pos(tuple):
    """A shape whose input is drawn by `positive`."""


ELEMENTWISE = [
    ("add_sub_broadcast", lambda s, a, b: (a + b, a - b, b - a), [(2, 3, 4), (3, 1)]),
    ("add_sub_alpha", lambda s, a, b: (torch.add(a, b, alpha=2), torch.sub(a, b, alpha=0.5)), [(4, 5), (4, 5)]),
    ("scalar_arith", lambda s, a: (a + 2, a - 1.5, 3 - a, a * 0.5, a / 4), [(2, 6)]),
    ("mul_div_broadcast", lambda s, a, b: (a * b, a / b, b / a), [(4, 1, 5), (3, 5)]),
    ("const_operands", lambda s, a: (a * s.w, a / s.w, s.w - a, torch.add(a, s.w, alpha=-3)), [(2, 3, 5)]),
    ("unary_math", lambda s, a: (-a, a.abs(), a.exp(), a.log(), a.sqrt(), a.rsqrt(), a.reciprocal()), [Pos((3, 7))]),
    ("pow", lambda s, a, b: (a ** 2, a ** 3, a ** 0.5, torch.pow(a, b), a ** -1.5), [Pos((4, 5)), Pos((4, 5))]),
    ("pow_negative_base", lambda s, a: (a ** 3, (a + 3) ** -2, a ** 1 * 2), [(3, 6)]),
    ("min_max", lambda s, a, b: (torch.minimum(a, b), torch.maximum(a, b), torch.maximum(a, s.w)), [(3, 5), (1, 5)]),
]

ACTIVATIONS = [
    ("clamps", lambda s, a: (F.relu(a), F.relu6(a * 4), F.hardtanh(a, -0.5, 0.25), a.clamp(-1, 2),
                             a.clamp(min=0.3), a.clamp(max=-0.2)), [(2, 3, 8)]),
    ("smooth", lambda s, a: (a.sigmoid(), a.tanh(), F.gelu(a), F.gelu(a, approximate="tanh"), F.silu(a)),
     [(4, 9)]),
    ("hard", lambda s, a: (F.hardswish(a * 4), F.hardsigmoid(a * 4)), [(2, 5, 6)]),
    ("leaky_elu", lambda s, a: (F.leaky_relu(a, 0.1), F.leaky_relu(a, 1.7), F.leaky_relu(a, -0.3), F.elu(a),
                                F.elu(a, alpha=0.4), F.selu(a)), [(3, 10)]),
]

COMPARE = [
    ("where_compare", lambda s, a, b: (torch.where(a > b, a, b), torch.where(a <= 0.2, a, 0.0),
                                       a >= b, a < 0.1, torch.where(b != 0.5, a * 2, b)), [(2, 4, 5), (4, 5)]),
    ("eq_logical", lambda s, a, b: (a == a.clamp(-0.5, 0.5), torch.logical_and(a > 0, b > 0),
                                    torch.logical_or(a > 1, b < -1), ~(a > 0)), [(3, 6), (3, 6)]),
]

SHAPES = [
    ("view_reshape_flatten", lambda s, a: (a.view(4, 15) + 1, a.reshape(2, 2, 15) * 2, a.flatten(1) - 1,
                                            torch.flatten(a)), [(2, 2, 3, 5)]),
    ("permute_transpose", lambda s, a: (a.permute(2, 0, 3, 1) + 1, a.transpose(1, 3) * 2, a.mT - 1,
                                        a.permute(3, 2, 1, 0).reshape(5, -1)), [(2, 3, 4, 5)]),
    ("squeeze_unsqueeze", lambda s, a: (a.squeeze() + 1, a.squeeze(1) * 2, a.unsqueeze(0) - 1,
                                        a.unsqueeze(-1).unsqueeze(2) * 3), [(2, 1, 4, 1)]),
    ("expand_repeat", lambda s, a: (a.expand(3, 4, 5) + 1, a.repeat(2, 1, 3) * 2, a.expand(2, -1, 5) - 1),
     [(4, 1)]),
    ("cat_stack", lambda s, a, b: (torch.cat([a, b], 1), torch.cat([a, b, a], -1), torch.stack([a, b]),
                                   torch.stack([a, b], dim=2), torch.cat([a, s.w])), [(2, 3), (2, 3)]),
    ("split_chunk_unbind", lambda s, a: (*torch.split(a, [1, 3, 2], dim=1), *a.chunk(2, dim=-1),
                                         *a.unbind(0)), [(2, 6, 4)]),
    ("slice_select", lambda s, a: (a[:, 1:3] + 1, a[..., -2:] * 2, a[1] - 1, a[:, -1] * 3, a[:, :, 1:],
                                   a.narrow(1, 2, 2)), [(2, 4, 5)]),
    ("casts_truncate", lambda s, a: ((a * 3).to(torch.int32) + 1, (a * 3).int().long(), (a > 0).float() * a,
                                     (a * 4).int().float() / 4), [(3, 7)]),
    ("constant_pad", lambda s, a: (F.pad(a, (1, 2)), F.pad(a, (0, 1, 2, 0), value=-1.5),
                                   F.pad(a, (1, 1, 1, 1, 1, 0))), [(2, 3, 4)]),
]

TABLE = ELEMENTWISE + ACTIVATIONS + COMPARE + SHAPES


def _inputs(shapes: list) -> tuple[torch.Tensor, ...]:
    return tuple(positive(*s) if isinstance(s, Pos) else torch.randn(*s) for s in shapes)


@pytest.mark.parametrize("name,fn,shapes", TABLE, ids=[c[0] for c in TABLE])
def test_op_table(name, fn, shapes):
    module = Fn(fn, w=torch.rand(5) + 0.5 if name != "cat_stack" else torch.randn(1, 3))
    check_lowering(module, _inputs(shapes), case=name)


def _conv(cin: int, cout: int) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, 3, padding=1)


class ConvThen(nn.Module):
    """conv -> `fn` (so `fn` sees an NHWC value) -> optional conv."""

    def __init__(self, fn, cout=4, tail=None):
        super().__init__()
        self.conv, self.fn, self.tail = _conv(3, cout), fn, tail

    def forward(self, x):
        y = self.fn(self.conv(x))
        return self.tail(y) if self.tail is not None else y


LAYOUT = [
    # (name, module, max TRANSPOSE count): NHWC values flow through elementwise/view/permute ops.
    ("nhwc_elementwise", ConvThen(lambda y: F.hardswish(y) * torch.sigmoid(y) + y.clamp(0, 1) - 0.5,
                                  tail=_conv(4, 2)), 2),
    ("nhwc_broadcast_bias", ConvThen(lambda y: y + torch.arange(4.0).view(1, 4, 1, 1), tail=_conv(4, 2)), 2),
    ("nhwc_permute_to_nhwc", ConvThen(lambda y: y.permute(0, 2, 3, 1) * 2), 1),
    ("nhwc_unsqueeze_squeeze", ConvThen(lambda y: y.unsqueeze(1).relu().squeeze(1), tail=_conv(4, 2)), 2),
    ("nhwc_cat_channels", ConvThen(lambda y: torch.cat([y, -y], 1), tail=_conv(8, 2)), 2),
    ("nhwc_slice_pad", ConvThen(lambda y: F.pad(y[:, 1:3, 1:], (1, 0, 0, 0)), tail=_conv(2, 2)), 2),
    ("nhwc_split_select", ConvThen(lambda y: (y.split([1, 3], 1)[1] * y[:, 0:1]).relu(), tail=_conv(3, 2)), 2),
    ("nhwc_where", ConvThen(lambda y: torch.where(y > 0, y, y * 0.1), tail=_conv(4, 2)), 2),
    ("nhwc_flatten_head", ConvThen(lambda y: y.flatten(1) * 2), 2),
]


@pytest.mark.parametrize("name,module,max_transposes", LAYOUT, ids=[c[0] for c in LAYOUT])
def test_layout_propagation(name, module, max_transposes):
    result = check_lowering(module, (torch.randn(1, 3, 6, 5),), case=name)
    ops = result.report.delegates[0].ops
    assert ops.get("TRANSPOSE", 0) <= max_transposes, f"{name}: {ops}"


UNSUPPORTED = [
    # strided reads (a[:, ::2]) and negative pads lower now (dtype tables, op_tables constant_pad)
    ("slice_scatter_step", lambda s, a: torch.slice_scatter(a, a[:, :3] * 2, 1, 0, 6, 2) + 1, "no strided write"),
    # floor division now lowers (div_rounding family, test_ops_math.py); int32 floor division under FP
    # stays on the CPU: test_integer_floor_division_needs_the_int_profile
]


@pytest.mark.parametrize("name,fn,reason", UNSUPPORTED, ids=[c[0] for c in UNSUPPORTED])
def test_unsupported_variant_stays_on_cpu(name, fn, reason):
    result = check_lowering(Fn(fn), (torch.randn(3, 6),), case=name, expect_full=False)
    reasons = [c.reason for c in result.report.cpu_nodes]
    assert any(reason in r for r in reasons), reasons
    assert result.report.delegates, "the supported ops around it should still be delegated"


def test_strided_slices_lower():
    """Slices with a step (SLICE + RESHAPE, keeping column 0; a short last window is CONCATenated) match eager."""
    fn = Fn(lambda s, a: (a[:, ::2] + 1, a[..., 1::3], a[1::2, 1:5:2]))
    result = check_lowering(fn, (torch.randn(3, 6),), case="slice_step")
    assert not result.report.cpu_nodes, result.report


class WithCumprod(nn.Module):
    """A conv, then cumprod (no TOSA lowering), then more delegable ops."""

    def __init__(self):
        super().__init__()
        self.conv = _conv(3, 4)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return torch.sigmoid(torch.cumprod(y, dim=2)) * 2 + 1


def test_unsupported_op_runs_on_cpu_between_partitions():
    """cumprod stays on the CPU with a reason; the rest is delegated and the whole runs correctly."""
    result = check_lowering(WithCumprod(), (torch.randn(1, 3, 5, 4),), case="cumprod", expect_full=False)
    cpu = {c.target: c.reason for c in result.report.cpu_nodes}
    assert list(cpu) == ["aten.cumprod.default"], cpu
    assert "no TOSA lowering" in cpu["aten.cumprod.default"]
    assert len(result.report.delegates) == 2  # before and after the cumprod
    targets = [str(n.target) for n in result.edge.exported_program().graph.nodes if n.op == "call_function"]
    assert sum("cumprod" in t for t in targets) == 1, targets
