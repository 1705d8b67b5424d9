"""`arm-compile --target-sqnr DB`: choose the modules to move to a16w8 with vela's cycle numbers.

The search is `arm_quantizer.search_mixed_precision`. Costs: a module's extra NPU cycles are
estimated as its layers' int8 cycles in vela's report of the all-int8 compile (int16 activations
move twice the bytes through the NPU's int8 datapath; the core has no int16 Ethos-U lowering yet,
so vela cannot be asked for the int16 numbers themselves). SQNR is measured on the fake-quant
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
from arm_tosa_core import TosaCompileSpec

from .report import EthosUReport


def module_cycles(report: EthosUReport, module: str) -> float:
    """vela's Op Cycles summed over the layers of ``module`` and its submodules."""
    return float(sum(float(r.get("Op Cycles", 0) or 0) for p in report.partitions for r in p.layers
                     if (m := str(r.get("Module") or "")) == module or m.startswith(module + ".")))


def run_target_sqnr(model, example_inputs: tuple, samples: Sequence[tuple], report: EthosUReport,
                    target_db: float) -> MixedPrecisionResult:
    """The search for the CLI; ``report`` is vela's report of the all-int8 compile."""
    def make_quantizer() -> TOSAQuantizer:
        return TOSAQuantizer(TosaCompileSpec("TOSA-1.0+INT+int16")).set_global(
            get_symmetric_quantization_config())

    quantize = quantize_with_overrides(model, example_inputs, samples, make_quantizer)
    base = quantize({})
    from arm_quantizer.accuracy import quantized_layers

    owners = {layer.owner for layer in quantized_layers(base) if layer.owner}
    costs = {m: max(module_cycles(report, m), 1.0) for m in owners}
    return search_mixed_precision(quantize, samples, target_db, costs)
