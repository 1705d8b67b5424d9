"""Activation observers: the histogram range search of PT2E, computed without per-step tensor ops.

torchao's `HistogramObserver` (the usual PT2E choice for static activations, and upstream's) picks
the clipping range by a greedy walk over quantiles of the histogram, moving one end at a time until
its L2 error estimate rises. Its walk indexes a tensor at every 1e-5 quantile step: thousands of
small tensor ops per observer on long-tailed activations (1.5 s for a Llama block's 77 observers).
`FastHistogramObserver` takes the same walk over a Python list and asks torchao's own error
estimate only where the range changes, so it returns the same qparams, faster; it also caches
them, because every derived bias spec asks its input observer again.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator

import numpy as np
import torch
from torchao.quantization.pt2e import HistogramObserver

_STEP = 1e-5  # quantile step of the walk (torchao's granularity)


def greedy_range_path(cumsum: list[float], total: float, bins: int) -> Iterator[tuple[int, int]]:
    """The (start_bin, end_bin) candidates of torchao's histogram walk, in order.

    At each quantile step the end with the larger move is advanced; a step that moves no bin edge
    yields nothing. Comparisons are made in float32, as torchao's tensor comparisons are, so the
    candidates are the same bins. The caller stops at the first candidate whose error rises.
    """
    f32 = np.float32
    alpha, beta = 0.0, 1.0
    start, end = 0, bins - 1
    while alpha < beta and start < end:  # start == end: no edge can move any more
        next_alpha, next_beta = alpha + _STEP, beta - _STEP
        lo_cut, hi_cut = float(f32(next_alpha * total)), float(f32(next_beta * total))
        left = start
        while left < end and cumsum[left] < lo_cut:
            left += 1
        right = end
        while right > start and cumsum[right] > hi_cut:
            right -= 1
        if left - start > end - right:
            alpha, start = next_alpha, left
        elif right == end:  # nothing moved: only beta walks on, until the top bin drops out
            beta = _walk_beta(next_beta, alpha, total, cumsum[end])
            continue
        else:
            beta, end = next_beta, right
        yield start, end


def _walk_beta(beta: float, alpha: float, total: float, top: float) -> float:
    """Take the steps that move no edge at once: beta -= step while f32((beta - step) * total) >= top.

    The same float64 subtractions as the step-by-step walk, without its per-step float32 casts: the
    comparison is made against the smallest float64 that rounds to a float32 >= `top`.
    """
    if top <= 0.0:
        return beta
    threshold = _rounds_up_to(top)
    while alpha < beta:
        next_beta = beta - _STEP
        if next_beta * total < threshold:
            break
        beta = next_beta
    return beta


def _rounds_up_to(value: float) -> float:
    """The smallest float64 whose float32 rounding (nearest, ties to even) is >= `value` (a float32)."""
    v = np.float32(value)
    below = np.nextafter(v, np.float32(-np.inf))
    mid = (float(v) + float(below)) / 2  # exact: float32 values have 24-bit mantissas
    tie_goes_up = int(v.view(np.int32)) % 2 == 0  # ties round to the even mantissa
    return mid if tie_goes_up else float(np.nextafter(mid, np.inf))


def finite_values(x: torch.Tensor, observer) -> torch.Tensor:
    """The finite values of `x`, which is all an observer may measure.

    An additive -inf attention mask (or a masked score) holds -inf: a histogram over it has no finite
    range (torch.histc raises), and a min/max over it gives an infinite scale. Those values quantize to
    the end of the range whatever the scale, so they are left out, with a warning naming the observer;
    which kinds were seen ("+inf", "-inf", "nan") is kept in `observer.non_finite_seen`.
    Non-float tensors (int64 indices) carry no quantization range: they pass unobserved.
    """
    if not x.is_floating_point():
        return x.new_zeros((0,), dtype=torch.float32)
    finite = torch.isfinite(x)
    if bool(finite.all()):
        return x
    seen = observer.__dict__.setdefault("non_finite_seen", set())
    seen.update(kind for kind, hit in (("+inf", x == torch.inf), ("-inf", x == -torch.inf), ("nan", x.isnan()))
                if bool(hit.any()))
    if not getattr(observer, "_warned_non_finite", False):
        observer._warned_non_finite = True
        warnings.warn(f"{type(observer).__name__}: ignoring {int((~finite).sum())} non-finite value(s) "
                      "(e.g. an additive -inf mask); they quantize to the end of the range", stacklevel=3)
    return x[finite]


class FastHistogramObserver(HistogramObserver):
    """`HistogramObserver` with the same range search in plain Python and cached qparams."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._qparams: tuple[torch.Tensor, torch.Tensor] | None = None

    def forward(self, x_orig: torch.Tensor) -> torch.Tensor:
        self._qparams = None  # new data: the cached qparams are stale
        return super().forward(x_orig)

    def calculate_qparams(self):
        if self._qparams is None:
            self._qparams = super().calculate_qparams()
        return self._qparams

    def _non_linear_param_search(self) -> tuple[torch.Tensor, torch.Tensor]:
        bin_width = (self.max_val - self.min_val) / self.bins
        total = torch.sum(self.histogram).item()
        cumsum = torch.cumsum(self.histogram, dim=0).tolist()
        start, end = 0, self.bins - 1
        norm_min = float("inf")
        # torchao's error estimate grows with the cube of the bin width: on a range wider than about 1e12 it
        # overflows float32 to inf/NaN, no candidate compares larger, and the walk clipped the range to a
        # sliver (int8 activations of +-1e18: every positive value came back 0). The estimate scales as
        # width^2, so it is computed on the range divided by a power of two that brings it near 1: exact,
        # the same choice wherever torchao's own estimate is finite.
        low, high = self.min_val, self.max_val
        shift = 2.0 ** -math.frexp(float(high) - float(low))[1] if float(high) > float(low) else 1.0
        self.min_val, self.max_val = (low.double() * shift).float(), (high.double() * shift).float()
        try:
            for next_start, next_end in greedy_range_path(cumsum, total, self.bins):
                norm = self._compute_quantization_error(next_start, next_end)
                if norm > norm_min:
                    break
                norm_min, start, end = norm, next_start, next_end
        finally:
            self.min_val, self.max_val = low, high
        return self.min_val + bin_width * start, self.min_val + bin_width * (end + 1)
