"""a16w8 (int16 activations, int8 weights: TOSA EXT-INT16) compiled for Ethos-U55-128 and U85-256.

Each case is one Ethos-U partition whose carried TOSA graph has int16 tensors, compiled by vela (its
cycles are read back from the payload) and run on the TOSA reference model against `run_exactly`
(the converted model with exact quantize/dequantize arithmetic), in output LSBs:

- 0 LSB: linear and matmul (the INT48 accumulator is first RESCALEd x 1 to int32, or x 2^-k where its bound
  passes int32, so the final RESCALE has a 32-bit multiplier; the 2^-k rounding can add 1 LSB, rarely),
  clamps, max pooling, means.
- 1 LSB: convolutions (TOSA's RESCALE from INT48 takes a 16-bit multiplier, so the scale has 15
  significant bits), linear on Ethos-U85 (its accumulator RESCALEd the same way: regor keeps 15 bits of a
  fully connected layer's multiplier, `EthosUCompileSpec.int16_fc_rescale16`), average pooling (window sums are an INT48 depthwise conv; TOSA rounds ties up,
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
    # the linear keeps its own int16 quantize, the relu shares it (registry: `int16_fuses_activation`);
    # on U85 the fused form was a float addmm on the CPU (the linear's one user was the relu)
    "linear_relu": (lambda: FnModule(lambda s, x: F.relu(s.m(x.permute(0, 2, 3, 1))), m=nn.Linear(8, 12)), 1, 0),
    "avg_pool2d": (lambda: FnModule(lambda s, x: F.avg_pool2d(x, 2)), 1, 1),
    "max_pool2d": (lambda: FnModule(lambda s, x: F.max_pool2d(x, 2)), 1, 0),
    "sigmoid": (lambda: FnModule(lambda s, x: torch.sigmoid(x)), 1, 1),
    "tanh": (lambda: FnModule(lambda s, x: torch.tanh(x * 0.5)), 1, 1),
}


#: ops whose Ethos-U85 form has another LSB bound than OPS's: the linear's 16-bit output multiplier
U85_LSB = {"linear": 1, "linear_relu": 1}


@pytest.mark.parametrize(("op", "target"), [(op, t) for op in OPS for t in TARGETS])
def test_a16w8_op_is_one_partition_within_its_lsb(op, target):
    build, n_inputs, max_lsb = OPS[op]
    max_lsb = U85_LSB.get(op, max_lsb) if target.startswith("ethos-u85") else max_lsb
    torch.manual_seed(0)
    inputs = tuple(torch.randn(1, 8, 8, 8) * 2 for _ in range(n_inputs))
    lsb, cycles, _, _ = flow.check_one_partition(build(), inputs, target)
    print(f"{op} a16w8 {target}: {lsb:.0f} LSB, {cycles} cycles")
    assert lsb <= max_lsb, f"{op} on {target}: {lsb} LSB vs run_exactly (allowed {max_lsb})"


@pytest.mark.parametrize("k", [8, 512])  # K = 1024: also 1.00 LSB on both (measured once)
def test_a16w8_fully_connected_on_u85_rescales_with_a_16_bit_multiplier(k):
    """regor (vela 5.2, U85) fuses an int16 fully connected layer's output RESCALE into the convolution's
    48-bit scale records, which hold a 15-bit multiplier, and wrote the low 15 bits of a 32-bit one
    (nn.Linear(8, 12): 0x75D3A25F as 0x225F, every output near 0 on the NPU simulator, 1.71 off in float), so
    these layers stayed on the CPU. For U85 the core now RESCALEs the INT48 accumulator straight to int16
    with a 16-bit multiplier (`EthosUCompileSpec.int16_fc_rescale16`), which regor stores exactly (bit-exact
    on the U85 simulator: runtime-cpp's `test_ethosu_simulator_u85_numerics.py`): one partition within 1 LSB of
    run_exactly, past K = 512 too (no int32 intermediate to overflow). U55 keeps the 32-bit form: 0 LSB, or
    1 where the accumulator's bound passes int32 and it is divided by 2^k before the int32 RESCALE (K = 512:
    measured 1.00 LSB on both targets)."""
    torch.manual_seed(0)
    model, inputs = nn.Linear(k, 16), (torch.randn(4, k) * 2,)
    direct = (DType.INT48, DType.INT16, DType.INT16)  # INT48 -> int16, 16-bit multiplier
    for target, max_lsb in (("ethos-u85-256", 1), ("ethos-u55-128", 0 if k == 8 else 1)):
        lsb, _, _, edge = flow.check_one_partition(model, inputs, target)
        (payload,) = ethosu_payloads(edge)
        forms = flow.rescale_forms(tosa_graph_of(payload))
        print(f"K={k} {target}: {lsb:.2f} LSB, RESCALE forms {sorted(forms)}")
        assert (direct in forms) == target.startswith("ethos-u85"), forms
        assert lsb <= max_lsb, f"{target}: {lsb} LSB vs run_exactly"


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
