"""a16w8 (int16 activations, int8 weights: TOSA EXT-INT16) compiled for Ethos-U55-128 and U85-256.

Each case is one Ethos-U partition whose carried TOSA graph has int16 tensors, compiled by vela (its
cycles are read back from the payload) and run on the TOSA reference model against `run_exactly`
(the converted model with exact quantize/dequantize arithmetic), in output LSBs:

- 0 LSB: linear and matmul (the INT48 accumulator is first RESCALEd x 1 to int32, or x 2^-k where its bound
  passes int32, so the final RESCALE has a 32-bit multiplier; the 2^-k rounding can add 1 LSB, rarely),
  clamps, max pooling, means.
- 1 LSB: convolutions (TOSA's RESCALE from INT48 takes a 16-bit multiplier, so the scale has 15
  significant bits), average pooling (window sums are an INT48 depthwise conv; TOSA rounds ties up,
  torch to even), add (int16 operands keep 2^13 units per code), and sigmoid and tanh (an int16 TABLE
  interpolates between 513 entries; one that would be more than 1 LSB off, such as tanh over about +-7,
  stays on the CPU: see arm_tosa_core.helpers.table16).

What vela cannot run in int16 stays on the CPU with the reason (int16 MATMUL and transposed convolution
on U55/U65).
"""

from __future__ import annotations

import arm_ethosu_test_flow as flow
import pytest
import torch
from torch import nn
from tosa.DType import DType

from arm_ethosu import (
    EthosUCompileSpec,
    ethosu_payloads,
    ethosu_report,
)
from arm_ethosu.backend import tosa_graph_of
from arm_tosa_core.testing import FnModule

TARGETS = ("ethos-u55-128", "ethos-u85-256")
F = nn.functional


def _conv_block() -> nn.Module:
    return nn.Sequential(nn.Conv2d(8, 16, 1), nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU6()),
                         nn.Conv2d(16, 8, 1))


#: name -> (module, number of inputs, max LSB vs run_exactly)
OPS = {
    "conv2d": (lambda: nn.Conv2d(8, 16, 3, padding=1), 1, 1),
    "depthwise": (lambda: nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8), 1, 1),
    "linear": (lambda: FnModule(lambda s, x: s.m(x.permute(0, 2, 3, 1)), m=nn.Linear(8, 12)), 1, 0),
    "add": (lambda: FnModule(lambda s, x, y: x + y), 2, 1),
    "relu6": (lambda: FnModule(lambda s, x: F.hardtanh(x, 0.0, 6.0)), 1, 0),
    "avg_pool2d": (lambda: FnModule(lambda s, x: F.avg_pool2d(x, 2)), 1, 1),
    "max_pool2d": (lambda: FnModule(lambda s, x: F.max_pool2d(x, 2)), 1, 0),
    "sigmoid": (lambda: FnModule(lambda s, x: torch.sigmoid(x)), 1, 1),
    "tanh": (lambda: FnModule(lambda s, x: torch.tanh(x * 0.5)), 1, 1),
}


#: (op, target) pairs kept on the CPU by arm_ethosu.constraints (checked by the test after this one)
ON_CPU = {("linear", "ethos-u85-256")}


@pytest.mark.parametrize(("op", "target"), [(op, t) for op in OPS for t in TARGETS if (op, t) not in ON_CPU])
def test_a16w8_op_is_one_partition_within_its_lsb(op, target):
    build, n_inputs, max_lsb = OPS[op]
    torch.manual_seed(0)
    inputs = tuple(torch.randn(1, 8, 8, 8) * 2 for _ in range(n_inputs))
    lsb, cycles, _, _ = flow.check_one_partition(build(), inputs, target)
    print(f"{op} a16w8 {target}: {lsb:.0f} LSB, {cycles} cycles")
    assert lsb <= max_lsb, f"{op} on {target}: {lsb} LSB vs run_exactly (allowed {max_lsb})"


def test_a16w8_fully_connected_stays_on_the_cpu_for_u85():
    """regor's U85 stream for an int16 x int8 linear keeps only the low 15 bits of the output RESCALE's
    32-bit multiplier in its 48-bit scale stream (nn.Linear(8, 12): 0x75D3A25F written as 0x225F, every
    output near 0 on the NPU simulator, 1.71 off in float): the linear stays on the CPU with that reason,
    the rest of the model (an a16w8 conv) stays on the NPU, and the result is the converted model's."""
    torch.manual_seed(0)
    model = FnModule(lambda s, x: s.m(s.conv(x).permute(0, 2, 3, 1)), m=nn.Linear(8, 12), conv=nn.Conv2d(8, 8, 1))
    inputs = (torch.randn(1, 8, 8, 8) * 2,)
    spec = EthosUCompileSpec("ethos-u85-256").include_host_graph()
    converted = flow.quantize_mixed(model, inputs, spec, None)
    edge = flow.lower(converted, inputs, spec)
    reasons = flow.cpu_compute(edge)
    assert any("low 15 bits" in r for r in reasons.values()), reasons  # the product (a bmm for 4-d x)
    assert len(ethosu_payloads(edge)) == 1  # the convolution
    out = edge.exported_program().module()(*inputs)
    assert (out - converted(*inputs)).abs().max().item() <= 1e-6


@pytest.mark.parametrize("target", TARGETS)
def test_mixed_int8_and_a16w8_is_one_partition_and_costs_vela_cycles(target):
    """int8 conv -> a16w8 conv+relu6 -> int8 conv: the int8<->int16 requantizations are RESCALEs inside
    the one partition (they used to split it in three), within 1 LSB (the int16 conv's 16-bit RESCALE
    multiplier can move an int16 code across an int8 rounding tie), and vela charges the int16 layer."""
    torch.manual_seed(0)
    inputs = (torch.randn(1, 8, 16, 16),)
    model = _conv_block()
    lsb, mixed, converted, edge = flow.check_one_partition(model, inputs, target, a16w8=("1",))
    assert lsb <= 1
    (payload,) = ethosu_payloads(edge)
    assert DType.INT8 in flow.tensor_dtypes(tosa_graph_of(payload))  # the int8 layers stay int8
    int8_edge = flow.lower(flow.quantize_mixed(model, inputs, EthosUCompileSpec(target), ()), inputs,
                           EthosUCompileSpec(target))
    int8 = ethosu_report(int8_edge).cycles_total
    print(f"{target}: int8 {int8} cycles, layer 1 a16w8 {mixed} cycles")
    assert mixed > int8


#: a16w8 ops vela 5.2 cannot compile for U55/U65 (but U85 runs): case -> (module, inputs, U55 reason, U85 LSB)
U55_REJECTS = {
    "matmul": (lambda: FnModule(lambda s, a, b: torch.matmul(a, b)), [(1, 2, 8, 8), (1, 2, 8, 8)],
               "MATMUL on Ethos-U55/U65 takes int8 operands, not torch.int16", 0),
    "conv_transpose": (lambda: nn.ConvTranspose2d(8, 4, 2, stride=2), [(1, 8, 8, 8)],
                       "transposed convolution with int16 activations", 1),
}


@pytest.mark.parametrize("case", list(U55_REJECTS))
def test_a16w8_op_vela_rejects_on_u55_stays_on_the_cpu_and_runs_on_u85(case):
    build, shapes, reason, u85_lsb = U55_REJECTS[case]
    torch.manual_seed(0)
    inputs = tuple(torch.randn(s) for s in shapes)
    spec = EthosUCompileSpec("ethos-u55-128")
    edge = flow.lower(flow.quantize_mixed(build(), inputs, spec, None), inputs, spec)
    reasons = flow.cpu_compute(edge)
    assert any(reason in r for r in reasons.values()), reasons
    lsb, _, _, _ = flow.check_one_partition(build(), inputs, "ethos-u85-256")
    assert lsb <= u85_lsb
