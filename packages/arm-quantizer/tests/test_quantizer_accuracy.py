"""Quantization accuracy: the histogram activation observer, and the INT lowering against exact arithmetic.

The fake-quant model that `convert_pt2e` returns computes in float32, and torchao's quantize rounds
`x * (1 / scale)` in float32: an exact value such as 26.5000003 LSB can round to 26 there while the
integer graph (exact accumulators, 32-bit RESCALE multipliers) gives 27. With per-tensor weights one
such accumulator value repeats over every channel, and the flipped codes grow through MobileNetV2 to
10-19 output LSBs. So the INT lowering is checked against the same converted graph run in float64.
"""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from quant_harness import output_scales, quantize
from torch import nn
from torchao.quantization.pt2e import HistogramObserver, MinMaxObserver

from arm_quantizer import QuantizationConfig, get_symmetric_quantization_config
from arm_quantizer.exact_reference import ExactQuantizedInterpreter
from arm_quantizer.observers import FastHistogramObserver, _rounds_up_to
from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, run_on_reference_model
from arm_tosa_core.example_models import get_example
from arm_tosa_core.testing import lower

INT = TosaCompileSpec("TOSA-1.0+INT")


def sqnr_db(signal: torch.Tensor, approx: torch.Tensor) -> float:
    signal, approx = signal.double(), approx.double()
    return 10 * math.log10(float(signal.pow(2).sum()) / float((signal - approx).pow(2).sum()))


@pytest.mark.parametrize("per_channel,size", [(False, 64), (True, 32)], ids=["per_tensor", "per_channel"])
def test_mobilenet_v2_int_is_exact_integer_arithmetic(per_channel, size):
    # per-tensor at 64 drifts 10-19 LSBs from the float32 fake-quant model (per-channel: 1-2)
    model, inputs = get_example("mobilenet_v2").build(seed=0, input_size=size)
    converted = quantize(model, inputs, config=get_symmetric_quantization_config(is_per_channel=per_channel))
    edge = lower(converted, inputs, TOSAPartitioner(INT))
    out = run_on_reference_model(edge, *inputs)
    with torch.no_grad():
        exact = ExactQuantizedInterpreter(converted).run(*inputs)
    lsb = (out.double() - exact).abs().max().item() / max(output_scales(converted))
    # 1 LSB: exact halves (e.g. a 2x2 average pool) round up in TOSA and to even in torch.round
    assert lsb <= 1.0 + 1e-4, f"INT lowering is {lsb:.2f} output LSBs from the float64 fake-quant model"


def _spiky_conv():
    """A conv on a 1024x1024 Gaussian image with two spikes (+40, -32): MinMax spends the int8 range
    on them (step 0.31), the histogram search clips them (step ~0.04): 22.4 dB vs 28.6 dB."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU()).eval()
    x = torch.randn(1, 1, 1024, 1024)
    x[0, 0, 5, 7], x[0, 0, 512, 341] = 40.0, -32.0
    return model, (x,)


def _with_minmax_activations(config: QuantizationConfig) -> QuantizationConfig:
    act = replace(config.input_activation, observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=2**-12))
    return QuantizationConfig(act, act, config.weight)


def test_histogram_observer_sqnr_floor():
    # Floor 25 dB: halfway between MinMax activations (22.4 dB, the old config) and the histogram
    # search (28.6 dB), ~3 dB from each, so neither float rounding nor a torch update moves it across.
    model, inputs = _spiky_conv()
    config = get_symmetric_quantization_config()
    edge = lower(quantize(model, inputs, config=config), inputs, TOSAPartitioner(INT))
    with torch.no_grad():
        reference = model(*inputs)
    assert sqnr_db(reference, run_on_reference_model(edge, *inputs)) >= 25.0
    with torch.no_grad():
        minmax = quantize(model, inputs, config=_with_minmax_activations(config))(*inputs)
    assert sqnr_db(reference, minmax) < 25.0, "the floor no longer separates MinMax from the histogram"


def _samples():
    g = torch.Generator().manual_seed(0)
    gauss = torch.randn(4, 64, 32, 32, generator=g)
    chi = torch.randn(3, 20000, generator=g).pow(2).mean(0)
    return {
        "gauss": [gauss],
        "student_t3": [torch.randn(20000, generator=g) / chi.sqrt()],
        "relu6": [gauss.clamp(0, 6)],
        "spikes": [torch.cat([torch.randn(50000, generator=g), torch.tensor([30.0, -25.0])])],
        "two_batches": [gauss[:2], 1.7 * gauss[2:] + 0.3],
        "constant": [torch.full((100,), 0.25)],
    }


@pytest.mark.parametrize("case", list(_samples()))
@pytest.mark.parametrize("dtype,qmin,qmax", [(torch.int8, -128, 127), (torch.uint8, 0, 255)])
def test_fast_histogram_observer_matches_torchao(case, dtype, qmin, qmax):
    kwargs = dict(dtype=dtype, qscheme=torch.per_tensor_affine, quant_min=qmin, quant_max=qmax, eps=2**-12)
    ours, theirs = FastHistogramObserver(**kwargs), HistogramObserver(**kwargs)
    for batch in _samples()[case]:
        ours(batch)
        theirs(batch)
    (scale, zero_point), (ref_scale, ref_zero_point) = ours.calculate_qparams(), theirs.calculate_qparams()
    assert torch.equal(scale, ref_scale) and torch.equal(zero_point, ref_zero_point), (
        f"{case}: ({scale.item()}, {zero_point.item()}) vs torchao ({ref_scale.item()}, {ref_zero_point.item()})")


def test_fast_histogram_observer_recomputes_after_new_data():
    obs = FastHistogramObserver(dtype=torch.int8, quant_min=-128, quant_max=127, eps=2**-12)
    obs(torch.linspace(-1, 1, 1000))
    first = obs.calculate_qparams()
    assert obs.calculate_qparams() is first  # cached: derived bias specs ask again
    obs(torch.linspace(-4, 4, 1000))
    assert obs.calculate_qparams()[0] > first[0]


def test_rounds_up_to_is_the_float32_rounding_boundary():
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.uniform(1, 1e6, 2000), np.arange(1, 2000)]).astype(np.float32)
    for value in values:
        t = _rounds_up_to(float(value))
        assert np.float32(t) >= value, value
        assert np.float32(np.nextafter(t, -np.inf)) < value, value
