"""What moving units to a16w8 does to the output, simulated on the all-int8 model (one float pass,
no re-calibration), and which int8 <-> int16 boundaries it makes.

An activation reaches a reader at int16 only when the layer producing it *and* that reader are
moved: where an int16 layer feeds an int8 one, the real model requantizes to int8 at the reader's
input (``convert_pt2e`` gives each reader its own dequantize node, and a reader whose input
quantization differs from its producer's output gets a quantize/dequantize pair of its own), and an
int8 value read by an int16 layer keeps its int8 rounding. So the simulation decides per read: a
dequantize node reads its quantize node's input at int16 over the int8 range when its producer and
all the layers reading it are moved, else at int8. A producer's readers that stay int8 do not stop
its moved readers from gaining: moving a residual add and the next add, not the LayerNorm between,
keeps the residual path at int16.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from torch import fx

from .accuracy import (
    _is_activation,
    float_output,
    is_dequantize,
    power_with_int16,
    quantized_layers,
    sqnr_db,
)
from .precision_units import Unit


@dataclass(frozen=True)
class Read:
    """One dequantize node of an activation quantizer: who produced the value and who reads it."""

    quantizer: str
    dequantize: str
    producer: str | None  # the layer whose output it is; None for the model's input (the CPU quantizes it)
    readers: frozenset[str]  # layers whose compute nodes read it (none: a model output, an unquantized op)
    elements: int  # of the activation; 0 for the model's input


class Simulator:
    """Output (signal, noise) of the int8 model with chosen units' layers moved to a16w8.

    A layer holding one of ``int8_ops`` (ops whose int16 form the target does not lower:
    ``int16_fallback``) never moves: its output and the activations it reads stay int8 whichever
    unit holds it."""

    def __init__(self, base: fx.GraphModule, samples: Sequence[tuple], units: Sequence[Unit],
                 int8_ops: Iterable[str] = ()) -> None:
        self.base, self.samples = base, samples
        layers = quantized_layers(base)
        int8_ops = set(int8_ops)
        self.never = {layer.name for layer in layers if int8_ops & set(layer.nodes)}
        nodes = {n.name: n for n in base.graph.nodes}
        owning: dict[str, set[str]] = {}  # compute node -> the layers holding it
        for layer in layers:
            for name in layer.nodes:
                owning.setdefault(name, set()).add(layer.name)
        reads: dict[str, Read] = {}
        for layer in layers:
            for q in (nodes[name] for name in layer.quantizers):
                if not _is_activation(q):
                    continue
                from_input = q.args[0].op != "call_function"
                for dq in (u for u in q.users if is_dequantize(u)):
                    readers = frozenset(r for user in dq.users for r in owning.get(user.name, ()))
                    reads[dq.name] = Read(q.name, dq.name, None if from_input else layer.name, readers,
                                          0 if from_input else _elements(q))
        self.reads = list(reads.values())
        self.refs = [float_output(base, s) for s in samples]  # the float pass, computed once
        self.by_owner = {u.owner: u for u in units}
        self.unit_of = {name: u.owner for u in units for name in u.layers}
        self.signal, self.noise = power_with_int16(base, samples, (), self.refs)

    def moved_layers(self, owners: Iterable[str]) -> set[str]:
        return {n for o in owners for n in self.by_owner[o].layers} - self.never

    def int16_reads(self, owners: Iterable[str]) -> set[str]:
        """The dequantize nodes that read int16 when ``owners`` move."""
        moved = self.moved_layers(owners)
        return {r.dequantize for r in self.reads if r.readers <= moved
                and (r.producer in moved if r.producer is not None else bool(r.readers))}

    def readers_of(self, owner: str) -> list[str]:
        """The other units reading ``owner``'s layers' activations, in unit order."""
        layers = set(self.by_owner[owner].layers)
        units = {self.unit_of[n] for r in self.reads if r.producer in layers for n in r.readers}
        return [o for o in self.by_owner if o in units and o != owner]

    def closure(self, owner: str) -> list[str]:
        """``owner`` and every unit reading its layers' activations."""
        return [owner, *self.readers_of(owner)]

    def boundary_elements(self, owners: Iterable[str]) -> tuple[int, int]:
        """Elements of the activations where a moved layer meets one that stays int8, as
        (int8 -> int16, int16 -> int8): each such activation is a requantization of its own on the
        target (on Ethos-U, narrowing costs about twice widening)."""
        moved = self.moved_layers(owners)
        up: dict[str, int] = {}
        down: dict[str, int] = {}
        for r in self.reads:
            if r.producer is None:
                continue
            if r.producer in moved and r.readers - moved:
                down[r.quantizer] = r.elements
            elif r.producer not in moved and r.readers & moved:
                up[r.quantizer] = r.elements
        return sum(up.values()), sum(down.values())

    def noise_with(self, owners: Iterable[str]) -> float:
        return power_with_int16(self.base, self.samples, (), self.refs, self.int16_reads(owners))[1]

    def db(self, noise: float) -> float:
        return sqnr_db(self.signal, noise)


def candidate_sets(sim: Simulator, owners: Sequence[str]) -> dict[str, list[str]]:
    """What the search ranks: for each unit, itself (where that alone reads something at int16: a
    model output, the model input), itself with each unit reading its results (a pair gains that
    edge), and itself with all of them (its closure). Keyed ``a`` (closure), ``a > b`` (pair),
    ``a !`` (alone); sets with no int16 read, and repeats, are left out."""
    found: dict[frozenset[str], tuple[str, list[str]]] = {}
    for owner in owners:
        readers = sim.readers_of(owner)
        options = [(owner, [owner, *readers]), *((f"{owner} > {r}", [owner, r]) for r in readers),
                   (f"{owner} !", [owner])]
        for key, members in options:
            if frozenset(members) not in found and sim.int16_reads(members):
                found[frozenset(members)] = (key, members)
    return dict(found.values())


def _elements(q: fx.Node) -> int:
    val = q.args[0].meta.get("val")
    return int(val.numel()) if hasattr(val, "numel") else 0

