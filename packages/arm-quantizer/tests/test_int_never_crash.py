"""Patterns that used to crash `to_edge_transform_and_lower` under INT (issue 9): each now lowers
within 1 LSB of `run_exactly` (the exact evaluation of the PT2E quantized module)."""

import pytest
import torch
import torch.nn.functional as F
from quant_harness import output_scales, quantize

from arm_quantizer import run_exactly
from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report, run_on_reference_model
from arm_tosa_core.testing import FnModule as Fn
from arm_tosa_core.testing import compare_outputs, lower

torch.manual_seed(0)


class InplaceAdd(torch.nn.Module):
    def forward(self, x, y):
        x += y
        return x


CASES = [
    ("add_alpha", Fn(lambda s, a, b: torch.add(a, b, alpha=2)), [(2, 3, 4, 4), (2, 3, 4, 4)]),
    ("add_negative_alpha", Fn(lambda s, a, b: torch.add(a, b, alpha=-0.5)), [(2, 8), (2, 8)]),
    ("sub_alpha", Fn(lambda s, a, b: torch.sub(a, b, alpha=0.5)), [(2, 8), (8,)]),
    ("rsub_tensor", Fn(lambda s, a, b: torch.rsub(a, b, alpha=3)), [(2, 8), (2, 8)]),
    ("rsub_scalar", Fn(lambda s, a: 2 - a), [(2, 3, 4)]),
    ("add_scalar_overload", Fn(lambda s, a: torch.ops.aten.add.Scalar(a, 2.5)), [(2, 3, 4)]),
    ("tensor_constant", Fn(lambda s, a: a + torch.tensor([1.0, 2.0, 3.0, 4.0])), [(2, 3, 4)]),
    ("inplace_add_0d", InplaceAdd(), [(2, 3, 4), ()]),
    ("avg_pool_divisor", Fn(lambda s, a: F.avg_pool2d(a, 2, divisor_override=3)), [(1, 3, 6, 6)]),
    ("avg_pool_divisor_padded", Fn(lambda s, a: F.avg_pool2d(a, 3, 2, 1, divisor_override=5)), [(1, 4, 7, 7)]),
    ("avg_pool_divisor_rank3", Fn(lambda s, a: F.avg_pool2d(a, 2, divisor_override=2)), [(3, 6, 6)]),
]


@pytest.mark.parametrize("name,module,shapes", CASES, ids=[c[0] for c in CASES])
def test_former_int_crash_lowers_within_one_lsb(name, module, shapes):
    inputs = tuple(torch.randn(s) for s in shapes)
    converted = quantize(module, inputs)
    expected = run_exactly(converted, *[x.clone() for x in inputs])
    edge = lower(converted, [x.clone() for x in inputs], TOSAPartitioner(TosaCompileSpec("TOSA-1.0+INT")))
    report = partition_report(edge)
    compute = [c for c in report.cpu_nodes if "quantize" not in c.target]
    assert not compute, f"[{name}] not fully delegated:\n{report}"
    out = run_on_reference_model(edge, *[x.clone() for x in inputs])
    comparison = compare_outputs(out, expected)
    assert not comparison.nonfinite, f"[{name}] {comparison.nonfinite}\n{report}"
    err, scale = comparison.max_error, max(output_scales(converted))
    assert err <= scale * 1.0001, f"[{name}] {err / scale:.2f} LSB\n{report}"
