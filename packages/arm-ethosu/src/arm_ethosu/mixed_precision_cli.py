"""`arm-compile --target-sqnr DB`: choose the units (modules, single ops of a module's own forward) to
move to a16w8 with vela's cycle numbers.

The search is `arm_quantizer.search_mixed_precision`; its candidates are non-overlapping units of
layers (`arm_quantizer.precision_units`), and vela's per-layer rows are split over them, each row
counted once (`unit_cycles`; a row's torch op picks the node unit of its module). The extra cycles of moving a unit to int16:

- where this toolkit compiles a16w8 for Ethos-U (`EthosUQuantizer` takes int16 activations), vela's
  own numbers: the all-a16w8 model is compiled once, and a unit's extra is its int16 rows' cycles
  minus its int8 rows' cycles (`cycles_note` "vela"); SQNR is measured with `EthosUQuantizer`;
- otherwise an estimate: a unit's int8 cycles again (int16 activations move twice the bytes;
  `cycles_note` "est."), SQNR with the TOSA-1.0+INT+int16 rules.

Where a moved layer meets an int8 one, vela runs the int8 <-> int16 RESCALE as a pass of its own
(about a cycle per element widening to int16, twice that narrowing to int8, on U55-128), which the
all-a16w8 compile never shows; with vela's numbers the search charges it per boundary element, at the
widening rate vela gives a probe (`rescale_cycles_per_element`) both ways: a conv whose int16 output
is narrowed costs about as much less than its all-a16w8 row as the narrowing costs more.

int16 goes only where it lowers (`ethosu_quantize`): an op whose int16 form `EthosUPartitioner`
leaves on the CPU (an int16 TABLE off by more than 1 LSB, an int16 MATMUL on U55/U65) stays int8
inside an a16w8 module, so the all-a16w8 compile and every mix keep the all-int8 model's CPU nodes
(`arm_quantizer.int16_fallback`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch

from arm_quantizer import (
    TOSAQuantizer,
    get_symmetric_a16w8_quantization_config,
    get_symmetric_quantization_config,
)
from arm_quantizer.int16_fallback import KEPT_INT8_META
from arm_quantizer.mixed_precision import (
    MixedPrecisionResult,
    Quantize,
    quantize_with_overrides,
    search_mixed_precision,
)
from arm_quantizer.precision_units import Unit, unit_cycles
from arm_tosa_core import TosaCompileSpec

from .report import EthosUReport

CYCLES_COLUMN = "NPU"
"""The per-layer column the search costs in: vela's NPU cycles, which add up to the summary's
``cycles_npu`` (``Op Cycles`` adds up to ``cycles_total``, memory-bound time included: on
U55-128 with weights in off-chip flash, 4.3x the NPU cycles of MobileNetV2)."""


def layer_rows(report: EthosUReport) -> list[tuple[str, str, float]]:
    """(module path, torch op, vela NPU cycles) of every NPU layer in the report (see ``layer_map``)."""
    return [(str(r.get("Module") or ""), str(r.get("Torch Op") or ""), _cycles(r))
            for p in report.partitions for r in p.layers]


def _cycles(row: dict) -> float:
    return float(row.get(CYCLES_COLUMN, 0) or 0)


def ethosu_quantize(model, example_inputs: tuple, samples: Sequence[tuple], spec) -> Quantize:
    """``quantize(overrides)`` with `EthosUQuantizer(spec)`, int16 only where `EthosUPartitioner(spec)`
    lowers it (see the module doc); ``{"": a16w8}`` is the all-a16w8 model."""
    from .partitioner import EthosUPartitioner
    from .quantizer import EthosUQuantizer

    return quantize_with_overrides(model, example_inputs, samples, lambda: EthosUQuantizer(spec),
                                   EthosUPartitioner(spec))


def int16_compiles(spec) -> bool:
    """Whether `EthosUQuantizer` takes a16w8 for this spec (int16 Ethos-U compiles in this toolkit)."""
    from .quantizer import EthosUQuantizer

    try:
        EthosUQuantizer(spec).set_global(get_symmetric_a16w8_quantization_config())
    except ValueError:
        return False
    return True


def quantize_model(model, example_inputs: tuple, samples: Sequence[tuple], quantizer):
    """export -> prepare_pt2e -> calibrate on `samples` -> convert_pt2e."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    prepared = prepare_pt2e(torch.export.export(model, example_inputs).module(), quantizer)
    with torch.no_grad():
        for sample in samples:
            prepared(*sample)
    return convert_pt2e(prepared)


@dataclass
class Compiled:
    """vela's report of one compile, and how many nodes the partitioner left on the CPU (the float
    boundary's quantize/dequantize included)."""

    report: EthosUReport
    cpu_nodes: int
    cpu_ops: dict[str, int] = field(default_factory=dict)  # compute ops on the CPU (no Q/DQ), counted

    @property
    def npu_cycles(self) -> int:
        return sum(p.cycles_npu for p in self.report.partitions)

    @property
    def total_cycles(self) -> int:
        return sum(p.cycles_total for p in self.report.partitions)


def compile_report(quantized, example_inputs: tuple, spec) -> Compiled:
    """`quantized` compiled for `spec` as arm-compile does: vela's report and the CPU node count."""
    from executorch.exir import (
        EdgeCompileConfig,
        ExecutorchBackendConfig,
        to_edge_transform_and_lower,
    )

    from arm_tosa_core import partition_report

    from .partitioner import EthosUPartitioner
    from .program_report import ethosu_report

    edge = to_edge_transform_and_lower(torch.export.export(quantized, example_inputs),
                                       partitioner=[EthosUPartitioner(spec)],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    cpu = partition_report(edge).cpu_nodes
    ops = Counter(c.target for c in cpu if "quantize_per" not in c.target)
    pte = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False)).buffer
    return Compiled(ethosu_report(pte), len(cpu), dict(ops))


def estimated_extra_cycles(report: EthosUReport, units: Sequence[Unit]) -> dict[str, float]:
    """Extra cycles of moving each unit to int16, estimated as its int8 cycles (see module doc)."""
    return unit_cycles(units, layer_rows(report))[0]


def vela_extra_cycles(report8: EthosUReport, report16: EthosUReport, units: Sequence[Unit]) -> dict[str, float]:
    """Extra cycles of moving each unit to int16 from vela's all-int8 and all-a16w8 compiles
    (never below 0: vela may fuse an int16 layer differently)."""
    c8, c16 = (unit_cycles(units, layer_rows(r))[0] for r in (report8, report16))
    return {o: max(c16[o] - c8[o], 0.0) for o in c8}


def rescale_cycles_per_element(spec) -> tuple[float, float]:
    """vela's cycles per element of a standalone RESCALE for ``spec``, (int8 -> int16, int16 -> int8):
    a probe of three 1x1 convolutions, the middle one a16w8, on a 1x16x16x16 activation; the widening
    RESCALE is the first conv's output requantized, the narrowing one the middle conv's (0 where vela
    fuses it away). On U55-128 narrowing costs about twice widening (2.08 vs 1.07 cycles/element)."""
    from .quantizer import EthosUQuantizer

    torch.manual_seed(0)
    probe = torch.nn.Sequential(*(torch.nn.Conv2d(16, 16, 1) for _ in range(3))).eval()
    x = (torch.randn(1, 16, 16, 16),)
    quantizer = EthosUQuantizer(spec).set_module_name("1", get_symmetric_a16w8_quantization_config())
    report = compile_report(quantize_model(probe, x, [x], quantizer), x, spec).report
    rows = [r for p in report.partitions for r in p.layers if r.get("NNG Operator") == "Rescale"]

    def rate(module: str) -> float:
        return sum(_cycles(r) for r in rows if str(r.get("Module")) == module) / x[0].numel()

    return rate("0"), rate("1")


def run_target_sqnr(model, example_inputs: tuple, samples: Sequence[tuple], report: EthosUReport,
                    target_db: float, eval_samples: Sequence[tuple] | None = None, spec=None,
                    report16: EthosUReport | None = None, log=None,
                    int8_ops: Mapping[str, str] | None = None) -> MixedPrecisionResult:
    """The search for the CLI and the bench. ``report``: vela's report of the all-int8 compile;
    ``samples`` calibrate, ``eval_samples`` (default: the same) measure SQNR; ``spec``: the
    EthosUCompileSpec (vela's int16 numbers where int16 compiles; ``report16``: the all-a16w8
    compile's report when already made, with ``int8_ops``, the ops that model kept int8: its
    ``meta[KEPT_INT8_META]``); ``log``: progress lines."""
    real = spec is not None and int16_compiles(spec)
    if real:
        quantize = ethosu_quantize(model, example_inputs, samples, spec)
        if report16 is None:
            q16 = quantize({"": get_symmetric_a16w8_quantization_config()})
            report16 = compile_report(q16, example_inputs, spec).report
            int8_ops = q16.meta.get(KEPT_INT8_META, {})

        def costs(units: Sequence[Unit]) -> dict[str, float]:
            return vela_extra_cycles(report, report16, units)
        # charged at the widening rate both ways: a narrowing RESCALE costs about twice as much, but
        # a conv whose int16 output is narrowed writes it for about as much less than its all-a16w8
        # row (MobileNetV2 on U55-128: 17 024 -> 4 736 cycles), and that rate priced the bench's
        # mixes closer to vela (bench/results/mixed_precision.md)
        boundary = rescale_cycles_per_element(spec)[0]
    else:
        boundary = 0.0  # nothing compiled: no vela rate to charge
        def make_quantizer() -> TOSAQuantizer:
            return TOSAQuantizer(TosaCompileSpec("TOSA-1.0+INT+int16")).set_global(
                get_symmetric_quantization_config())

        def costs(units: Sequence[Unit]) -> dict[str, float]:
            return estimated_extra_cycles(report, units)
        quantize = quantize_with_overrides(model, example_inputs, samples, make_quantizer)
    result = search_mixed_precision(quantize, eval_samples or samples, target_db, costs, log=log,
                                    boundary_cycles_per_element=boundary, int8_ops=int8_ops or ())
    result.cycles_note = "vela" if real else "est."
    return result
