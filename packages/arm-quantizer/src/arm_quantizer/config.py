"""Quantization configs: which observers and qspecs each role (activation, weight, bias) uses."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torchao.quantization.pt2e import (
    FusedMovingAvgObsFakeQuantize,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    PerChannelMinMaxObserver,
    PlaceholderObserver,
)
from torchao.quantization.pt2e.quantizer import QuantizationSpec

from .observers import FastHistogramObserver, finite_values


class CalibrationError(RuntimeError):
    """convert_pt2e ran before the prepared model saw any data."""


def _require_calibration(observer_cls):
    """An observer class that refuses to produce qparams it never measured."""

    class Calibrated(observer_cls):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if getattr(self, "ch_axis", None) is None:  # per-tensor: measure finite float values only
                super().forward(finite_values(x, self))
                return x
            return super().forward(x)

        def calculate_qparams(self):
            min_val = getattr(self, "min_val", None)
            if isinstance(min_val, torch.Tensor) and min_val.numel() and torch.isinf(min_val).any():
                raise CalibrationError(
                    "convert_pt2e was called before calibration: this observer never saw data. Run the "
                    "prepared model on representative inputs (prepared(*inputs)) before convert_pt2e.")
            return super().calculate_qparams()

    Calibrated.__name__ = Calibrated.__qualname__ = f"Calibrated{observer_cls.__name__}"
    return Calibrated


_MinMax = _require_calibration(MinMaxObserver)
_PerChannelMinMax = _require_calibration(PerChannelMinMaxObserver)
_Histogram = _require_calibration(FastHistogramObserver)


@dataclass(eq=False)
class QuantizationConfig:
    """Qspecs for activations, weights and bias (bias is always derived: int32, in_scale x w_scale)."""

    input_activation: QuantizationSpec | None
    output_activation: QuantizationSpec | None
    weight: QuantizationSpec | None
    is_qat: bool = False
    is_dynamic: bool = False

    @property
    def activation_dtype(self) -> torch.dtype | None:
        spec = self.output_activation or self.input_activation
        return None if spec is None else spec.dtype


def _activation(dtype: torch.dtype, is_qat: bool, is_dynamic: bool) -> QuantizationSpec:
    info = torch.iinfo(dtype)
    if is_dynamic:
        ctr = PlaceholderObserver.with_args(eps=2**-12)
    elif is_qat:
        ctr = FusedMovingAvgObsFakeQuantize.with_args(observer=MovingAverageMinMaxObserver, eps=2**-12)
    elif dtype == torch.int8:
        # int8: clip outliers where that lowers the L2 error (torchao's histogram search, the usual
        # PT2E choice and upstream's): MobileNetV2 224 TOSA INT vs float 16.2 -> 17.8 dB (seed 0);
        # over seeds and the other example models it is within -0.4..+0.4 dB of MinMax
        ctr = _Histogram.with_args(eps=2**-12)
    else:
        # int16: rounding noise is 256x smaller than int8's, so clipping rarely pays: min/max is enough.
        # The smallest scale is 2^-24, not int8's 2^-12: 2^-12 x 32767 is +-8, so every int16 tensor
        # with a smaller range (most activations) would lose bits to that floor (sigmoid: 12 of 16).
        ctr = _MinMax.with_args(eps=2**-24)
    qscheme = torch.per_tensor_affine if dtype == torch.int8 else torch.per_tensor_symmetric
    return QuantizationSpec(dtype=dtype, quant_min=info.min, quant_max=info.max, qscheme=qscheme,
                            is_dynamic=is_dynamic, observer_or_fake_quant_ctr=ctr)


def _weight(is_per_channel: bool, is_qat: bool) -> QuantizationSpec:
    observer = (MovingAveragePerChannelMinMaxObserver if is_qat else _PerChannelMinMax) if is_per_channel \
        else (MovingAverageMinMaxObserver if is_qat else _MinMax)
    qscheme = torch.per_channel_symmetric if is_per_channel else torch.per_tensor_symmetric
    if is_qat:
        ctr = FusedMovingAvgObsFakeQuantize.with_args(observer=observer, eps=2**-12, quant_min=-127,
                                                      quant_max=127, dtype=torch.int8, qscheme=qscheme)
    else:
        ctr = observer.with_args(eps=2**-12)
    return QuantizationSpec(dtype=torch.int8, quant_min=-127, quant_max=127, qscheme=qscheme, ch_axis=0,
                            is_dynamic=False, observer_or_fake_quant_ctr=ctr)


def get_symmetric_quantization_config(is_per_channel: bool = True, is_qat: bool = False,
                                      is_dynamic: bool = False) -> QuantizationConfig:
    """8-bit symmetric weights (per-channel or per-tensor), 8-bit asymmetric activations, int32 bias.

    Static activation ranges come from a histogram search (outliers are clipped where that lowers
    the L2 error); weights use their min/max.

    `is_dynamic` computes activation qparams at run time (those nodes stay on the CPU for TOSA, which
    needs constant scales); `is_qat` uses fake-quantize modules for quantization-aware training.
    """
    act = _activation(torch.int8, is_qat, is_dynamic)
    return QuantizationConfig(act, None if is_dynamic else act, _weight(is_per_channel, is_qat), is_qat,
                              is_dynamic)


def get_symmetric_a16w8_quantization_config(is_per_channel: bool = True, is_qat: bool = False
                                            ) -> QuantizationConfig:
    """16-bit symmetric activations with 8-bit weights (needs a spec with the "int16" extension)."""
    act = _activation(torch.int16, is_qat, False)
    return QuantizationConfig(act, act, _weight(is_per_channel, is_qat), is_qat, False)
