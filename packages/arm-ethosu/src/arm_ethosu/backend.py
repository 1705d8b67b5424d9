"""EthosUBackend: one partition -> TOSA INT (the core) -> vela, in-process -> the delegate payload.

The payload is a vela bin stream (see the README) that the stock ExecuTorch Ethos-U runtime reads up
to its end marker. After the marker come blocks only the host reads: "vela_report" (this partition's
vela numbers as JSON, read back by `ethosu_report`) and, when the spec asks for it
(`EthosUCompileSpec.include_host_graph()`), "tosa_graph" (the TOSA INT flatbuffer vela compiled, so
`run_on_reference_model` can run the program bit-exactly on a CPU).
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from dataclasses import asdict, replace

# A quantized model keeps its float-boundary quantize/dequantize on the CPU; to_executorch needs
# their out variants, which this import registers.
import executorch.kernels.quantized  # noqa: F401
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram

from arm_tosa_core import TosaCompileSpec, register_payload_decoder, transpose_forms
from arm_tosa_core.artifacts import ArtifactWriter, NumberedPartitionBackend
from arm_tosa_core.helpers import windows
from arm_tosa_core.lowering import TosaGraph, lower_partition
from arm_tosa_core.ops import resize

from .binstream import build_binstream, parse_binstream
from .compile_spec import EthosUCompileSpec
from .program_report import REPORT_BLOCK, TOSA_BLOCK, update_report_json
from .report import PartitionReport, check_memory_budget, number_unnamed_layers
from .tune import tune_partition
from .vela_runner import compile_with_vela


def _spec(compile_specs: list[CompileSpec]) -> EthosUCompileSpec:
    spec = TosaCompileSpec.from_list(compile_specs)
    if not isinstance(spec, EthosUCompileSpec):
        raise ValueError("EthosUBackend got compile specs without Ethos-U settings: partition with "
                         "EthosUPartitioner(EthosUCompileSpec(...))")
    return spec


class EthosUBackend(NumberedPartitionBackend, BackendDetails):
    """Lowers a partition to TOSA INT, compiles it with vela and returns the bin stream."""

    @classmethod
    def preprocess_partition(cls, edge_program: ExportedProgram, compile_specs: list[CompileSpec],
                             artifacts: ArtifactWriter) -> PreprocessResult:
        spec = _spec(compile_specs)
        with spec_forms(spec):
            graph = lower_partition(edge_program, spec)
        artifacts.write_tosa(graph)  # the same stem as vela's files: partition_<i>.tosa, partition_<i>_*.csv
        started = time.perf_counter()
        tune_record = None
        if spec.tune_bounds is None:
            result = compile_with_vela(graph.flatbuffer, spec.target, spec.system_config, spec.memory_mode,
                                       spec.config_ini, spec.extra_flags, work_dir=artifacts.directory,
                                       name=artifacts.stem)
        else:  # --tune: the fewest NPU cycles over vela's scheduling options and the graph forms
            forms = graph_forms(edge_program, spec, graph)
            outcome = tune_partition({k: g.flatbuffer for k, g in forms.items()}, spec, artifacts.stem,
                                     artifacts.directory, spec.tune_bounds)
            result, graph, tune_record = outcome.result, forms[outcome.form], outcome.record
        report = PartitionReport.from_vela(result, name=artifacts.stem, debug_map=graph.debug_map)
        report.tune = tune_record
        # The payload's report is the same for the same model and flags (it goes into the .pte): vela's
        # process-wide layer numbers start from 0, and the wall time goes only to report.json.
        number_unnamed_layers(report.layers)
        if artifacts.directory is not None:  # before the budget check: a failing compile leaves its numbers
            seconds = round(time.perf_counter() - started, 3)
            update_report_json(artifacts.directory, replace(report, vela_seconds=seconds))
        check_memory_budget(report, result.limits, spec.sram_limit_bytes, spec.weight_limit_bytes)
        extra = {REPORT_BLOCK: json.dumps(asdict(report), separators=(",", ":")).encode()}
        if spec.tosa_graph_in_payload:
            extra = {TOSA_BLOCK: graph.flatbuffer, **extra}
        return PreprocessResult(processed_bytes=build_binstream(result, extra))


def graph_forms(edge_program: ExportedProgram, spec: EthosUCompileSpec, default: TosaGraph
                ) -> dict[str, TosaGraph]:
    """The graph forms `--tune` tries for a partition (name -> graph), the plain lowering first. Every
    form computes the same integers as the plain one (each is tested bit-exact on the reference model).

    On U55/U65, a partition with a bilinear upscale (NEAREST + depthwise, see `arm_tosa_core.ops.resize`)
    is also lowered in each `resize.BILINEAR_FORMS` form that gives a different graph, and a partition with a
    TRANSPOSE with its TRANSPOSEs in the form the spec does not use (`arm_tosa_core.transpose_forms`: the
    default there is "collapsed", the fewest axes, and the variant "as-is"; regor on U85 sends the collapsed
    form to the CPU, so U85 tries neither variant)."""
    forms = {"default": default}
    if spec.target.startswith("ethos-u85"):
        return forms
    variants = [(f"bilinear={form}", resize.bilinear_form(form))
                for form in (resize.BILINEAR_FORMS if _has_bilinear(edge_program) else ())]
    if default.op_counts.get("TRANSPOSE") or default.op_counts.get("RESHAPE"):  # a collapsed one may be a RESHAPE
        other = next(f for f in transpose_forms.TRANSPOSE_FORMS if f != spec.transpose_form)
        variants.append((f"transpose={other}", transpose_forms.transpose_form(other)))
    with spec_forms(spec):  # a variant changes one form and keeps the spec's others
        for name, form in variants:
            with form:
                graph = lower_partition(edge_program, spec)
            if all(graph.flatbuffer != g.flatbuffer for g in forms.values()):
                forms[name] = graph
    return forms


def spec_forms(spec: EthosUCompileSpec) -> ExitStack:
    """The graph forms the spec asks for (its target's defaults, or the user's), set for a `with` block."""
    stack = ExitStack()
    stack.enter_context(transpose_forms.transpose_form(spec.transpose_form))
    stack.enter_context(windows.max_pool_form(spec.max_pool_form))
    return stack


def _has_bilinear(edge_program: ExportedProgram) -> bool:
    return any(node.op == "call_function" and "upsample_bilinear2d" in str(node.target)
               for node in edge_program.graph.nodes)


def tosa_graph_of(payload: bytes, compile_specs: list | None = None) -> bytes:
    """The TOSA INT flatbuffer stored in an Ethos-U payload (what the reference model runs)."""
    stream = parse_binstream(payload)
    if TOSA_BLOCK not in stream.extra:
        raise ValueError(f"this Ethos-U payload has no {TOSA_BLOCK!r} block (the host graph: the "
                         "deployable payload, the default, leaves it out), so it cannot run on the host; "
                         "recompile with EthosUCompileSpec(...).include_host_graph() (arm-compile "
                         "--host-graph)")
    return stream.extra[TOSA_BLOCK]


register_payload_decoder("EthosUBackend", tosa_graph_of)
