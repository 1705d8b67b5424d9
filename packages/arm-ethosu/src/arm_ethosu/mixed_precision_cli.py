"""`arm-compile --target-sqnr DB`: choose the modules to move to a16w8 with vela's cycle numbers.

The search is `arm_quantizer.search_mixed_precision`. Costs: vela's per-layer cycles of the
all-int8 compile, split over the search's non-overlapping units (`precision_units.unit_cycles`,
each vela row counted once). The extra cycles of moving a unit to int16 are estimated as its int8
cycles (int16 activations move twice the bytes through the NPU; marked "est." wherever shown)
until the int16 Ethos-U compile gives vela's own int16 numbers. SQNR is measured on the fake-quant
model, quantized with the TOSA-1.0+INT+int16 rules plus ``set_module_name`` per moved module.
"""

from __future__ import annotations

from collections.abc import Sequence

from arm_quantizer import TOSAQuantizer, get_symmetric_quantization_config
from arm_quantizer.mixed_precision import (
    MixedPrecisionResult,
    quantize_with_overrides,
    search_mixed_precision,
)
from arm_quantizer.precision_units import Unit, unit_cycles
from arm_tosa_core import TosaCompileSpec

from .report import EthosUReport

CYCLES_LABEL = "est."  # what the extra cycles are: an estimate until int16 compiles for Ethos-U


def layer_rows(report: EthosUReport) -> list[tuple[str, float]]:
    """(module path, vela Op Cycles) of every NPU layer in the report."""
    return [(str(r.get("Module") or ""), float(r.get("Op Cycles", 0) or 0))
            for p in report.partitions for r in p.layers]


def estimated_extra_cycles(report: EthosUReport, units: Sequence[Unit]) -> dict[str, float]:
    """Extra cycles of moving each unit to int16, estimated as its int8 cycles (see module doc)."""
    return unit_cycles(units, layer_rows(report))[0]


def run_target_sqnr(model, example_inputs: tuple, samples: Sequence[tuple], report: EthosUReport,
                    target_db: float, eval_samples: Sequence[tuple] | None = None) -> MixedPrecisionResult:
    """The search for the CLI; ``report`` is vela's report of the all-int8 compile. ``samples``
    calibrate; ``eval_samples`` (default: the same) measure SQNR."""
    def make_quantizer() -> TOSAQuantizer:
        return TOSAQuantizer(TosaCompileSpec("TOSA-1.0+INT+int16")).set_global(
            get_symmetric_quantization_config())

    quantize = quantize_with_overrides(model, example_inputs, samples, make_quantizer)
    result = search_mixed_precision(quantize, eval_samples or samples, target_db,
                                    lambda units: estimated_extra_cycles(report, units))
    result.cycles_note = CYCLES_LABEL
    return result
