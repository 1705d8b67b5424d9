"""What mixed precision can move: non-overlapping units of layers, each moved by ``set_module_name``
or, for the functional ops of a module's own forward, by ``set_node_name``.

A layer's *owner* is the innermost module holding all its nodes. Owners nest (``features.1`` owns
a residual add, ``features.1.conv.0`` a conv inside it), and ``set_module_name("features.1", c)``
reaches every node under ``features.1``. So a *module unit* is an owner with the layers it owns
directly; moving it sets its owner to a16w8 and sets each unit nested inside it that stays int8 back
to the user's int8 configuration (the innermost ``set_module_name`` wins), so units never overlap and
each layer's cost is counted once. Where a layer's own nodes sit inside a nested unit's module
(resetting that module would take them back), the two units are one.

An owner with units nested inside it (the model's own forward, owner ``""``, holds every module; a
residual block holds its convs) runs compute of its own between them: an attention's ``q @ k^T``,
softmax and ``@ v``, a residual add. Moving all of it at once is coarse (the whole attention math of
a transformer block is one module's forward), so each of its layers whose nodes all sit in that
owner's own forward is a *node unit* of its own (key ``@<layer>``), moved by ``set_node_name`` on its
nodes (which wins over module and global configs). What stays of the module unit (layers that reach
into a nested module) keeps its ``set_module_name``; one left with no layer is dropped. Node names
are those of the graph the quantizer annotates: stable for one model and toolkit version only.

``unit_cycles`` splits per-layer cycle counts (vela's rows, named by module path and, where known,
torch op) over the units, each row counted once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .accuracy import Layer

NODE_UNIT = "@"
"""Key prefix of a node unit (``@<layer name>``); no module path starts with it."""


def _inside(path: str, module: str) -> bool:
    """Whether ``path`` is ``module`` or below it ("" holds everything)."""
    return module == "" or path == module or path.startswith(module + ".")


def is_node_unit(key: str) -> bool:
    return key.startswith(NODE_UNIT)


@dataclass
class Unit:
    """Layers moved together: by ``set_module_name(owner, ...)``, or (a node unit: ``nodes`` set,
    ``owner`` is ``@<layer>``) by ``set_node_name`` on each of ``nodes``."""

    owner: str
    layers: list[str] = field(default_factory=list)  # layer (node) names, graph order
    modules: set[str] = field(default_factory=set)  # module paths of the layers' nodes
    nodes: list[str] = field(default_factory=list)  # a node unit's compute nodes (empty: a module unit)
    ops: set[str] = field(default_factory=set)  # a node unit's short op names (to match vela rows)

    @property
    def module(self) -> str:
        """The module whose ``set_module_name`` reaches this unit's nodes (a node unit's: its owner's)."""
        return next(iter(self.modules)) if self.nodes else self.owner


def movable_units(layers: Sequence[Layer]) -> list[Unit]:
    """The units of ``layers`` (module units, and node units for the own-forward layers of an owner
    with units nested inside it), in graph order of their first layer."""
    units: dict[str, Unit] = {}
    for layer in layers:
        unit = units.setdefault(layer.owner, Unit(layer.owner))
        unit.layers.append(layer.name)
        unit.modules.update(layer.modules or [layer.module])
    merged = True
    while merged:  # a unit whose nodes sit inside a nested unit's module absorbs that unit
        merged = False
        for outer in list(units.values()):
            for inner in list(units.values()):
                if inner is outer or not _inside(inner.owner, outer.owner) or inner.owner == outer.owner:
                    continue
                if any(_inside(m, inner.owner) for m in outer.modules):
                    outer.layers += inner.layers
                    outer.modules |= inner.modules
                    del units[inner.owner]
                    merged = True
                    break
            if merged:
                break
    by_name = {layer.name: layer for layer in layers}
    owners = set(units)
    for unit in list(units.values()):  # split an owner's own forward into node units
        if not any(o != unit.owner and _inside(o, unit.owner) for o in owners):
            continue  # no unit nested inside: its forward is one piece (a conv module)
        own = [n for n in unit.layers if set(by_name[n].modules or [by_name[n].module]) == {unit.owner}]
        for name in own:
            layer = by_name[name]
            units[NODE_UNIT + name] = Unit(NODE_UNIT + name, [name], {unit.owner}, list(layer.nodes),
                                           {_op(o) for o in layer.ops})
        unit.layers = [n for n in unit.layers if n not in own]
        unit.modules = {m for n in unit.layers for m in (by_name[n].modules or [by_name[n].module])}
        if not unit.layers:
            del units[unit.owner]
    order = {layer.name: i for i, layer in enumerate(layers)}
    for unit in units.values():
        unit.layers.sort(key=order.__getitem__)
    return sorted(units.values(), key=lambda u: order[u.layers[0]])


def _op(name: str) -> str:
    """An op name as a vela row and a converted graph both say it (edge's ``view_copy`` is ``view``;
    ``bmm`` is what ``matmul`` becomes)."""
    name = name.removesuffix("_copy")
    return "matmul" if name in ("bmm", "mm") else name


def overrides_for(moved: Iterable[str], units: Sequence[Unit]) -> tuple[list[str], list[str]]:
    """(unit keys to set to a16w8, unit keys inside them to set back to int8) for the moved units:
    a module unit's key is its module path, a node unit's ``@<layer>`` (see ``nodes_of``)."""
    chosen = set(moved)
    modules = [u.owner for u in units if u.owner in chosen and not u.nodes]
    resets = [u.owner for u in units if u.owner not in chosen
              and any(_inside(u.module, m) and (u.nodes or u.owner != m) for m in modules)]
    return [u.owner for u in units if u.owner in chosen], resets


def nodes_of(key: str, units: Sequence[Unit]) -> list[str]:
    """A node unit's node names (``set_node_name``); [] for a module unit."""
    return next((u.nodes for u in units if u.owner == key), [])


def unit_cycles(units: Sequence[Unit], rows: Iterable[tuple]) -> tuple[dict[str, float], float]:
    """({unit key: cycles}, cycles of rows no unit holds) from per-layer ``(module path, cycles)`` or
    ``(module path, torch op, cycles)`` rows.

    A row goes to the node units of its module whose ops include the row's op (split evenly when
    several do: two matmuls of one forward share their rows), else to the units one of whose layers
    has a node in its module (split evenly when several do), else to the unit with the innermost
    owner above it (the root unit holds everything), else to no unit (no root unit: the model's own
    forward has no quantized layer)."""
    cycles = {u.owner: 0.0 for u in units}
    loose = 0.0
    for row in rows:
        module, op, value = (row[0], "", row[1]) if len(row) == 2 else row
        holders = [u for u in units if u.nodes and module in u.modules and _op(op) in u.ops]
        if not holders:
            holders = [u for u in units if module in u.modules]
        if not holders:
            above = [u for u in units if not u.nodes and _inside(module, u.owner)]
            deepest = max((len(u.owner) for u in above), default=-1)
            holders = [u for u in above if len(u.owner) == deepest]
        if not holders:
            above = [u for u in units if u.nodes and _inside(module, u.module)]  # the owner split up
            deepest = max((len(u.module) for u in above), default=-1)
            holders = [u for u in above if len(u.module) == deepest]
        if not holders:
            loose += value
        for u in holders:
            cycles[u.owner] += value / len(holders)
    return cycles, loose


def resolve_costs(units: Sequence[Unit], costs: Mapping[str, float] | None) -> dict[str, float]:
    """Each unit's cost (``costs[owner]``; 1 where missing or not positive)."""
    return {u.owner: max(float((costs or {}).get(u.owner, 1.0)), 1.0) for u in units}
