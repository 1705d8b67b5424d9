"""Mixed precision units: nested owners never overlap, moving one keeps nested units int8, an owner's
own functional ops are node units of their own, and each vela row is costed once."""

import torch
from torch import nn

from arm_quantizer import (
    TOSAQuantizer,
    get_symmetric_a16w8_quantization_config,
    get_symmetric_quantization_config,
)
from arm_quantizer.accuracy import is_quantize, quantized_layers
from arm_quantizer.mixed_precision import KEEP_INT8, overrides_for_all, quantize_with_overrides
from arm_quantizer.precision_units import Unit, movable_units, overrides_for, unit_cycles
from arm_tosa_core import TosaCompileSpec


class Block(nn.Module):
    """A residual add owned by the block, around two convs owned by its submodules."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.proj = nn.Conv2d(8, 8, 1)

    def forward(self, x):
        return x + self.proj(self.conv(x))


def _quantize(model=None, channels=3):
    torch.manual_seed(0)
    model = model or nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), Block(), nn.Conv2d(8, 4, 1)).eval()
    gen = torch.Generator().manual_seed(0)
    samples = [(torch.randn(1, channels, 8, 8, generator=gen),) for _ in range(2)]
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
    # the block's residual add is its own forward's op, around nested units: a node unit of its own
    assert [u.owner for u in units] == ["0", "1.conv", "1.proj", "@add", "2"]
    assert units[3].nodes == ["add"] and units[3].module == "1"
    a16w8 = get_symmetric_a16w8_quantization_config()
    # set_module_name("1") alone reaches the nested convs too; set_node_name reaches the add alone
    assert _int16_layers(quantize({"1": a16w8})) == ["1", "1.conv", "1.proj"]
    assert overrides_for_all(["@add"], units, a16w8) == {"@add": a16w8}
    assert _int16_layers(quantize(overrides_for_all(["@add"], units, a16w8))) == ["1"]
    # a module unit moved keeps the nested units, node units included, int8
    moved, resets = overrides_for(["1.conv", "1.proj"], units)
    assert moved == ["1.conv", "1.proj"] and resets == []
    rows = [("0", 100.0), ("1.conv.0", 50.0), ("1.proj", 30.0), ("1", "add", 20.0), ("2", 10.0), ("", 5.0)]
    cycles, loose = unit_cycles(units, rows)
    assert cycles == {"0": 100.0, "1.conv": 50.0, "1.proj": 30.0, "@add": 20.0, "2": 10.0} and loose == 5.0
    assert sum(cycles.values()) + loose == sum(row[-1] for row in rows)  # nothing counted twice


def test_model_forward_ops_are_node_units():
    """The block's own add has no module: a node unit, moved by set_node_name, the convs kept int8."""
    quantize = _quantize(Block().eval(), channels=8)
    units = movable_units(quantized_layers(quantize({})))
    assert sorted(u.owner for u in units) == ["@add", "conv", "proj"]
    moved, resets = overrides_for(["@add"], units)
    assert moved == ["@add"] and resets == []
    overrides = overrides_for_all(["@add"], units, get_symmetric_a16w8_quantization_config())
    assert _int16_layers(quantize(overrides)) == [""]


def test_a_moved_owner_keeps_its_node_units_int8():
    """set_module_name on an owner reaches its own ops too: a node unit left int8 is set back by name."""
    quantize = _quantize()
    units = movable_units(quantized_layers(quantize({})))
    # "1" as a module unit (what stays of an owner whose layer reaches into a nested module): moving
    # it must reset both nested module units and the node unit of its add
    units = [*units, Unit("1", [], {"1"})]
    moved, resets = overrides_for(["1"], units)
    assert moved == ["1"] and resets == ["1.conv", "1.proj", "@add"]
    overrides = overrides_for_all(["1"], units, get_symmetric_a16w8_quantization_config())
    assert overrides["@add"] == KEEP_INT8 and overrides["1.conv"] == KEEP_INT8
