"""Public architectures at random init (timm, torchvision: never downloaded weights) through the quantizer.

- A prepared model computes what the exported one computes: the INT decompositions are traced on stand-ins
  with the real inputs' strides (attention heads split by a permute are not contiguous; a trace on a
  contiguous stand-in picked `view` where the real tensor needs a copy: timm's MobileViT raised "view size
  is not compatible with input tensor's size and stride" at calibration).
"""

import pytest
import torch
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from arm_quantizer import TOSAQuantizer, get_symmetric_quantization_config
from arm_tosa_core import TosaCompileSpec


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
