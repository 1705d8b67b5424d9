"""int16 TABLE (TOSA EXT-INT16) for the TABLE families: its entries, TOSA's interpolation, and the check
that decides whether a node may use it.

TOSA's int16 TABLE has 513 int16 entries, one at every 128th input code; it returns an int32 with 7
fractional bits, interpolated linearly between the two entries around the input. A RESCALE then rounds
that to the output's int16 codes. The chord over 128 codes of a smooth function is off by h^2 f''/8:
centring it halves that, and the entries' own rounding adds half an LSB, so sigmoid comes out within
1 LSB of quantize(f(x)) and tanh (steeper) within 2 at full-range scales; a step (floor) or a function
that leaves the output range (exp over the whole input range) is many LSBs off. So a node takes this
path only when its table, emulated over all 65536 input codes, stays within `MAX_LSB` of the exact result.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.fx import Node

#: input codes of the 513 entries (the last, 32768, is only ever read as a right neighbour)
GRID = torch.arange(-32768, 32769, 128, dtype=torch.float64)
MAX_LSB = 2.0
Function = Callable[[torch.Tensor], torch.Tensor]  # int16 input codes (float64) -> real outputs


def table_entries(f: Function, out_scale: float) -> tuple[torch.Tensor, float]:
    """(513 int16 entries, the real value of one entry unit).

    Entries are in units of the output scale, widened where f over the whole int16 input range leaves
    the output's range (a clamped entry would bend the chord before the output saturates). Each entry is
    moved by half the midpoint error of the segments it ends, so a chord's error is centred on zero.
    """
    real = f(GRID)
    table_scale = out_scale * max(1.0, real.abs().max().item() / (32767 * out_scale))
    units = real / table_scale
    mid_err = (units[:-1] + units[1:]) / 2 - f(GRID[:-1] + 64) / table_scale
    correction = torch.zeros_like(units)
    correction[:-1] += mid_err / 2
    correction[1:] += mid_err / 2
    correction[1:-1] /= 2
    return torch.clamp(torch.round(units - correction), -32768, 32767).to(torch.int16), table_scale


def interpolate(table: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """TOSA 1.0 TABLE on int16 codes: (base << 7) + (next - base) * fraction, as int64."""
    c = codes.to(torch.int64)
    index, fraction = (c + 32768) >> 7, c & 0x7F
    t = table.to(torch.int64)
    base = t[index]
    return base * 128 + (t[torch.clamp(index + 1, max=512)] - base) * fraction


def max_error_lsb(f: Function, out_scale: float, out_zp: int, qmin: int, qmax: int) -> float:
    """The largest difference, in output codes, between the table path and quantize(f(x)) over every
    int16 input code (the final RESCALE's rounding emulated as round half up)."""
    table, table_scale = table_entries(f, out_scale)
    codes = torch.arange(-32768, 32768, dtype=torch.float64)
    got = torch.floor(interpolate(table, codes).double() * (table_scale / out_scale / 128) + 0.5) + out_zp
    exact = torch.round(f(codes) / out_scale) + out_zp
    got, exact = torch.clamp(got, qmin, qmax), torch.clamp(exact, qmin, qmax)
    err = (got - exact).abs().max().item()
    return err if err == err else float("inf")  # NaN (f undefined somewhere): never within bounds


def node_function(node: Node, in_scale: float, in_zp: int) -> Function:
    """The node's own op as a function of int16 input codes (its other arguments fixed)."""
    from .registry import aten_target

    fn = aten_target(node.target)
    return lambda codes: fn((codes - in_zp) * in_scale, *node.args[1:], **node.kwargs).double()


def fits(node: Node) -> bool:
    """Whether the quantized TABLE node `node` (int16 in, int16 out) lowers within `MAX_LSB`."""
    from .quantized import is_dequantize, is_quantize, qparams_of

    source = node.args[0] if node.args else None
    users = [u for u in node.users if is_quantize(u)]
    if not (isinstance(source, Node) and is_dequantize(source) and users):
        return False
    try:
        qin, qout = qparams_of(source), qparams_of(users[0])
        if qin.dtype != torch.int16 or qout.dtype != torch.int16:
            return False
        f = node_function(node, float(qin.scale), int(qin.zero_point))
        with torch.no_grad():
            return max_error_lsb(f, float(qout.scale), int(qout.zero_point), qout.qmin, qout.qmax) <= MAX_LSB
    except (ValueError, TypeError, RuntimeError):
        return False
