"""Public architectures at random init (timm, torchvision: never downloaded weights) through the quantizer.

- A prepared model computes what the exported one computes: the INT decompositions are traced on stand-ins
  with the real inputs' strides (attention heads split by a permute are not contiguous; a trace on a
  contiguous stand-in picked `view` where the real tensor needs a copy: timm's MobileViT raised "view size
  is not compatible with input tensor's size and stride" at calibration).
- Small-range tensors keep their levels: torchvision's MobileNetV3-small at 128 px (random init, its batch
  norms' running statistics moved by one training-mode batch, as any training step does) has logits of
  range 1.5e-4; under the old 2^-12 scale floor every one quantized to the zero point (0 dB vs float);
  with 2^-24 the TOSA INT result on the reference model is 34.2 dB from float (the competitor: 22.6).
  The default-session case of the same defect is `test_quantizer_observer_ranges.py`'s 1e-4 layer.
"""

import pytest
import torch
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from arm_quantizer import TOSAQuantizer, get_symmetric_quantization_config
from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, run_on_reference_model
from arm_tosa_core.testing import lower


def _prepare(model: torch.nn.Module, inputs: tuple) -> tuple[torch.nn.Module, torch.nn.Module]:
    exported = torch.export.export(model.eval(), inputs).module()
    quantizer = TOSAQuantizer(TosaCompileSpec("TOSA-1.0+INT")).set_global(get_symmetric_quantization_config())
    return exported, prepare_pt2e(torch.export.export(model.eval(), inputs).module(), quantizer)


def _assert_same(prepared_out: torch.Tensor, exported_out: torch.Tensor) -> None:
    assert torch.isfinite(prepared_out).all() and torch.isfinite(exported_out).all()
    # the decompositions (softmax as exp / sum / reciprocal) round differently in float32: 1e-5 of the range
    tolerance = 1e-5 * float(exported_out.abs().max())
    assert float((prepared_out - exported_out).abs().max()) <= tolerance


class _PermutedHeads(torch.nn.Module):
    """Attention whose q, k, v come from one projection split into heads by a permute (not contiguous)."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)

    def forward(self, x):
        q, k, v = self.qkv(x).reshape(4, 8, 3, 2, 8).permute(2, 0, 3, 1, 4).unbind(0)  # (batch, head) not mergeable
        return torch.nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(4, 8, 16)


def test_attention_on_permuted_heads_prepares_and_calibrates():
    torch.manual_seed(0)
    x = torch.randn(4, 8, 16)
    exported, prepared = _prepare(_PermutedHeads(), (x,))
    with torch.no_grad():
        _assert_same(prepared(x), exported(x))


@pytest.mark.slow
def test_timm_mobilevit_xxs_prepares_calibrates_and_converts():
    import timm

    torch.manual_seed(0)
    model = timm.create_model("mobilevit_xxs", pretrained=False)
    x = torch.randn(1, 3, 64, 64)
    exported, prepared = _prepare(model, (x,))
    with torch.no_grad():
        _assert_same(prepared(x), exported(x))
        converted = convert_pt2e(prepared)
        assert torch.isfinite(converted(x)).all()


@pytest.mark.slow
def test_torchvision_mobilenet_v3_small_keeps_its_small_logits():
    import torchvision
    from quant_harness import quantize

    torch.manual_seed(0)
    model = torchvision.models.mobilenet_v3_small(weights=None)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        model.train()(torch.randn(8, 3, 128, 128, generator=gen))
    model.eval()
    samples = [(torch.randn(1, 3, 128, 128, generator=gen),) for _ in range(4)]
    converted = quantize(model, samples[0], calibration=samples)
    edge = lower(converted, samples[0], TOSAPartitioner(TosaCompileSpec("TOSA-1.0+INT")))
    out = run_on_reference_model(edge, *samples[0])
    with torch.no_grad():
        reference = model(*samples[0])
    assert torch.isfinite(out).all() and float(reference.max() - reference.min()) < 1e-3
    sqnr = (10 * torch.log10(reference.pow(2).mean() / (reference - out).pow(2).mean())).item()
    print(f"MobileNetV3-small 128 px TOSA INT vs float: {sqnr:.1f} dB")
    assert sqnr >= 25  # measured 34.2 dB; 0 dB with the old 2^-12 floor
