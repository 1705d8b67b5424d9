"""The core's INT16 lowering (TOSA-1.0+INT+int16, a16w8: int16 activations, int8 weights, INT48
accumulators) on the TOSA reference model, against the fake-quantized module and `run_exactly`.

Within 1 LSB: RESCALE from INT48 takes a 16-bit multiplier (convolutions, window sums), TOSA rounds
ties up, and int16 TABLEs interpolate between 513 entries (checked within 1 LSB on every int16 code; a
TABLE that would be further off stays on the CPU). Linear and matmul
accumulators go to int32 first (exactly where their bound fits int32, else divided by 2^k), so they
rescale with a 32-bit multiplier.
"""

import pytest
import torch
import torch.nn.functional as F
from quant_harness import check_int, quantize
from torch import nn

from arm_quantizer import get_symmetric_a16w8_quantization_config, run_exactly
from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report, run_on_reference_model
from arm_tosa_core.testing import FnModule as Fn
from arm_tosa_core.testing import lower

SPEC = "TOSA-1.0+INT+int16"
A16W8 = get_symmetric_a16w8_quantization_config()

CASES = [
    ("conv", nn.Conv2d(3, 8, 3, padding=1), [(1, 3, 8, 8)]),
    ("conv_stride_relu6", nn.Sequential(nn.Conv2d(4, 8, 3, stride=2), nn.ReLU6()), [(1, 4, 9, 9)]),
    ("depthwise", nn.Conv2d(6, 6, 3, padding=1, groups=6), [(1, 6, 7, 7)]),
    ("linear", nn.Linear(16, 8), [(4, 16)]),
    ("linear_3d_relu", nn.Sequential(nn.Linear(16, 8), nn.ReLU()), [(2, 3, 16)]),
    ("bmm", Fn(lambda s, a, b: torch.bmm(a, b)), [(2, 3, 4), (2, 4, 5)]),
    ("add", Fn(lambda s, a, b: a + b), [(1, 4, 5, 5), (1, 4, 5, 5)]),
    ("mul", Fn(lambda s, a, b: a * b), [(2, 8), (2, 8)]),
    ("residual", Fn(lambda s, x: s.c(x) + x, c=nn.Conv2d(4, 4, 3, padding=1)), [(1, 4, 6, 6)]),
    ("avg_pool", Fn(lambda s, x: F.avg_pool2d(x, 2)), [(1, 4, 8, 8)]),
    ("max_pool", Fn(lambda s, x: F.max_pool2d(x, 2)), [(1, 4, 8, 8)]),
    ("mean", Fn(lambda s, x: x.mean((2, 3))), [(1, 4, 6, 6)]),
    ("sigmoid", Fn(lambda s, x: torch.sigmoid(x)), [(4, 64)]),
    ("tanh", Fn(lambda s, x: torch.tanh(x * 0.25)), [(4, 64)]),  # tanh on about +-1.75
    ("gelu", Fn(lambda s, x: F.gelu(x)), [(4, 64)]),
    ("silu", Fn(lambda s, x: F.silu(x)), [(4, 64)]),
]
SLACK = 1.01  # a float32 output of ~32767 codes carries ~0.002 LSB of its own rounding


@pytest.mark.parametrize("name,module,shapes", CASES, ids=[c[0] for c in CASES])
def test_a16w8_op_within_one_lsb(name, module, shapes):
    torch.manual_seed(0)
    inputs = tuple(torch.randn(s) * 2 for s in shapes)
    max_lsb = SLACK
    edge, report, lsb, converted = check_int(module, inputs, spec=SPEC, config=A16W8, max_lsb=max_lsb, case=name)
    assert len(report.delegates) == 1
    assert any(n.args[-1] == torch.int16 for n in converted.graph.nodes if "quantize_per_tensor" in str(n.target))
    out, exact = run_on_reference_model(edge, *inputs), run_exactly(converted, *inputs)
    scale = float([n for n in converted.graph.nodes if n.op == "output"][0].args[0][0].args[1])
    assert (out - exact).abs().max().item() <= max_lsb * scale, name



@pytest.mark.parametrize("name,module,shapes", [
    ("bmm", Fn(lambda s, a, b: torch.bmm(a, b)), [(2, 3, 16), (2, 16, 4)]),
    ("linear_k1024", nn.Linear(1024, 4), [(2, 1024)]),
], ids=["bmm", "linear_k1024"])
def test_int16_product_past_int32_equals_fake_quant(name, module, shapes):
    """int16 products whose sum passes 2^31 (positive operands near full range: K=16 products of ~2^30 in
    the int16 x int16 MATMUL, K=1024 of ~2^22 in the int16 x int8 linear). The INT48 accumulator went to
    int32 by a RESCALE x 1, whose result TOSA requires within int32: the reference model refused it
    ("scaled result exceeds int32 numeric range", UNPREDICTABLE; undefined on hardware), as in
    transformers' Llama a16w8 attention. Now it is first divided by 2^k: within 1 LSB of fake-quant."""
    torch.manual_seed(0)
    if isinstance(module, nn.Linear):
        with torch.no_grad():
            module.weight.copy_(torch.rand_like(module.weight) + 0.5)
    inputs = tuple(torch.rand(s) + 1.0 for s in shapes)
    _, report, _, _ = check_int(module, inputs, spec=SPEC, config=A16W8, max_lsb=SLACK, case=name)
    assert len(report.delegates) == 1, report

def test_int8_to_int16_requantization_stays_in_the_partition():
    """int8 conv -> a16w8 conv -> int8 conv: PT2E writes dequantize(int8) -> quantize(int16) between
    them; each pair is one RESCALE inside the partition, not a split at a "float boundary"."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(4, 8, 1), nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 4, 1))
    from arm_quantizer import TOSAQuantizer, get_symmetric_quantization_config

    quantizer = TOSAQuantizer(TosaCompileSpec(SPEC)).set_global(get_symmetric_quantization_config())
    quantizer.set_module_name("1", A16W8)
    inputs = (torch.randn(1, 4, 8, 8),)
    converted = quantize(model, inputs, quantizer=quantizer)
    edge = lower(converted, inputs, TOSAPartitioner(TosaCompileSpec(SPEC)))
    report = partition_report(edge)
    assert len(report.delegates) == 1, report
    assert len(report.cpu_nodes) == 2, report  # the program's float input quantize and output dequantize
    out, exact = run_on_reference_model(edge, *inputs), run_exactly(converted, *inputs)
    scale = float([n for n in converted.graph.nodes if n.op == "output"][0].args[0][0].args[1])
    assert (out - exact).abs().max().item() <= scale * SLACK


@pytest.mark.parametrize("fn", [torch.floor, torch.ceil, torch.tanh], ids=["floor", "ceil", "tanh_on_7"])
def test_int16_table_off_by_more_than_1_lsb_stays_on_the_cpu_with_a_reason(fn):
    """An interpolated int16 TABLE would be many LSBs off for a step (a kink off the 128-code grid, as in
    hardswish at most scales, too), and 2 LSB off for tanh over about +-7 (a chord over 128 codes, 0.027
    apart, of a curve that bends 0.77 per unit squared is ~2.4 output LSB off before any fitting): these stay
    on the CPU, saying why (helpers/table16 checks every int16 code against fake-quant)."""
    inputs = (torch.randn(4, 64) * 2,)
    converted = quantize(Fn(lambda s, x: fn(x)), inputs, SPEC, A16W8)
    report = partition_report(lower(converted, inputs, TOSAPartitioner(TosaCompileSpec(SPEC))))
    assert not report.delegates
    reasons = " ".join(c.reason for c in report.cpu_nodes)
    assert "int16 TABLE (513 entries, linear between them) would be" in reasons, reasons


@pytest.mark.parametrize("act", [nn.ReLU(), nn.Hardtanh(-0.5, 1.0)], ids=["relu", "hardtanh"])
def test_a16w8_linear_then_activation_keeps_its_own_quantize_and_is_one_partition(act):
    """An int16 linear followed by a clamp-like activation: the linear's output is quantized by a node of
    its own (the registry's `int16_fuses_activation=False` for linear; at int8 the clamp's output carries the
    linear's qparams instead) and the activation shares those qparams, a CLAMP on the int16 codes. Before,
    the linear's one user was the activation: Ethos-U85, whose int16 fully connected layers need their
    accumulator RESCALEd straight to the quantized output (`int16_output_target`), left it on the CPU as a
    float addmm. On TOSA INT+int16: one partition within 1 LSB of fake-quant and of `run_exactly`."""
    torch.manual_seed(0)
    model, inputs = nn.Sequential(nn.Linear(16, 8), act), (torch.randn(4, 16) * 2,)
    edge, report, _, converted = check_int(model, inputs, spec=SPEC, config=A16W8, max_lsb=SLACK, case=str(act))
    assert len(report.delegates) == 1 and len(report.cpu_nodes) == 2, report  # the float boundary only
    (linear,) = [n for n in converted.graph.nodes if n.target is torch.ops.aten.linear.default]
    (user,) = linear.users
    assert "quantize_per_tensor" in str(user.target) and user.args[5] == torch.int16, user
    out, exact = run_on_reference_model(edge, *inputs), run_exactly(converted, *inputs)
    scale = float([n for n in converted.graph.nodes if n.op == "output"][0].args[0][0].args[1])
    assert (out - exact).abs().max().item() <= scale * SLACK
