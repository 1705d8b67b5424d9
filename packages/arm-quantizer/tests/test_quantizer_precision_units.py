"""Mixed precision units: nested owners never overlap, moving one keeps nested units int8, and each
vela row is costed once."""

import torch
from torch import nn

from arm_quantizer import (
    TOSAQuantizer,
    get_symmetric_a16w8_quantization_config,
    get_symmetric_quantization_config,
)
from arm_quantizer.accuracy import is_quantize, quantized_layers
from arm_quantizer.mixed_precision import KEEP_INT8, quantize_with_overrides
from arm_quantizer.precision_units import movable_units, overrides_for, unit_cycles
from arm_tosa_core import TosaCompileSpec


class Block(nn.Module):
    """A residual add owned by the block, around two convs owned by its submodules."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.proj = nn.Conv2d(8, 8, 1)

    def forward(self, x):
        return x + self.proj(self.conv(x))


def _quantize():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), Block(), nn.Conv2d(8, 4, 1)).eval()
    gen = torch.Generator().manual_seed(0)
    samples = [(torch.randn(1, 3, 8, 8, generator=gen),) for _ in range(2)]
    return quantize_with_overrides(model, samples[0], samples, lambda: TOSAQuantizer(
        TosaCompileSpec("TOSA-1.0+INT+int16")).set_global(get_symmetric_quantization_config()))


def _int16_layers(gm):
    """Owners of the layers whose output quantize node is int16."""
    owners = {layer.name: layer.owner for layer in quantized_layers(gm)}
    return sorted(owners[n.args[0].name] for n in gm.graph.nodes
                  if is_quantize(n) and n.args[-1] == torch.int16 and n.args[0].name in owners)


def test_nested_units_move_alone_and_cost_once():
    quantize = _quantize()
    units = movable_units(quantized_layers(quantize({})))
    assert [u.owner for u in units] == ["0", "1.conv", "1.proj", "1", "2"]
    moved, resets = overrides_for(["1"], units)
    assert moved == ["1"] and resets == ["1.conv", "1.proj"]
    a16w8 = get_symmetric_a16w8_quantization_config()
    # set_module_name("1") alone reaches the nested convs too; the resets keep them int8
    assert _int16_layers(quantize({"1": a16w8})) == ["1", "1.conv", "1.proj"]
    assert _int16_layers(quantize({"1": a16w8, **{m: KEEP_INT8 for m in resets}})) == ["1"]
    rows = [("0", 100.0), ("1.conv.0", 50.0), ("1.proj", 30.0), ("1", 20.0), ("2", 10.0), ("", 5.0)]
    cycles, loose = unit_cycles(units, rows)
    assert cycles == {"0": 100.0, "1.conv": 50.0, "1.proj": 30.0, "1": 20.0, "2": 10.0} and loose == 5.0
    assert sum(cycles.values()) + loose == sum(c for _, c in rows)  # nothing counted twice
