"""Pt2eFlow: the quantization steps `arm-compile` runs for any target with a PT2E quantizer
(arm_tosa_core.compile_targets.QuantizationFlow): calibrate and convert, the exact quantized
reference, and the per-layer accuracy report."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torchao.quantization.pt2e.quantizer import Quantizer

from .accuracy_report import AccuracyReport


@dataclass(frozen=True)
class Pt2eFlow:
    quantizer: Quantizer

    def quantize(self, module: torch.nn.Module, example_inputs: tuple, samples: Sequence[tuple]
                 ) -> torch.fx.GraphModule:
        """prepare_pt2e, one forward per calibration sample, convert_pt2e."""
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        prepared = prepare_pt2e(torch.export.export(module, example_inputs).module(), self.quantizer)
        with torch.no_grad():
            for sample in samples:
                prepared(*sample)
        return convert_pt2e(prepared)

    def reference(self, quantized: torch.nn.Module, inputs: tuple) -> Any:
        """Exact quantize arithmetic: the float32 fake-quant model can flip near-tie roundings."""
        from .exact_reference import run_exactly

        with torch.no_grad():
            return run_exactly(quantized, *inputs)

    def accuracy_report(self, quantized: torch.fx.GraphModule, samples: Sequence[tuple], lowered: Any,
                        run_pte: Callable[..., Any] | None, target_note: str,
                        pte_stage: str = "tosa_reference") -> AccuracyReport:
        """Per-layer SQNR (fake-quant and TOSA reference-model stages) plus, with `run_pte`, the
        output SQNR of the written .pte executed on the host, as `output_db[pte_stage]`."""
        from .accuracy import output_error_db, quantization_error_report

        report = quantization_error_report(quantized, samples, lowered=lowered, target_note=target_note)
        if run_pte is not None:
            report.output_db[pte_stage] = output_error_db(quantized, samples, run_pte)
        return report
