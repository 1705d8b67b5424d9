"""What mixed precision can move: non-overlapping units of layers, each moved by ``set_module_name``.

A layer's *owner* is the innermost module holding all its nodes. Owners nest (``features.1`` owns
a residual add, ``features.1.conv.0`` a conv inside it), and ``set_module_name("features.1", c)``
reaches every node under ``features.1``. So a *unit* is an owner with the layers it owns directly;
moving it sets its owner to a16w8 and sets each unit nested inside it that stays int8 back to the
user's int8 configuration (the innermost ``set_module_name`` wins), so units never overlap and each
layer's cost is counted once. Where a layer's own nodes sit inside a nested unit's module (resetting
that module would take them back), the two units are one.

``unit_cycles`` splits per-layer cycle counts (vela's rows, named by module path) over the units,
each row counted once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .accuracy import Layer


def _inside(path: str, module: str) -> bool:
    """Whether ``path`` is ``module`` or below it ("" holds everything)."""
    return module == "" or path == module or path.startswith(module + ".")


@dataclass
class Unit:
    """Layers moved together by one ``set_module_name(owner, ...)``."""

    owner: str
    layers: list[str] = field(default_factory=list)  # layer (node) names, graph order
    modules: set[str] = field(default_factory=set)  # module paths of the layers' nodes


def movable_units(layers: Sequence[Layer]) -> list[Unit]:
    """The units of ``layers`` (those with an owner module; the model's own forward has none), in
    graph order of their first layer."""
    units: dict[str, Unit] = {}
    for layer in layers:
        if layer.owner:
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
    order = {layer.name: i for i, layer in enumerate(layers)}
    for unit in units.values():
        unit.layers.sort(key=order.__getitem__)
    return sorted(units.values(), key=lambda u: order[u.layers[0]])


def overrides_for(moved: Iterable[str], units: Sequence[Unit]) -> tuple[list[str], list[str]]:
    """(modules to set to a16w8, modules inside them to set back to int8) for the moved owners."""
    chosen = set(moved)
    resets = [u.owner for u in units if u.owner not in chosen
              and any(_inside(u.owner, m) and u.owner != m for m in chosen)]
    return [u.owner for u in units if u.owner in chosen], resets


def unit_cycles(units: Sequence[Unit], rows: Iterable[tuple[str, float]]) -> tuple[dict[str, float], float]:
    """({owner: cycles}, cycles of rows no unit holds) from per-layer ``(module path, cycles)`` rows.

    A row goes to the units one of whose layers has a node in its module (split evenly when several
    do), else to the unit with the innermost owner above it, else to no unit (the model's own
    forward, or plumbing vela made up)."""
    cycles = {u.owner: 0.0 for u in units}
    loose = 0.0
    for module, value in rows:
        holders = [u for u in units if module in u.modules]
        if not holders:
            above = [u for u in units if u.owner and _inside(module, u.owner)]
            deepest = max((len(u.owner) for u in above), default=-1)
            holders = [u for u in above if len(u.owner) == deepest]
        if not holders:
            loose += value
        for u in holders:
            cycles[u.owner] += value / len(holders)
    return cycles, loose


def resolve_costs(units: Sequence[Unit], costs: Mapping[str, float] | None) -> dict[str, float]:
    """Each unit's cost (``costs[owner]``; 1 where missing or not positive)."""
    return {u.owner: max(float((costs or {}).get(u.owner, 1.0)), 1.0) for u in units}
