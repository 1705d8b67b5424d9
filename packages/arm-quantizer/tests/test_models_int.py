"""Example models quantized to INT8 and lowered for TOSA-1.0+INT: delegation and accuracy.

MobileNetV2 and ResNet-18 are fully delegated (only the float-boundary quantize/dequantize stay on the
CPU). ResNet-18 is bit-exact against the fake-quantized model; MobileNetV2 within 2 output LSBs (1-LSB
rounding ties inside the network propagate through 53 layers), and as accurate vs float as the
fake-quantized model.

The DeiT-tiny and Llama blocks are fully delegated too: the quantizer decomposes softmax, layer norm and
attention (with its causal mask folded to a constant) into ops with INT rules
(arm_quantizer.decompose_for_int). They are checked against the fake-quantized model and against float.
"""

import pytest
import torch
from quant_harness import check_int

from arm_tosa_core import run_on_reference_model
from arm_tosa_core.example_models import get_example


def sqnr(signal: torch.Tensor, approx: torch.Tensor) -> float:
    return (10 * torch.log10(signal.pow(2).mean() / (signal - approx).pow(2).mean())).item()


@pytest.mark.parametrize("name,max_lsb", [("resnet18", 0), ("mobilenet_v2", 2)])
def test_cnn_fully_delegated_int8(name, max_lsb):
    model, inputs = get_example(name).build(input_size=32)
    edge, report, lsb, converted = check_int(model, inputs, max_lsb=max_lsb, case=name)
    assert len(report.delegates) == 1
    out = run_on_reference_model(edge, *inputs)
    with torch.no_grad():
        reference = model(*inputs)
        vs_float = sqnr(reference, out)
        fake_vs_float = sqnr(reference, converted(*inputs))
    print(f"{name}: {lsb:.0f} LSB, SQNR vs float {vs_float:.1f} dB (fake-quant model: {fake_vs_float:.1f} dB)")
    # the integer graph must be as accurate as the quantized PyTorch model it implements
    assert vs_float >= fake_vs_float - 0.5


# tokens, min SQNR vs float (dB). Measured at 8 tokens, seed 0: DeiT 32.1 dB, Llama 28.6 dB, both equal
# to the fake-quantized model's own SQNR (the INT graph is bit-exact against it). The floors leave 3 dB
# (twice the error power) for calibration changes; what limits them is int8 itself: ~30 requantized
# intermediates, the weakest being the softmax row sum and its reciprocal (one int8 scale for sums
# from 1 to the row length).
TRANSFORMERS = {"deit_tiny_block": (8, 29.0), "llama_block": (8, 25.5)}


@pytest.mark.parametrize("name", list(TRANSFORMERS))
def test_transformer_block_fully_delegated_int8(name):
    tokens, min_sqnr = TRANSFORMERS[name]
    model, inputs = get_example(name).build(seed=0, input_size=tokens)
    # within 1 LSB of fake-quant (a RESCALE rounding tie against torch's half-to-even; measured 0)
    edge, report, lsb, converted = check_int(model, inputs, max_lsb=1, case=name)
    assert len(report.delegates) == 1, report
    assert all(c.target.startswith("quantized_decomposed.") or "getitem" in c.target
               for c in report.cpu_nodes), report
    out = run_on_reference_model(edge, *inputs)
    with torch.no_grad():
        reference, fake = model(*inputs), converted(*inputs)
    err_fake, err_float = (out - fake).abs().max().item(), (out - reference).abs().max().item()
    vs_fake = sqnr(fake, out) if err_fake else float("inf")
    vs_float, fake_vs_float = sqnr(reference, out), sqnr(reference, fake)
    print(f"{name}: {lsb:.0f} LSB; vs fake-quant max abs {err_fake:.3g}, SQNR {vs_fake:.1f} dB; vs float "
          f"max abs {err_float:.3g}, SQNR {vs_float:.1f} dB (fake-quant model: {fake_vs_float:.1f} dB)")
    assert vs_fake >= 40.0  # 1 LSB at most, on a few outputs
    assert vs_float >= min_sqnr and vs_float >= fake_vs_float - 0.5
