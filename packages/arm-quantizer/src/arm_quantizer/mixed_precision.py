"""Mixed precision driven by a target SQNR: move the fewest layers' activations from int8 to int16.

Start from the all-int8 model. Candidates are non-overlapping units of layers, each moved by one
``set_module_name`` or, for the functional ops of a module's own forward, by ``set_node_name`` on the
nodes of one layer (``precision_units.py``), costed once. The simulation (``precision_sim.py``) runs
the int8 model with chosen reads of activations at int16 over the same range (one float pass, no
re-calibration): a reader gains int16 precision only when it *and* the layer producing its input are
moved (the real model requantizes to int8 at an int8 reader's input, for that reader only). So a
unit alone mostly gains nothing: the search ranks *sets*, each unit with one unit reading its
results (a pair gains that read), with all of them (its closure), or alone where that reads
something at int16 (a model output), by the output noise power the set removes per extra NPU cycle
of the set. Quantization noise from different reads adds up roughly independently at the output,
so the cheapest collection that removes enough noise is close to the greedy one. Take the ranking's
shortest prefix whose union's simulation meets the target, drop the units the simulation shows it
can do without (those saving the most cycles per noise their removal adds first), add the units
whose move costs less than the int8 <-> int16 boundaries it removes (a set costs its units plus,
optionally, its boundaries: a requantization pass per boundary element), then quantize for real (``set_module_name(owner, a16w8)`` /
``set_node_name(node, a16w8)``). While the real SQNR misses, raise the simulated goal by the
shortfall and extend the prefix; once the prefix is the whole ranking, prune it again for the raised
goal (``FULL_RANKING_PRUNES`` times), then try every unit. When the real SQNR beats the target by a
margin, prune again for a goal lowered by it, halving the margin after a prune that misses for real
(``SLACK_PRUNES`` real tries, kept only while the target is still met). So the search ends after at
most one pass over the candidates plus those few rounds; when even all of them miss, the result
says so with the best SQNR reached.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from torch import fx

from .accuracy import output_power, quantized_layers
from .config import (
    QuantizationConfig,
    get_symmetric_a16w8_quantization_config,
    get_symmetric_quantization_config,
)
from .int16_fallback import KEPT_INT8_META, keep_int8_where_int16_stays_on_cpu, own_cpu_reasons
from .precision_sim import Simulator, candidate_sets
from .precision_units import (
    NODE_UNIT,
    Unit,
    is_node_unit,
    movable_units,
    nodes_of,
    overrides_for,
    resolve_costs,
)

KEEP_INT8 = "keep-int8"
"""An override value: set the module back to the int8 configuration the user's quantizer gives it."""

SLACK_PRUNES = 3
"""How often a met choice is pruned again when the real SQNR beats the target: for the real surplus
taken off the simulation's goal, halved after a prune that misses for real; a prune is kept only
if it still meets the target."""

MIN_SLACK_DB = 0.25
"""Real surplus (dB) too small to prune for."""

FULL_RANKING_PRUNES = 3
"""How often the whole ranking is pruned (each time for a goal raised by the last real shortfall)
before every unit is tried unpruned."""

Quantize = Callable[[Mapping[str, "QuantizationConfig | str"]], fx.GraphModule]
Costs = Mapping[str, float] | Callable[[list[Unit]], Mapping[str, float]]


@dataclass
class MixedPrecisionResult:
    """What the search chose and what it measured (SQNR in dB vs float, cycles as given)."""

    target_db: float
    met: bool
    moved: list[str]  # unit keys set to a16w8, in ranking order (module paths; ``@<layer>``: node units)
    sqnr_before_db: float
    sqnr_after_db: float
    extra_cycles: float  # summed cost of the moved units
    kept_int8: list[str] = field(default_factory=list)  # unit keys inside moved ones set back to int8
    unit_nodes: dict[str, list[str]] = field(default_factory=dict)  # node unit key -> its node names
    # single ops of moved modules kept int8 because their int16 form stays on the CPU: {node: reason}
    int8_nodes: dict[str, str] = field(default_factory=dict)
    # candidate set (``a``: a unit with the units reading its results, ``a > b``: a unit and one
    # reader, ``a !``: a unit alone), its simulated gain (dB) and its cost
    ranking: list[tuple[str, float, float]] = field(default_factory=list)
    unit_count: int = 0  # units the model has (what ``moved`` is a part of)
    search_seconds: float = 0.0
    real_quantizations: int = 0
    cycles_note: str = ""  # what the cycle numbers are ("est." for an estimate)
    quantized: fx.GraphModule | None = None

    def config_python(self, quantizer_expr: str = "quantizer") -> str:
        """The quantizer configuration as Python a user can paste and keep."""
        lines = ["from arm_quantizer import get_symmetric_a16w8_quantization_config", ""]
        if any(m in self.unit_nodes for m in [*self.moved, *self.kept_int8]):
            lines += ["# set_node_name lines: node names of this model's annotated graph (stable for one model"
                      " and toolkit version only)"]
        lines += self._set_lines(quantizer_expr, self.moved, "get_symmetric_a16w8_quantization_config()")
        if self.kept_int8:
            lines += ["# inside the above, these stay int8 (your int8 configuration):"]
            lines += self._set_lines(quantizer_expr, self.kept_int8, "get_symmetric_quantization_config()")
        if self.int8_nodes:
            lines += ["# ops whose int16 form the target leaves on the CPU stay int8 (node names of this model):"]
            lines += [f"{quantizer_expr}.set_node_name({n!r}, get_symmetric_quantization_config())"
                      for n in self.int8_nodes]
        if self.kept_int8 or self.int8_nodes:
            lines[0] += ", get_symmetric_quantization_config"
        return "\n".join(lines)

    def _set_lines(self, quantizer_expr: str, keys: Sequence[str], config: str) -> list[str]:
        return [line for m in keys for line in (
            [f"{quantizer_expr}.set_node_name({n!r}, {config})" for n in self.unit_nodes[m]] if m in self.unit_nodes
            else [f"{quantizer_expr}.set_global({config})" if m == "" else
                  f"{quantizer_expr}.set_module_name({m!r}, {config})"])]

    def summary(self) -> str:
        verdict = "met" if self.met else f"NOT met (best reachable {self.sqnr_after_db:.2f} dB)"
        return (f"target {self.target_db:.2f} dB {verdict}: SQNR {self.sqnr_before_db:.2f} -> "
                f"{self.sqnr_after_db:.2f} dB, {len(self.moved)} unit(s) to a16w8 "
                f"({', '.join(m or '(top level)' for m in self.moved) or 'none'}), +{self.extra_cycles:.0f} cycles"
                f"{f' ({self.cycles_note})' if self.cycles_note else ''}, "
                f"{f'{len(self.int8_nodes)} op(s) kept int8 (int16 form not lowered), ' if self.int8_nodes else ''}"
                f"{self.real_quantizations} real quantization(s), search {self.search_seconds:.1f} s")


def search_mixed_precision(quantize: Quantize, samples: Sequence[tuple], target_db: float,
                           extra_cycles: Costs | None = None,
                           a16w8: QuantizationConfig | None = None,
                           log: Callable[[str], None] | None = None,
                           boundary_cycles_per_element: float = 0.0,
                           int8_ops: Iterable[str] = ()) -> MixedPrecisionResult:
    """Choose the units to move to a16w8 so the output SQNR vs float reaches ``target_db``.

    ``quantize(overrides)`` returns a ``convert_pt2e`` model quantized with the user's quantizer
    plus ``set_module_name(name, config)`` for each override (``set_node_name(node, config)`` for a
    key ``@<node>``), ``KEEP_INT8`` meaning the int8 configuration the user's quantizer gives that
    module (see ``quantize_with_overrides``).
    ``extra_cycles``: ``{unit key: extra NPU cycles of moving the unit}`` or a function of the
    units giving it (vela's numbers); missing units cost 1 (then the fewest layers win).
    ``samples`` are the evaluation inputs; ``log`` receives a line per step (progress).
    ``boundary_cycles_per_element``: what an int8 <-> int16 requantization between a moved and an
    int8 layer costs per element (a pass of its own on Ethos-U), either way; a set's cost is its units' costs
    plus its boundaries', so pruning keeps a unit whose removal would cost more in boundaries, and
    a unit whose move removes more boundary cost than it adds is added.
    ``int8_ops``: compute nodes that stay int8 in any configuration (``quantize`` keeps them so:
    their int16 form does not lower, see ``int16_fallback``); the simulation keeps them int8 too.
    """
    started = time.perf_counter()
    log = log or (lambda _: None)
    a16w8 = a16w8 or get_symmetric_a16w8_quantization_config()
    base = quantize({})
    units = movable_units(quantized_layers(base))
    sim = Simulator(base, samples, units, int8_ops)
    unit_nodes = {u.owner: list(u.nodes) for u in units if u.nodes}
    before = sim.db(sim.noise)
    result = MixedPrecisionResult(target_db, before >= target_db, [], before, before, 0.0, quantized=base,
                                  real_quantizations=1, unit_nodes=unit_nodes, unit_count=len(units))
    if result.met or not units:
        result.search_seconds = time.perf_counter() - started
        return result
    given = extra_cycles(units) if callable(extra_cycles) else extra_cycles
    costs = resolve_costs(units, given)
    everything = [u.owner for u in units]
    if sim.db(sim.noise_with(everything)) < target_db:  # unreachable in simulation: check it for real
        model = quantize(overrides_for_all(everything, units, a16w8))
        real = sim.db(output_power(model, samples, (), sim.refs)[1])
        log(f"every unit at int16: simulated below target, real {real:.2f} dB")
        if real < target_db:
            result.ranking = [(o, math.nan, costs[o]) for o in everything]
            result.moved, result.extra_cycles = everything, sum(costs.values())
            result.sqnr_after_db, result.real_quantizations = max(real, before), 2
            result.quantized = model if real > before else base
            result.int8_nodes = dict(result.quantized.meta.get(KEPT_INT8_META, {}))
            result.search_seconds = time.perf_counter() - started
            return result
    def set_cost(owners: Sequence[str]) -> float:
        return sum(costs[o] for o in set(owners)) + boundary_cycles_per_element * sum(sim.boundary_elements(owners))

    sets = candidate_sets(sim, everything)
    removed = {k: sim.noise - sim.noise_with(c) for k, c in sets.items()}
    sets_cost = {k: set_cost(c) for k, c in sets.items()}
    ranking = sorted(sets, key=lambda k: (-removed[k] / sets_cost[k], k))
    log(f"int8 {before:.2f} dB; {len(sets)} sets of {len(units)} units simulated at int16 "
        f"({time.perf_counter() - started:.1f} s)")
    result.ranking = [(k, sim.db(sim.noise - removed[k]) - before if sim.noise > removed[k] else math.inf,
                       sets_cost[k]) for k in ranking]

    def overrides(owners: Sequence[str]) -> dict:
        return overrides_for_all(owners, units, a16w8)

    goal, k, full_prunes = target_db, 0, 0
    best = (before, [], base)
    while True:
        k = _prefix_meeting(sim, ranking, removed, sets, k, goal)
        chosen = _union(ranking[:k], sets)
        if full_prunes < FULL_RANKING_PRUNES:
            chosen = _fill(_prune(sim, chosen, set_cost, goal), everything, set_cost)
        else:  # the whole ranking, pruned, missed for real each time: every unit (the sets may not hold all)
            chosen = list(everything)
        model = quantize(overrides(chosen))
        result.real_quantizations += 1
        real = sim.db(output_power(model, samples, (), sim.refs)[1])
        log(f"{len(chosen)} units to a16w8 (prefix {k}): real {real:.2f} dB, goal {goal:.2f} dB "
            f"({time.perf_counter() - started:.1f} s)")
        if real > best[0]:
            best = (real, chosen, model)
        if real >= target_db or len(chosen) == len(units):
            break
        full_prunes += k >= len(ranking)  # the whole ranking, pruned, missed for real
        goal += target_db - real  # the simulation was optimistic by this much: ask it for more
        k += 1
    met = real >= target_db
    ask = real - target_db  # the simulation was pessimistic by up to this much: ask it for less
    tried, prunes = {frozenset(chosen)}, 0
    while met and prunes < SLACK_PRUNES and ask >= MIN_SLACK_DB:
        trial = _fill(_prune(sim, chosen, set_cost, sim.db(sim.noise_with(chosen)) - ask), everything, set_cost)
        if set_cost(trial) >= set_cost(chosen):
            break
        if frozenset(trial) in tried:  # missed for real before: ask for less
            ask /= 2
            continue
        tried.add(frozenset(trial))
        prunes += 1
        trial_model = quantize(overrides(trial))
        result.real_quantizations += 1
        trial_real = sim.db(output_power(trial_model, samples, (), sim.refs)[1])
        log(f"{len(trial)} units to a16w8 (pruned for {ask:.2f} dB of slack): real {trial_real:.2f} dB "
            f"({time.perf_counter() - started:.1f} s)")
        if trial_real < target_db:
            ask /= 2  # too much: try half of it
            continue
        chosen, model, real = trial, trial_model, trial_real
        ask = real - target_db
    sqnr, chosen, model = (real, chosen, model) if met else best
    moved, resets = overrides_for(chosen, units)
    result.met, result.sqnr_after_db, result.quantized = met, sqnr, model
    result.int8_nodes = dict(model.meta.get(KEPT_INT8_META, {}))
    order = _union(ranking, sets)
    result.moved = [o for o in order if o in set(moved)] + [o for o in moved if o not in order]
    result.kept_int8 = resets
    result.extra_cycles = set_cost(moved)
    result.search_seconds = time.perf_counter() - started
    return result


def overrides_for_all(owners: Sequence[str], units: Sequence[Unit], a16w8: QuantizationConfig) -> dict:
    """The ``quantize`` overrides moving ``owners``' units to a16w8 (nested units kept int8): a
    module unit by its path, a node unit by ``@<node>`` for each of its nodes."""
    moved, resets = overrides_for(owners, units)

    def keys(key: str) -> list[str]:
        return [NODE_UNIT + n for n in nodes_of(key, units)] if is_node_unit(key) else [key]

    return {**{k: a16w8 for m in moved for k in keys(m)}, **{k: KEEP_INT8 for m in resets for k in keys(m)}}


def _union(keys: Sequence[str], sets: Mapping[str, list[str]]) -> list[str]:
    """The units of the candidate sets named ``keys``, each once, in order."""
    return list(dict.fromkeys(m for k in keys for m in sets[k]))


def _prefix_meeting(sim: Simulator, ranking: list[str], removed: Mapping[str, float],
                    sets: Mapping[str, list[str]], start: int, goal: float) -> int:
    """The shortest prefix length >= ``start`` (at least 1) whose sets' union's simulation meets
    ``goal`` dB, or the whole ranking. Lengths come from the single-set noise reductions (to
    first order they add up); each guess is then simulated, and a miss continues from the measured
    noise."""
    wanted = sim.signal / 10 ** (goal / 10)
    k = min(max(start, 1), len(ranking))
    noise = sim.noise - sum(removed[o] for o in ranking[:k])
    while True:
        while k < len(ranking) and noise > wanted:
            noise -= removed[ranking[k]]
            k += 1
        measured = sim.noise_with(_union(ranking[:k], sets))
        if measured <= wanted or k >= len(ranking):
            return k
        noise = measured - removed[ranking[k]]
        k += 1


def _prune(sim: Simulator, chosen: list[str], set_cost: Callable[[Sequence[str]], float],
           goal: float) -> list[str]:
    """``chosen`` without the units the simulation shows it meets ``goal`` dB without and whose
    removal lowers the set's cost, trying first those that save the most cycles per unit of noise
    their removal adds to ``chosen`` (removals that add none first)."""
    wanted = sim.signal / 10 ** (goal / 10)
    keep = list(chosen)
    noise = sim.noise_with(keep)
    if noise > wanted:
        return keep
    cost = set_cost(keep)

    def order(owner: str) -> tuple[bool, float]:
        rest = [o for o in keep if o != owner]
        saved, added = cost - set_cost(rest), sim.noise_with(rest) - noise
        return (added > 0, -saved / added if added > 0 else -saved)

    for owner in sorted(chosen, key=order):
        trial = [o for o in keep if o != owner]
        if trial and set_cost(trial) < set_cost(keep) and sim.noise_with(trial) <= wanted:
            keep = trial
    return keep


def _fill(chosen: list[str], candidates: Sequence[str], set_cost: Callable[[Sequence[str]], float]) -> list[str]:
    """``chosen`` plus each candidate whose move costs less than the boundaries it removes (a hole
    between moved units); more int16 only removes rounding, so the target stays met."""
    keep = list(chosen)
    added = True
    while added:
        added = False
        for owner in candidates:
            if owner not in keep and set_cost([*keep, owner]) < set_cost(keep):
                keep.append(owner)
                added = True
    return keep


def quantize_with_overrides(model, example_inputs: tuple, samples: Sequence[tuple],
                            make_quantizer: Callable[[], object], partitioner=None) -> Quantize:
    """A ``quantize(overrides)`` for ``search_mixed_precision``: export, ``make_quantizer()`` plus
    ``set_module_name`` per override (``KEEP_INT8``: the config the user's quantizer gives that
    module; name ``""``: ``set_global``; ``@<node>``: ``set_node_name``, ``KEEP_INT8`` there the
    user's config for that node name, else the user's global one), prepare_pt2e, calibrate on
    ``samples``, convert_pt2e.

    With the target's ``partitioner`` (a ``TOSAPartitioner``), int16 goes only where it lowers: the
    single ops whose int16 form it leaves on the CPU, and the user's int8 model does not, are set
    back to int8 (``int16_fallback``; the model's ``meta[KEPT_INT8_META]`` lists them, with the
    partitioner's reasons)."""
    import copy

    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    exported = torch.export.export(model, example_inputs).module()

    def once(overrides: Mapping[str, QuantizationConfig | str], kept: Mapping[str, str]) -> fx.GraphModule:
        quantizer = make_quantizer()
        user = dict(getattr(quantizer, "module_name_config", {}))
        user_nodes = dict(getattr(quantizer, "node_name_config", {}))
        user_global = getattr(quantizer, "global_config", None)
        for name, config in overrides.items():
            if name.startswith(NODE_UNIT):
                node = name[len(NODE_UNIT):]
                quantizer.set_node_name(node, user_nodes.get(node, user_global) if config == KEEP_INT8 else config)
                continue
            if config == KEEP_INT8:
                parts = name.split(".")
                above = [".".join(parts[:i]) for i in range(len(parts), 0, -1)]
                config = next((user[a] for a in above if a in user), user_global)
            if name == "":
                quantizer.set_global(config)
            else:
                quantizer.set_module_name(name, config)
        for name in kept:  # after the overrides: a node whose int16 form stays on the CPU stays int8
            quantizer.set_node_name(name, get_symmetric_quantization_config())
        prepared = prepare_pt2e(copy.deepcopy(exported), quantizer)
        with torch.no_grad():
            for sample in samples:
                prepared(*sample)
        return convert_pt2e(prepared)

    if partitioner is None:
        return lambda overrides: once(overrides, {})
    cpu_reasons = own_cpu_reasons(partitioner, example_inputs)

    @functools.cache
    def int8_reasons() -> Mapping[str, str]:  # the user's (all-int8) model's, asked for once
        return cpu_reasons(once({}, {}))

    def quantize(overrides: Mapping[str, QuantizationConfig | str]) -> fx.GraphModule:
        return keep_int8_where_int16_stays_on_cpu(lambda kept: once(overrides, kept), cpu_reasons, int8_reasons)

    return quantize
