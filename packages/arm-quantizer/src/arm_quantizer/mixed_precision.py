"""Mixed precision driven by a target SQNR: move the fewest layers' activations from int8 to int16.

Start from the all-int8 model. For every quantized layer whose nodes sit in one module (what
``set_module_name`` can move), estimate the end-to-end SQNR gained by simulating its activation
quantizers at int16 over the same range (one float pass each, no re-calibration). Rank the layers
by gain per extra NPU cycle and take them in that order until the simulated SQNR meets the target;
then quantize for real (``set_module_name(module, a16w8)``) and, while the real SQNR still misses,
add the next ranked layer. Every step adds a layer, so the search ends after at most one pass over
the candidates; when even all of them miss, the result says so with the best SQNR reached.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from torch import fx

from .accuracy import float_output, output_sqnr, quantized_layers
from .config import QuantizationConfig, get_symmetric_a16w8_quantization_config

Quantize = Callable[[Mapping[str, QuantizationConfig]], fx.GraphModule]


@dataclass
class MixedPrecisionResult:
    """What the search chose and what it measured (SQNR in dB vs float, cycles as given)."""

    target_db: float
    met: bool
    moved: list[str]  # module names moved to a16w8, in the order chosen
    sqnr_before_db: float
    sqnr_after_db: float
    extra_cycles: float  # the summed estimate for the moved modules
    ranking: list[tuple[str, float, float]] = field(default_factory=list)  # module, gain dB, cost
    search_seconds: float = 0.0
    quantized: fx.GraphModule | None = None

    def config_python(self, quantizer_expr: str = "quantizer") -> str:
        """The quantizer configuration as Python a user can paste and keep."""
        lines = ["from arm_quantizer import get_symmetric_a16w8_quantization_config", ""]
        lines += [f"{quantizer_expr}.set_module_name({m!r}, get_symmetric_a16w8_quantization_config())"
                  for m in self.moved]
        return "\n".join(lines)

    def summary(self) -> str:
        verdict = "met" if self.met else f"NOT met (best reachable {self.sqnr_after_db:.2f} dB)"
        return (f"target {self.target_db:.2f} dB {verdict}: SQNR {self.sqnr_before_db:.2f} -> "
                f"{self.sqnr_after_db:.2f} dB, {len(self.moved)} module(s) to a16w8 "
                f"({', '.join(self.moved) or 'none'}), +{self.extra_cycles:.0f} estimated cycles, "
                f"search {self.search_seconds:.1f} s")


def search_mixed_precision(quantize: Quantize, samples: Sequence[tuple], target_db: float,
                           extra_cycles: Mapping[str, float] | None = None,
                           a16w8: QuantizationConfig | None = None) -> MixedPrecisionResult:
    """Choose the modules to move to a16w8 so the output SQNR vs float reaches ``target_db``.

    ``quantize(overrides)`` returns a ``convert_pt2e`` model quantized with the user's quantizer
    plus ``set_module_name(name, config)`` for each override (see ``quantize_with_overrides``).
    ``extra_cycles[module]``: the NPU cycles moving that module costs (vela's estimate); missing
    modules cost 1 (then the fewest layers win). ``samples`` are the evaluation inputs.
    """
    started = time.perf_counter()
    a16w8 = a16w8 or get_symmetric_a16w8_quantization_config()
    base = quantize({})
    refs = [float_output(base, s) for s in samples]  # the float pass, computed once
    before = output_sqnr(base, samples, reference=refs)
    result = MixedPrecisionResult(target_db, before >= target_db, [], before, before, 0.0, quantized=base)
    if result.met:
        result.search_seconds = time.perf_counter() - started
        return result
    owners: dict[str, list[str]] = {}
    for layer in quantized_layers(base):
        if layer.owner:
            owners.setdefault(layer.owner, []).append(layer.name)
    costs = {m: float((extra_cycles or {}).get(m, 1.0)) for m in owners}
    gains = {m: output_sqnr(base, samples, names, refs) - before for m, names in owners.items()}
    ranking = sorted(owners, key=lambda m: (-gains[m] / max(costs[m], 1.0), m))
    result.ranking = [(m, gains[m], costs[m]) for m in ranking]
    # simulated prefix that meets the target, then real checks from there on
    chosen: list[str] = []
    for m in ranking:
        chosen.append(m)
        if output_sqnr(base, samples, [n for c in chosen for n in owners[c]], refs) >= target_db:
            break
    k = len(chosen)
    best, best_model = before, base
    while True:
        moved = ranking[:k]
        model = quantize({m: a16w8 for m in moved})
        sqnr = output_sqnr(model, samples)
        if sqnr > best:
            best, best_model = sqnr, model
        if sqnr >= target_db or k >= len(ranking):
            break
        k += 1
    result.met = sqnr >= target_db
    result.moved = moved if result.met else ranking[:k]
    result.sqnr_after_db = sqnr if result.met else best
    result.quantized = model if result.met else best_model
    result.extra_cycles = sum(costs[m] for m in result.moved)
    result.search_seconds = time.perf_counter() - started
    return result


def quantize_with_overrides(model, example_inputs: tuple, samples: Sequence[tuple],
                            make_quantizer: Callable[[], object]) -> Quantize:
    """A ``quantize(overrides)`` for ``search_mixed_precision``: export, ``make_quantizer()`` plus
    ``set_module_name`` per override, prepare_pt2e, calibrate on ``samples``, convert_pt2e."""
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    exported = torch.export.export(model, example_inputs).module()

    def quantize(overrides: Mapping[str, QuantizationConfig]) -> fx.GraphModule:
        import copy

        quantizer = make_quantizer()
        for name, config in overrides.items():
            quantizer.set_module_name(name, config)
        prepared = prepare_pt2e(copy.deepcopy(exported), quantizer)
        with torch.no_grad():
            for sample in samples:
                prepared(*sample)
        return convert_pt2e(prepared)

    return quantize
