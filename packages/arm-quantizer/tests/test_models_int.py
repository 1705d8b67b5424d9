"""Example models quantized to INT8 and lowered for TOSA-1.0+INT: delegation and accuracy.

MobileNetV2 and ResNet-18 are fully delegated (only the float-boundary quantize/dequantize stay on the
CPU). ResNet-18 is bit-exact against the fake-quantized model; MobileNetV2 within 2 output LSBs (1-LSB
rounding ties inside the network propagate through 53 layers), and as accurate vs float as the
fake-quantized model.
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
