"""MobileNetV2 with inverted-residual blocks in a16w8 and the rest int8, for Ethos-U55-128 and U85-256:
one Ethos-U partition (the int8<->int16 requantizations are RESCALEs inside it), vela's cycles for the
int16 blocks, and the TOSA graph it carries as accurate as the fake-quantized model.

The default case is the first blocks (features[:4], block 2 a16w8) at 32x32; the whole network at
64x64 with blocks 2 and 3 a16w8 is marked slow (`nox -s test-full`).
"""

from __future__ import annotations

import arm_ethosu_test_flow as flow
import pytest
import torch

from arm_ethosu import EthosUCompileSpec, ethosu_report
from arm_tosa_core import run_on_reference_model
from arm_tosa_core.example_models import get_example

TARGETS = ("ethos-u55-128", "ethos-u85-256")


def sqnr(signal: torch.Tensor, approx: torch.Tensor) -> float:
    return (10 * torch.log10(signal.pow(2).mean() / (signal - approx).pow(2).mean())).item()


def _int8_cycles(model, inputs, target: str) -> int:
    spec = EthosUCompileSpec(target)
    return ethosu_report(flow.lower(flow.quantize_mixed(model, inputs, spec, ()), inputs, spec)).cycles_total


@pytest.mark.parametrize("target", TARGETS)
def test_first_blocks_with_block_2_in_a16w8(target):
    model, inputs = get_example("mobilenet_v2").build(seed=0, input_size=32)
    prefix = model.features[:4].eval()
    lsb, cycles, _, _ = flow.check_one_partition(prefix, inputs, target, a16w8=("2",))
    int8 = _int8_cycles(prefix, inputs, target)
    print(f"MobileNetV2 features[:4] {target}: int8 {int8} cycles, block 2 a16w8 {cycles} cycles, {lsb} LSB")
    # Why 2 and not 1 (every quantize node against run_exactly, ethos-u85-256, measured): the int8 layers
    # before block 2 are exact; block 2's three int16 convs are 1, 2 and 3 int16 LSB off, each conv's
    # RESCALE from the INT48 accumulator having a 16-bit multiplier (TOSA 1.0 allows no 32-bit one from
    # INT48; linear and matmul avoid it by a x1 RESCALE to int32 first, which a conv's accumulator may
    # not fit), and the errors add along the block. Requantized to int8 (256 int16 LSB each), they move
    # a code across an int8 rounding tie: 1 int8 LSB, at 1 element. No op is 2 LSB off on its own: block
    # 3's depthwise 3x3 sums 9 such inputs, so a 1-LSB input becomes 2 LSB at its output (18 elements).
    # The residual add (the output) was 1 LSB off on U85; 2 covers that gain reaching the output.
    assert lsb <= 2
    assert cycles > int8


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_mobilenet_v2_with_two_blocks_in_a16w8(target):
    model, inputs = get_example("mobilenet_v2").build(seed=0, input_size=64)
    model = model.eval()
    _, cycles, converted, edge = flow.check_one_partition(model, inputs, target, a16w8=("features.2", "features.3"))
    with torch.no_grad():
        reference, fake = model(*inputs), converted(*inputs)
    out = run_on_reference_model(edge, *inputs)
    assert sqnr(reference, out) >= sqnr(reference, fake) - 0.5
    assert cycles > _int8_cycles(model, inputs, target)
