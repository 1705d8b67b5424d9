"""A small CNN with one layer ("b") planted with a badly scaled output range (its observer x64)."""

from __future__ import annotations

import torch
from torchao.quantization.pt2e import MinMaxObserver
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from torchao.quantization.pt2e.quantizer import QuantizationSpec

from arm_quantizer import QuantizationConfig, TOSAQuantizer, get_symmetric_quantization_config
from arm_tosa_core import TosaCompileSpec

PLANTED = "b"


class WideObserver(MinMaxObserver):
    """Min/max observer that reports a range 8x wider than it saw: 3 bits of int8 resolution lost."""

    def calculate_qparams(self):
        return self._calculate_qparams(self.min_val * 64, self.max_val * 64)


def badly_scaled_config() -> QuantizationConfig:
    base = get_symmetric_quantization_config()
    act = QuantizationSpec(dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=torch.per_tensor_affine,
                           observer_or_fake_quant_ctr=WideObserver.with_args(eps=2**-12))
    return QuantizationConfig(act, act, base.weight)


class Planted(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        def block(i: int, o: int) -> torch.nn.Module:
            return torch.nn.Sequential(torch.nn.Conv2d(i, o, 3, padding=1), torch.nn.ReLU())
        self.a, self.b, self.c, self.d = block(3, 8), block(8, 8), block(8, 8), block(8, 8)
        self.head = torch.nn.Conv2d(8, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.d(self.c(self.b(self.a(x)))))


def build(seed: int = 0):
    """(model, evaluation samples)."""
    torch.manual_seed(seed)
    model = Planted().eval()
    gen = torch.Generator().manual_seed(seed)
    return model, [(torch.randn(1, 3, 12, 12, generator=gen),) for _ in range(4)]


def quantizer(spec: str = "TOSA-1.0+INT+int16") -> TOSAQuantizer:
    """int8 everywhere except the planted layer's bad range (the user's quantizer, as it was handed in)."""
    return TOSAQuantizer(TosaCompileSpec(spec)).set_global(get_symmetric_quantization_config()) \
        .set_module_name(PLANTED, badly_scaled_config())


def quantize(model, samples, q: TOSAQuantizer | None = None):
    prepared = prepare_pt2e(torch.export.export(model, samples[0]).module(), q or quantizer())
    with torch.no_grad():
        for s in samples:
            prepared(*s)
    return convert_pt2e(prepared)
