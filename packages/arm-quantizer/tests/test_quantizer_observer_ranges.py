"""Observer ranges at the edges: tensors that saw only infinities, only NaN, exactly zero, or a tiny range.

- logit at 0/1, atanh at +-1, cosh/sinh of large inputs: the op's output observer sees only +-inf. It gets
  the widest finite range on each side it saw (`INF_RANGE`), the op lowers as a TABLE, and the TOSA
  result equals the fake-quantized model's (0 LSB), finite where fake-quant is.
- an observer that saw only NaN raises `CalibrationError` saying so (not "never saw data").
- a layer whose output (and weight) range is 1e-4 keeps its levels: the scale floor (`SCALE_FLOOR`,
  2^-24) is below 1e-4 / 255, where the old 2^-12 left every code at the zero point (0 dB).
- a dead ReLU (exactly zero for every calibration input) gets `ZERO_RANGE_SCALE`, and lowers.
- an activation range of +-1e18: the histogram's error estimate (cubic in the bin width) overflowed float32,
  and the range walk clipped it to its negative end.
"""

import pytest
import torch
from quant_harness import check_int, output_scales, quantize

from arm_quantizer.config import INF_RANGE, SCALE_FLOOR, ZERO_RANGE_SCALE, CalibrationError
from arm_tosa_core import run_on_reference_model
from arm_tosa_core.testing import FnModule


def _sqnr_db(signal: torch.Tensor, approx: torch.Tensor) -> float:
    assert torch.isfinite(approx).all(), approx
    return (10 * torch.log10(signal.pow(2).mean() / (signal - approx).pow(2).mean())).item()


def _module(fn) -> FnModule:
    return FnModule(lambda s, x: fn(x))


INFINITE_OUTPUTS = {  # op -> calibration input whose every output is +-inf
    "logit": (torch.logit, torch.tensor([[0.0, 1.0, 0.0, 1.0]])),
    "atanh": (torch.atanh, torch.tensor([[1.0, -1.0, 1.0, -1.0]])),
    "cosh": (torch.cosh, torch.tensor([[100.0, -100.0, 200.0, 300.0]])),
    "sinh": (torch.sinh, torch.tensor([[100.0, -100.0, 200.0, 300.0]])),
}


@pytest.mark.parametrize("name", sorted(INFINITE_OUTPUTS))
def test_only_infinite_outputs_get_the_widest_range_and_lower(name):
    fn, x = INFINITE_OUTPUTS[name]
    with pytest.warns(UserWarning, match="saw only"):
        edge, _, lsb, converted = check_int(_module(fn), (x,), max_lsb=0, case=name)
    out = run_on_reference_model(edge, x)
    with torch.no_grad():
        fake = converted(x)
    assert torch.equal(torch.isfinite(out), torch.isfinite(fake)) and torch.isfinite(fake).all(), (out, fake)
    assert torch.equal(out, fake), (out, fake)
    # the output's range reaches INF_RANGE on each side that saw an infinity (int8: 255 steps)
    assert output_scales(converted)[0] >= INF_RANGE / 255, output_scales(converted)


def test_only_nan_says_so():
    with pytest.raises(CalibrationError, match="saw only NaN"):
        quantize(_module(torch.sqrt), (-1.0 - torch.rand(1, 8),))


def test_output_range_1e_4_keeps_its_levels():
    """Linear with weights below 1e-5 and outputs of range ~1e-4, through TOSA INT."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(32, 16).eval()
    with torch.no_grad():
        layer.weight.mul_(1e-5 / layer.weight.abs().max())
        layer.bias.zero_()
    x = torch.randn(4, 32)
    edge, _, _, converted = check_int(layer, (x,), case="range_1e-4")
    with torch.no_grad():
        reference = layer(x)
    assert 1e-4 < float(reference.max() - reference.min()) < 1e-3 and SCALE_FLOOR * 255 < 1e-4
    out = run_on_reference_model(edge, x)
    sqnr = _sqnr_db(reference, out)
    print(f"range 1e-4: SQNR vs float {sqnr:.1f} dB")
    # measured 39.2 dB (the old 2^-12 floor: 0 dB, every output code at the zero point)
    assert sqnr >= 30


def test_dead_relu_gets_the_zero_range_scale_and_lowers():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
    with torch.no_grad():
        model[0].bias.fill_(-100.0)  # every output negative: the ReLU's output is exactly zero
    x = 10 * torch.randn(1, 3, 8, 8)
    edge, _, _, converted = check_int(model, (x,), case="dead_relu")
    scales = {float(n.args[1]) for n in converted.graph.nodes if "quantize_per_tensor" in str(n.target)}
    assert ZERO_RANGE_SCALE in scales, scales
    assert torch.equal(run_on_reference_model(edge, x), torch.zeros(1, 4, 6, 6))


def test_huge_activation_range_keeps_both_signs():
    """int8 activations of +-1e18 (histogram observer): every positive output came back 0 (1.0 relative error
    of fake-quant against float); the range search now runs on a power-of-two-scaled copy of the range."""
    x = torch.randn(2, 8, generator=torch.Generator().manual_seed(0)) * 1e18
    model = _module(lambda t: t * 3)
    converted = quantize(model, [x])
    with torch.no_grad():
        fake, ref = converted(x), model(x)
    assert ((fake - ref).abs().max() / ref.abs().max()).item() < 0.01
