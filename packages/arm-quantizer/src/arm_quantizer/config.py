"""Quantization configs: which observers and qspecs each role (activation, weight, bias) uses."""

from __future__ import annotations

import warnings
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
    """convert_pt2e ran before the prepared model saw any data, or an observer saw only NaN."""


# The smallest scale an int8 tensor gets (activations and weights). TOSA 1.0's RESCALE applies
# f = multiplier * 2^-shift with a 32-bit multiplier and shift in [2, 62]; the core's multiplier_shift
# keeps a full 31-bit multiplier (2^30 <= m < 2^31) for 2^-32 <= f < 2^29, and vela takes that pair as
# is (its shift field holds 0..63). Scales at the floor appear in RESCALEs two ways:
# - a weighted op whose input, weights and output all sit at the floor rescales by F*F/F = F, which
#   needs F >= 2^-32;
# - a weighted op writing a tensor at the floor rescales its accumulator by s_in*s_w/F, which must
#   stay below 2^29: with F = 2^-24 every accumulator scale below 2^5 fits (an input range of 2^10
#   against weights of range 2^2 is 2^2 * 2^-5 = 2^-3: far inside); at 2^-32 an accumulator of 2^-3
#   would already overflow.
# So 2^-24 is the smallest floor with room on both sides (an int8 tensor keeps all 255 levels down to a
# range of 1.5e-5). The old 2^-12 collapsed every range below 0.03 (MobileNetV3's random-init logits,
# range 1.4e-4: 0 dB); the competitor's 2^-16 keeps 9 levels of that. int16 activations use 2^-24 too.
SCALE_FLOOR = 2.0**-24
# A tensor that was exactly zero for every calibration input (a dead ReLU, a pruned filter) is exact at
# any scale. It gets 2^-12, not the floor, so an accumulator rescaled into it stays far from RESCALE's
# 2^29 limit and an int32 bias beside a zero filter (quantized at s_in * s_w) keeps its range.
ZERO_RANGE_SCALE = 2.0**-12
# The range of a tensor that saw only +inf and/or -inf: the widest whose scale and end values are finite
# float32 (the TABLE ops that make them, logit at 0/1 or cosh of large inputs, then saturate to it).
INF_RANGE = 2.0**126


def _require_calibration(observer_cls):
    """An observer class that refuses to produce qparams it never measured.

    Per-tensor observers measure finite values only (`finite_values`). One that saw no finite value but
    +inf/-inf gets the widest finite range on that side (`INF_RANGE`); one that saw only NaN raises. A
    range of exactly zero gets `ZERO_RANGE_SCALE`."""

    class Calibrated(observer_cls):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if getattr(self, "ch_axis", None) is None:  # per-tensor: measure finite float values only
                super().forward(finite_values(x, self))
                return x
            return super().forward(x)

        def calculate_qparams(self):
            min_val = getattr(self, "min_val", None)
            if isinstance(min_val, torch.Tensor) and min_val.numel() and torch.isinf(min_val).any():
                seen = getattr(self, "non_finite_seen", set())
                if "+inf" in seen or "-inf" in seen:
                    return self._infinite_range(seen)
                if seen:
                    raise CalibrationError(
                        f"{type(self).__name__} saw only NaN values during calibration: the op it observes "
                        "computed NaN for every calibration input (e.g. log or sqrt of negatives, 0/0). "
                        "Calibrate with inputs inside the op's domain.")
                raise CalibrationError(
                    "convert_pt2e was called before calibration: this observer never saw data. Run the "
                    "prepared model on representative inputs (prepared(*inputs)) before convert_pt2e.")
            return super().calculate_qparams()

        def _infinite_range(self, seen: set[str]) -> tuple[torch.Tensor, torch.Tensor]:
            low, high = -INF_RANGE if "-inf" in seen else 0.0, INF_RANGE if "+inf" in seen else 0.0
            warnings.warn(f"{type(self).__name__} saw only {' and '.join(sorted(seen))} values: quantized to "
                          f"the widest finite range [{low:g}, {high:g}]; infinities saturate to its ends",
                          stacklevel=2)
            return self._calculate_qparams(torch.tensor([low]), torch.tensor([high]))

        def _calculate_qparams(self, min_val: torch.Tensor, max_val: torch.Tensor):
            scale, zero_point = super()._calculate_qparams(min_val, max_val)
            empty = (max_val.clamp(min=0) - min_val.clamp(max=0)) == 0
            if bool(empty.any()):
                scale = torch.where(empty.to(scale.device), torch.full_like(scale, ZERO_RANGE_SCALE), scale)
            return scale, zero_point

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

    def __post_init__(self) -> None:
        for role in ("input_activation", "output_activation"):
            _check_activation_spec(role, getattr(self, role))
        _check_weight_spec(self.weight)

    @property
    def weight_bits(self) -> int | None:
        """8 or 4: the width the weight range needs (4-bit weights are int8 tensors holding -7..7)."""
        if self.weight is None:
            return None
        return 4 if -8 <= self.weight.quant_min and self.weight.quant_max <= 7 else 8

    @property
    def activation_dtype(self) -> torch.dtype | None:
        spec = self.output_activation or self.input_activation
        return None if spec is None else spec.dtype


VALID_CONFIGS = ("get_symmetric_quantization_config() (a8w8), get_symmetric_a16w8_quantization_config() "
                 "(a16w8, needs \"+int16\"), get_symmetric_a8w4_quantization_config() (a8w4)")


def _check_activation_spec(role: str, spec: QuantizationSpec | None) -> None:
    """TOSA INT carries activations as int8 or int16 over their full range (TABLE has 256/513 entries,
    RESCALE writes int8/int16): a narrower activation (4-bit, a custom range) has no TOSA form."""
    if spec is None or not hasattr(spec, "dtype"):
        return
    if spec.dtype in (torch.int8, torch.int16):
        info = torch.iinfo(spec.dtype)
        if (spec.quant_min, spec.quant_max) in ((info.min, info.max), (info.min + 1, info.max), (None, None)):
            return
    bits = (f"{spec.quant_min}..{spec.quant_max} ({spec.dtype})" if spec.quant_min is not None
            else str(spec.dtype))
    raise ValueError(f"{role} quantized to {bits} is not supported: TOSA INT activations are int8 "
                     f"(-128..127) or int16 (-32768..32767), 4-bit activations have no TOSA form. Valid "
                     f"configs: {VALID_CONFIGS}")


def _check_weight_spec(spec: QuantizationSpec | None) -> None:
    if spec is None or not hasattr(spec, "dtype"):
        return
    if spec.dtype != torch.int8 or (spec.quant_min is not None and spec.quant_min < -128):
        raise ValueError(f"weights quantized as {spec.dtype} {spec.quant_min}..{spec.quant_max} are not "
                         "supported: TOSA weights are int8 (or 4-bit values -7..7 in int8 tensors, lowered "
                         f"as INT4 under \"+int4\"). Valid configs: {VALID_CONFIGS}")


def _activation(dtype: torch.dtype, is_qat: bool, is_dynamic: bool) -> QuantizationSpec:
    info = torch.iinfo(dtype)
    if is_dynamic:
        ctr = PlaceholderObserver.with_args(eps=2**-12)
    elif is_qat:
        ctr = FusedMovingAvgObsFakeQuantize.with_args(observer=MovingAverageMinMaxObserver, eps=SCALE_FLOOR)
    elif dtype == torch.int8:
        # int8: clip outliers where that lowers the L2 error (torchao's histogram search, the usual
        # PT2E choice and upstream's): MobileNetV2 224 TOSA INT vs float 16.2 -> 17.8 dB (seed 0);
        # over seeds and the other example models it is within -0.4..+0.4 dB of MinMax
        ctr = _Histogram.with_args(eps=SCALE_FLOOR)
    else:
        # int16: rounding noise is 256x smaller than int8's, so clipping rarely pays: min/max is enough.
        ctr = _MinMax.with_args(eps=SCALE_FLOOR)
    qscheme = torch.per_tensor_affine if dtype == torch.int8 else torch.per_tensor_symmetric
    return QuantizationSpec(dtype=dtype, quant_min=info.min, quant_max=info.max, qscheme=qscheme,
                            is_dynamic=is_dynamic, observer_or_fake_quant_ctr=ctr)


def _weight(is_per_channel: bool, is_qat: bool, bits: int = 8) -> QuantizationSpec:
    qmax = 2 ** (bits - 1) - 1  # symmetric: -qmax..qmax, so the weight zero point stays 0
    observer = (MovingAveragePerChannelMinMaxObserver if is_qat else _PerChannelMinMax) if is_per_channel \
        else (MovingAverageMinMaxObserver if is_qat else _MinMax)
    qscheme = torch.per_channel_symmetric if is_per_channel else torch.per_tensor_symmetric
    if is_qat:
        ctr = FusedMovingAvgObsFakeQuantize.with_args(observer=observer, eps=SCALE_FLOOR, quant_min=-qmax,
                                                      quant_max=qmax, dtype=torch.int8, qscheme=qscheme)
    else:
        ctr = observer.with_args(eps=SCALE_FLOOR)
    return QuantizationSpec(dtype=torch.int8, quant_min=-qmax, quant_max=qmax, qscheme=qscheme, ch_axis=0,
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


def get_symmetric_a8w4_quantization_config(is_per_channel: bool = True, is_qat: bool = False,
                                           is_dynamic: bool = False, group_size: int | None = None
                                           ) -> QuantizationConfig:
    """4-bit symmetric weights (-7..7, per-channel or per-tensor), 8-bit activations as in
    `get_symmetric_quantization_config`, int32 bias.

    The weights are int8 tensors holding 4-bit values; the lowering emits them as TOSA INT4 (EXT-INT4:
    CONV2D, DEPTHWISE_CONV2D, TRANSPOSE_CONV2D, CONV3D; `linear` lowers to CONV2D) under a spec with
    "+int4" (the Ethos-U specs have it), else as int8 holding the same values (exact either way).
    `group_size` must stay None: no TOSA 1.0 operator takes per-group weight scales (a weighted op has
    one scale per output channel, applied by the RESCALE after it), so only per-channel and per-tensor
    scales lower.
    """
    if group_size is not None:
        raise ValueError(f"group_size={group_size!r} is not supported: TOSA 1.0 convolutions and their "
                         "RESCALE take one weight scale per output channel, so per-group scales have no "
                         "TOSA form; valid: group_size=None with is_per_channel=True (one scale per output "
                         "channel) or is_per_channel=False (one scale per tensor)")
    act = _activation(torch.int8, is_qat, is_dynamic)
    return QuantizationConfig(act, None if is_dynamic else act, _weight(is_per_channel, is_qat, bits=4),
                              is_qat, is_dynamic)
