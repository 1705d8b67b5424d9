"""Mixed precision for a decoder exported as several methods that share its weights and KV cache
(``prefill`` and ``decode``): one precision per projection unit (every ``nn.Linear``: attention q/k/v/o,
MLP gate/up/down, the LM head), chosen among a8w4, a8w8 and a16w8 so the logits reach a target SQNR vs
float for the fewest weight bytes and int16 cycles. One choice holds for every method (the same
``set_module_name`` in each method's quantizer), as prefill and decode share the weights.

Everything that is not a projection (norms, attention math, embeddings, residual adds, the cache) is
the *rest*, quantized with one configuration: a8w8, or a16w8 when the target is out of reach with an
int8 rest (tried only then). A projection's int16 activations pay only where its neighbours are int16
too: its input comes from the rest (an int8 rest has rounded it to int8 already) and its output is read
by the rest (requantized to int8 at an int8 reader), except where it is the model's output (the LM
head's logits). So under an int8 rest a16w8 is offered only to the units whose output is the model's.

The search: each unit's own noise at each precision is simulated on the float model (that projection
alone with its weights and input/output activations fake-quantized over calibrated ranges; one eager
pass of the method sequence per unit and precision). The real noise of a choice is taken as the rest's
noise plus the units' (rounding noise from different places adds up roughly independently at the
output); the rest's noise is the real model's minus the units' simulated noise, from the last real
quantization. Starting from every unit at its cheapest precision (measured for real), upgrades are
taken greedily by noise removed per cost until the predicted noise meets the target, then the choice
is quantized for real; a miss updates the rest's noise and the greedy goes on from there. At most
``MAX_REAL`` real quantizations per rest; the search then reports the best it reached.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

from .accuracy import sqnr_db
from .config import (
    QuantizationConfig,
    get_symmetric_a8w4_quantization_config,
    get_symmetric_a16w8_quantization_config,
    get_symmetric_quantization_config,
)

PRECISIONS = ("a8w4", "a8w8", "a16w8")
"""Cheapest first."""

WEIGHT_BITS = {"a8w4": 4, "a8w8": 8, "a16w8": 8}
ACT_BITS = {"a8w4": 8, "a8w8": 8, "a16w8": 16}

MAX_REAL = 6
"""Real quantizations per rest configuration before the search reports the best it reached."""

INT16_COST_PER_PARAM = 1.0
"""What an int16 projection costs more than its int8 form, in weight-byte equivalents per parameter:
its activations move twice the bytes, and on ethos-u85-256 the a16w8 decoder took 1.41x the a8w8
cycles per token (bench/results/decoder); priced so a16w8 is taken only where a8w8 cannot meet."""

Drive = Callable[[Callable[[str, tuple], torch.Tensor]], object]
"""``drive(run)``: run the method sequence (``run(method, inputs)``) and return the logits to compare
(a tensor, or a sequence of tensors); the same sequence calibrates. Make it deterministic (feed the
float model's tokens, not each model's own argmax), so every model is compared on the same inputs."""


def precision_config(name: str) -> QuantizationConfig:
    if name not in PRECISIONS:
        raise ValueError(f"unknown precision {name!r}; valid: {PRECISIONS}")
    return {"a8w4": lambda: get_symmetric_a8w4_quantization_config(is_per_channel=True),
            "a8w8": get_symmetric_quantization_config,
            "a16w8": get_symmetric_a16w8_quantization_config}[name]()


def projection_units(model: nn.Module) -> list[str]:
    """The module paths of every ``nn.Linear`` of ``model`` (the module that is exported), in order."""
    return [name for name, m in model.named_modules() if isinstance(m, nn.Linear)]


@dataclass
class UnitRow:
    """One projection: its size, what the search chose and its simulated cost at each precision."""

    name: str
    params: int
    chosen: str
    offered: tuple[str, ...]
    sqnr_db: dict[str, float]  # output SQNR with only this unit quantized at each precision (simulated)


@dataclass
class DecoderPrecisionResult:
    """What the search chose and measured (SQNR of the driven logits vs float, in dB)."""

    target_db: float
    met: bool
    rest: str  # the precision of everything that is not a projection
    choice: dict[str, str]  # unit -> precision
    sqnr_db: float  # real (fake-quant modules), of the choice
    weight_bytes: int  # of the projections at their chosen widths plus the rest's weights at 8 bits
    all_a16w8_bytes: int
    units: list[UnitRow] = field(default_factory=list)
    tried: list[tuple[str, dict[str, str], float]] = field(default_factory=list)  # (rest, choice, real dB)
    search_seconds: float = 0.0
    converted: dict[str, torch.fx.GraphModule] | None = None  # the methods quantized with the choice

    def summary(self) -> str:
        counts = {p: sum(c == p for c in self.choice.values()) for p in PRECISIONS}
        verdict = "met" if self.met else "NOT met (best reached)"
        mix = ", ".join(f"{n} {p}" for p, n in counts.items() if n)
        return (f"target {self.target_db:.2f} dB {verdict}: {self.sqnr_db:.2f} dB with rest {self.rest}, "
                f"projections {mix}; weights {self.weight_bytes} B ({self.weight_bytes / self.all_a16w8_bytes:.3f}"
                f" of all-a16w8), {len(self.tried)} real quantization(s), search {self.search_seconds:.1f} s")

    def report(self) -> str:
        """The per-unit accuracy report: each projection's size, its choice, and the logits' SQNR with
        only that projection quantized at each precision (the lower, the more it costs)."""
        head = ["unit", "params", "chosen", *(f"{p} alone dB" for p in PRECISIONS)]
        lines = [" | ".join(head), " | ".join("---" for _ in head)]
        for row in self.units:
            cells = [f"{row.sqnr_db[p]:.1f}" if p in row.sqnr_db else "-" for p in PRECISIONS]
            lines.append(" | ".join([row.name, str(row.params), row.chosen, *cells]))
        return "\n".join([self.summary(), "", *lines])

    def config_python(self, quantizer_expr: str = "quantizer") -> str:
        """The choice as quantizer calls a user can paste (the same for every method)."""
        make = {"a8w4": "get_symmetric_a8w4_quantization_config(is_per_channel=True)",
                "a8w8": "get_symmetric_quantization_config()", "a16w8": "get_symmetric_a16w8_quantization_config()"}
        used = sorted({self.rest, *self.choice.values()})
        lines = [f"from arm_quantizer import {', '.join(make[p].split('(')[0] for p in used)}", "",
                 f"{quantizer_expr}.set_global({make[self.rest]})"]
        lines += [f"{quantizer_expr}.set_module_name({u!r}, {make[p]})" for u, p in self.choice.items() if p != self.rest]
        return "\n".join(lines)


def _flat(out) -> torch.Tensor:
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], list):  # greedy_decode's (tokens, logits)
        out = out[1]
    if isinstance(out, torch.Tensor):
        return out.detach().double().flatten()
    return torch.cat([_flat(o) for o in out])


def _noise(ref: torch.Tensor, out) -> float:
    got = _flat(out)
    if not torch.isfinite(got).all():
        return math.inf
    return float(((got - ref) ** 2).sum())


class _FakeQuantLinear:
    """Replaces one ``nn.Linear``'s forward: input, weight (per output channel, symmetric) and output
    fake-quantized. Activation ranges come from a calibration pass (``observe``)."""

    def __init__(self, module: nn.Linear) -> None:
        self.module, self.lo, self.hi = module, {}, {}

    def observe(self, x: torch.Tensor, y: torch.Tensor) -> None:
        for key, t in (("in", x), ("out", y)):
            self.lo[key] = min(self.lo.get(key, 0.0), float(t.min()))
            self.hi[key] = max(self.hi.get(key, 0.0), float(t.max()))

    def act(self, key: str, t: torch.Tensor, bits: int) -> torch.Tensor:
        lo, hi = self.lo[key], self.hi[key]
        if bits == 16:  # symmetric, as the a16w8 config
            scale = max(abs(lo), abs(hi), 1e-12) / 32767
            return torch.clamp(torch.round(t / scale), -32768, 32767) * scale
        scale = max(hi - lo, 1e-12) / 255
        zp = round(-128 - lo / scale)
        return (torch.clamp(torch.round(t / scale) + zp, -128, 127) - zp) * scale

    def weight(self, bits: int) -> torch.Tensor:
        w = self.module.weight.detach()
        qmax = 2 ** (bits - 1) - 1
        scale = w.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / qmax
        return torch.clamp(torch.round(w / scale), -qmax, qmax) * scale


def _simulate(model: nn.Module, units: Sequence[str], drive: Drive, runner: Callable[[nn.Module], Callable],
              offered: Mapping[str, tuple[str, ...]], int16_reads: Callable[[str], tuple[bool, bool]],
              ref: torch.Tensor) -> dict[str, dict[str, float]]:
    """{unit: {precision: output noise with only that unit quantized so}} on the float ``model``."""
    fakes = {u: _FakeQuantLinear(model.get_submodule(u)) for u in units}
    originals = {u: model.get_submodule(u).forward for u in units}
    mode: dict[str, object] = {"unit": None, "precision": None}

    def make_forward(unit: str, fake: _FakeQuantLinear, original):
        def forward(x: torch.Tensor) -> torch.Tensor:
            if mode["unit"] is None:  # calibration
                y = original(x)
                fake.observe(x, y)
                return y
            if mode["unit"] != unit:
                return original(x)
            p = mode["precision"]
            wide_in, wide_out = int16_reads(unit) if ACT_BITS[p] == 16 else (False, False)
            y = F.linear(fake.act("in", x, 16 if wide_in else 8), fake.weight(WEIGHT_BITS[p]), fake.module.bias)
            return fake.act("out", y, 16 if wide_out else 8)
        return forward

    for u in units:
        fakes[u].module.forward = make_forward(u, fakes[u], originals[u])
    try:
        with torch.no_grad():
            drive(runner(model))
            noise = {}
            for u in units:
                noise[u] = {}
                for p in offered[u]:
                    mode.update(unit=u, precision=p)
                    noise[u][p] = _noise(ref, drive(runner(model)))
    finally:
        for u in units:
            del fakes[u].module.forward  # the instance attribute; the class's forward again
        if hasattr(model, "reset_cache"):
            model.reset_cache()
    return noise


def search_decoder_precision(model: nn.Module, programs: Mapping[str, torch.export.ExportedProgram],
                             make_quantizer: Callable[[], object], drive: Drive, target_db: float,
                             runner: Callable[[nn.Module], Callable] | None = None,
                             units: Sequence[str] | None = None, partitioner=None,
                             cache_qparams: Callable[[str], dict | None] | None = None,
                             int16_cost_per_param: float = INT16_COST_PER_PARAM,
                             log: Callable[[str], None] | None = None) -> DecoderPrecisionResult:
    """Choose a8w4 / a8w8 / a16w8 per projection of a multi-method decoder so ``drive``'s logits reach
    ``target_db`` dB SQNR vs the float ``model`` for the fewest weight bytes (see the module doc).

    ``model``: the float module every method of ``programs`` was exported from (its ``nn.Linear`` paths
    are the units unless ``units`` is given). ``make_quantizer()``: a fresh quantizer for the target
    (``TOSAQuantizer`` or ``EthosUQuantizer``); the search sets its global and module configs.
    ``drive(run)``: the method sequence, for calibration and evaluation (``Drive``). ``runner(model)``:
    ``run(method, inputs)`` on the eager model (default: ``model(*inputs)`` under no_grad, cache reset
    first where ``model.reset_cache`` exists). ``partitioner``: the target's, so int16 goes only where
    it lowers (``quantize_methods``). ``cache_qparams(rest)``: the KV cache's fixed qparams for a rest
    precision (None: a float cache at the program boundary)."""
    from .kv_cache import module_runner, quantize_methods, reset_buffers

    started = time.perf_counter()
    log = log or (lambda _: None)
    runner = runner or _eager_runner
    units = list(units if units is not None else projection_units(model))
    if not units:
        raise ValueError("search_decoder_precision: the model has no nn.Linear to choose a precision for; "
                         "pass units= (module paths of its projections)")
    params = {u: model.get_submodule(u).weight.numel() for u in units}
    rest_params = sum(p.numel() for p in model.parameters()) - sum(params.values())
    with torch.no_grad():
        ref = _flat(drive(runner(model)))
    signal = float((ref ** 2).sum())
    outputs = _output_units(model, units, drive, runner)

    def cost(u: str, p: str) -> float:
        return params[u] * (WEIGHT_BITS[p] / 8 + (int16_cost_per_param if ACT_BITS[p] == 16 else 0.0))

    def weight_bytes(choice: Mapping[str, str]) -> int:
        return rest_params + sum(params[u] * WEIGHT_BITS[p] // 8 for u, p in choice.items())

    def quantize(rest: str, choice: Mapping[str, str]) -> tuple[float, dict]:
        def make():
            quantizer = make_quantizer().set_global(precision_config(rest))
            for u, p in choice.items():
                quantizer.set_module_name(u, precision_config(p))
            return quantizer
        converted = quantize_methods(dict(programs), make, drive, cache_qparams(rest) if cache_qparams else None,
                                     partitioner)
        out = drive(module_runner(converted))
        reset_buffers(converted)
        real = sqnr_db(signal, _noise(ref, out))
        result.tried.append((rest, dict(choice), real))
        log(f"rest {rest}, {_mix(choice)}: real {real:.2f} dB ({time.perf_counter() - started:.1f} s)")
        return real, converted

    all16 = {u: "a16w8" for u in units}
    result = DecoderPrecisionResult(target_db, False, "a8w8", {}, -math.inf, 0, weight_bytes(all16))
    best: tuple[float, str, dict, dict] | None = None
    noises: dict[str, dict[str, dict[str, float]]] = {}
    wanted = signal / 10 ** (target_db / 10)
    rests = ["a8w8", "a16w8"] if _takes_int16(make_quantizer) else ["a8w8"]
    for rest in rests:
        def int16_reads(u: str, _rest=rest) -> tuple[bool, bool]:
            return _rest == "a16w8", _rest == "a16w8" or u in outputs
        offered = {u: tuple(p for p in PRECISIONS if ACT_BITS[p] == 8 or any(int16_reads(u))) for u in units}
        noise = noises[rest] = _simulate(model, units, drive, runner, offered, int16_reads, ref)
        choice = {u: offered[u][0] for u in units}
        for _ in range(MAX_REAL):
            real, converted = quantize(rest, choice)
            if best is None or real > best[0] or (real >= target_db and weight_bytes(choice) < weight_bytes(best[2])):
                best = (real, rest, dict(choice), converted)
            if real >= target_db:
                break
            rest_noise = max(signal / 10 ** (real / 10) - sum(noise[u][choice[u]] for u in units), 0.0)
            if not _upgrade(choice, offered, noise, cost, wanted - rest_noise):
                break  # every unit at its best precision under this rest
        if best[0] >= target_db:
            break
    real, rest, choice, converted = best
    result.met, result.rest, result.choice, result.sqnr_db = real >= target_db, rest, choice, real
    result.weight_bytes, result.converted = weight_bytes(choice), converted
    result.units = [UnitRow(u, params[u], choice[u], tuple(noises[rest][u]),
                            {p: sqnr_db(signal, n) for p, n in noises[rest][u].items()}) for u in units]
    result.search_seconds = time.perf_counter() - started
    return result


def _upgrade(choice: dict[str, str], offered: Mapping[str, tuple[str, ...]], noise: Mapping[str, Mapping[str, float]],
             cost: Callable[[str, str], float], budget: float) -> bool:
    """Raise units' precisions in place, the most noise removed per cost first, until the units'
    simulated noise is within ``budget`` (or nothing is left to raise; then at least one step is
    taken if any exists). Returns whether anything changed."""
    changed = False
    while sum(noise[u][p] for u, p in choice.items()) > budget or not changed:
        steps = [((noise[u][choice[u]] - noise[u][p]) / max(cost(u, p) - cost(u, choice[u]), 1e-9), u, p)
                 for u in choice for p in offered[u][offered[u].index(choice[u]) + 1:]]
        steps = [s for s in steps if s[0] > 0] or [(0.0, u, p) for _, u, p in steps]
        if not steps:
            return changed
        _, u, p = max(steps)
        choice[u], changed = p, True
    return changed


def _output_units(model: nn.Module, units: Sequence[str], drive: Drive, runner) -> set[str]:
    """The units whose result is (part of) the model's output (the LM head): their int16 output is
    read by no int8 op."""
    results: dict[str, list[torch.Tensor]] = {u: [] for u in units}
    hooks = [model.get_submodule(u).register_forward_hook(lambda _m, _i, y, u=u: results[u].append(y))
             for u in units]
    outs: list[torch.Tensor] = []
    try:
        with torch.no_grad():
            inner = runner(model)
            drive(lambda method, inputs: outs.append(inner(method, inputs)) or outs[-1])
    finally:
        for h in hooks:
            h.remove()
        if hasattr(model, "reset_cache"):
            model.reset_cache()
    ids = {id(o) for o in outs}
    return {u for u, ys in results.items() if any(id(y) in ids for y in ys)}


def _takes_int16(make_quantizer: Callable[[], object]) -> bool:
    try:
        make_quantizer().set_global(get_symmetric_a16w8_quantization_config())
    except ValueError:
        return False
    return True


def _eager_runner(model: nn.Module) -> Callable[[str, tuple], torch.Tensor]:
    if hasattr(model, "reset_cache"):
        model.reset_cache()

    def run(method: str, inputs: tuple) -> torch.Tensor:
        with torch.no_grad():
            return model(*inputs)

    return run


def _mix(choice: Mapping[str, str]) -> str:
    counts = {p: sum(c == p for c in choice.values()) for p in PRECISIONS}
    return ", ".join(f"{n} {p}" for p, n in counts.items() if n)
