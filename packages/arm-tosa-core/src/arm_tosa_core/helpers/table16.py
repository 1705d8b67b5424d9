"""int16 TABLE: a unary function of int16 activations as TOSA's interpolated 513-entry lookup.

TOSA 1.0 TABLE on int16 (the "int16" extension) reads entry i = (x + 32768) >> 7 and the next one,
and returns (t[i] << 7) + (t[i+1] - t[i]) * ((x + 32768) & 127): a straight line between samples 128
codes apart, in 1/128 output codes (int32). One RESCALE by 1/128 rounds it to the output's int16 code.

A line between samples is not the function, so the table is built to match fake-quant code by code:
start from the samples, each corrected by half the midpoint error of the two chords it ends (a
sample outside the function's domain takes the value of the nearest code inside it), then nudge each entry by ±1 while that lowers the worst error of the two
segments it bounds. Every one of the 65,536 input codes is then checked against PT2E's
`quantize(f(dequantize(x)))`; when some code is more than `MAX_LSB` off (a kink the line cannot
follow, such as a saturation or a singularity like log near 0) the node stays on the CPU with the
measured error as the reason, so what lowers is within 1 LSB by construction.
"""

from __future__ import annotations

from functools import lru_cache

import torch
from torch.fx import Node

from .common import aten_target
from .qparams import QParams, is_dequantize, is_quantize, qparams_of

MAX_LSB = 1
_CODES = torch.arange(-32768, 32768, dtype=torch.float64)


def _fake_quant(fn, real: torch.Tensor, q: QParams) -> torch.Tensor:
    y = fn(real.float()).double()
    return torch.clamp(torch.round(y / float(q.scale)) + q.zero_point, q.qmin, q.qmax)


def _interpolate(table: torch.Tensor) -> torch.Tensor:
    """What TABLE + RESCALE(1/128, round half up) give for every int16 code (float64)."""
    v = (_CODES + 32768).long()
    base, nxt = table[v >> 7], table[torch.clamp((v >> 7) + 1, max=512)]
    return torch.floor((base * 128 + (nxt - base) * (v & 127) + 64) / 128)


def _segment_errors(table: torch.Tensor, fake: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Worst |error| of each of the 512 segments (codes outside the function's domain do not count)."""
    err = torch.where(valid, (_interpolate(table) - fake).abs(), torch.zeros_like(fake))
    return err.reshape(512, 128).amax(1)


@lru_cache(maxsize=256)
def _build(fn_key, qin: QParams, qout: QParams) -> tuple[torch.Tensor, float]:
    fn = fn_key[0]
    fake = _fake_quant(fn, (_CODES - qin.zero_point) * float(qin.scale), qout)
    valid = ~torch.isnan(fake)
    if not bool(valid.any()):
        return torch.zeros(513, dtype=torch.int16), float("inf")
    # samples at codes -32768 + 128 k (k = 512 is one past the last code: extrapolated like a code)
    at = torch.clamp(torch.arange(513) * 128, max=65535)
    nearest_valid = torch.arange(65536)[valid]
    pick = nearest_valid[torch.searchsorted(nearest_valid, at).clamp(max=nearest_valid.numel() - 1)]
    pick = torch.where(valid[at], at, pick)
    # start from the samples, each corrected by half the midpoint error of the two chords it ends (the
    # chord's error centred on zero), rounded
    units = (fn((_CODES[pick] - qin.zero_point) * float(qin.scale)).double() / float(qout.scale)
             + qout.zero_point)
    mid = torch.clamp(pick[:-1] + 64, max=65535)
    chord = (units[:-1] + units[1:]) / 2
    mid_err = chord - torch.where(valid[mid], fake[mid], chord)
    mid_err = torch.where(mid_err.isfinite() & (mid_err.abs() < 8), mid_err, torch.zeros_like(mid_err))
    correction = torch.zeros_like(units)
    correction[:-1] += mid_err / 2
    correction[1:] += mid_err / 2
    correction[1:-1] /= 2
    table = torch.where((units - correction).isfinite(), torch.round(units - correction), fake[pick])
    table = torch.clamp(table, qout.qmin, qout.qmax)
    fake_filled = torch.where(valid, fake, torch.zeros_like(fake))
    # coordinate descent, vectorized: entries of one parity bound disjoint segment pairs, so all of
    # them can move at once; a move is kept where it lowers the worse of its two segments
    for _ in range(4):
        for parity in (0, 1):
            entries = torch.arange(parity, 513, 2)
            for step in (-1.0, 1.0):
                before = _entry_errors(_segment_errors(table, fake_filled, valid), entries)
                trial = table.clone()
                trial[entries] += step
                after = _entry_errors(_segment_errors(trial, fake_filled, valid), entries)
                better = entries[after < before]
                table[better] += step
    table = torch.clamp(table, -32768, 32767)
    err = torch.where(valid, (_interpolate(table) - fake_filled).abs(), torch.zeros_like(fake))
    return table.to(torch.int16), float(err.max())


def _entry_errors(seg: torch.Tensor, entries: torch.Tensor) -> torch.Tensor:
    """The worse error of the two segments each entry bounds (entry k: segments k - 1 and k)."""
    padded = torch.cat([torch.zeros(1, dtype=seg.dtype), seg, torch.zeros(1, dtype=seg.dtype)])
    return torch.maximum(padded[entries], padded[entries + 1])


def _function(node: Node):
    target = aten_target(node.target)
    args, kwargs = tuple(node.args[1:]), dict(node.kwargs)
    return lambda real: target(real, *args, **kwargs)


def _key(node: Node) -> tuple:
    fn = _function(node)
    return (fn, str(aten_target(node.target)), repr(node.args[1:]), repr(sorted(node.kwargs.items())))


class _FnKey(tuple):
    """Cache key: the function is compared by what it computes (target and arguments), not identity."""

    def __hash__(self) -> int:
        return hash(self[1:])

    def __eq__(self, other) -> bool:
        return isinstance(other, tuple) and self[1:] == other[1:]


def int16_table(node: Node, qin: QParams, qout: QParams, fn=None, args=()) -> tuple[torch.Tensor, float]:
    """(513 int16 entries, worst error in output LSBs over every int16 code) for a TABLE node: `fn` of
    the quantized operand when given (the lowering's, with graph constants resolved to `args`), else
    the node's target on its first argument."""
    key = _key(node) if fn is None else (fn, str(aten_target(node.target)), f"resolved {args!r}",
                                         repr(sorted(node.kwargs.items())))
    return _build(_FnKey(key), qin, qout)


def int16_table_reason(node: Node) -> str | None:
    """Why `node`'s int16 TABLE would not be within `MAX_LSB` of fake-quant (None when it is)."""
    source = node.args[0]
    users = [u for u in node.users if is_quantize(u)]
    if not (is_dequantize(source) and users) or any(isinstance(a, Node) for a in node.args[1:]):
        return None  # qparams or a graph constant's value are not known here; the lowering checks again
    table_error = int16_table(node, qparams_of(source), qparams_of(users[0]))[1]
    if table_error > MAX_LSB:
        return (f"an int16 TABLE (513 entries, linear between them) would be {table_error:.0f} LSB off for these "
                f"qparams (kinks the line cannot follow: saturation or a singularity); it runs on the CPU")
    return None
