"""Small models of common architectures (arm_tosa_core.small_models) under TOSA-1.0+INT.

Each is one partition under FP; it must be one partition under INT too (only the float boundary's
quantize/dequantize on the CPU), within a few output LSBs of the fake-quantized model and of
`run_exactly`, and as accurate against float as the fake-quantized model. Measured at seed 0:
MobileNetV3, the keyword spotter, the ViT patch embedding and the CRNN are bit-exact; ConvMixer is 3 LSB
and the U-Net decoder 2-3 LSB off, from RESCALE rounding ties (half up, where torch rounds half to even)
that GELU tables, batch norms and bilinear sums pass on through the depth.
"""

import pytest
import torch
from quant_harness import check_int, output_scales

from arm_quantizer import run_exactly
from arm_tosa_core import run_on_reference_model
from arm_tosa_core.small_models import SMALL_MODELS, build_small
from arm_tosa_core.testing import check_lowering, max_relative_error

MAX_LSB = {"convmixer": 3, "unet_decoder": 3}


def sqnr(signal: torch.Tensor, approx: torch.Tensor) -> float:
    return (10 * torch.log10(signal.pow(2).mean() / (signal - approx).pow(2).mean())).item()


@pytest.mark.parametrize("name", list(SMALL_MODELS))
def test_one_partition_fp_and_int(name):
    model, inputs = build_small(name)
    fp = check_lowering(model, inputs, case=name)
    assert len(fp.report.delegates) == 1
    max_lsb = MAX_LSB.get(name, 1)
    edge, report, lsb, converted = check_int(model, inputs, max_lsb=max_lsb, case=name)
    assert len(report.delegates) == 1, report
    out = run_on_reference_model(edge, *inputs)
    err, _ = max_relative_error(out, run_exactly(converted, *inputs))
    assert err <= max_lsb * max(output_scales(converted)) * 1.0001
    with torch.no_grad():
        reference, fake = model(*inputs), converted(*inputs)
    print(f"{name}: {lsb:.0f} LSB, SQNR vs float {sqnr(reference, out):.1f} dB (fake-quant {sqnr(reference, fake):.1f})")
    assert sqnr(reference, out) >= sqnr(reference, fake) - 0.5
