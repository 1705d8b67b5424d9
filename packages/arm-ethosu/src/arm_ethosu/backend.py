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
from dataclasses import asdict

# A quantized model keeps its float-boundary quantize/dequantize on the CPU; to_executorch needs
# their out variants, which this import registers.
import executorch.kernels.quantized  # noqa: F401
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram

from arm_tosa_core import TosaCompileSpec, register_payload_decoder
from arm_tosa_core.backend import lower_partition, next_partition_stem

from .binstream import build_binstream, parse_binstream
from .program_report import REPORT_BLOCK, TOSA_BLOCK, update_report_json
from .report import PartitionReport, check_memory_budget
from .vela_runner import compile_with_vela


def _settings(compile_specs: list[CompileSpec]) -> tuple[dict, dict]:
    settings = TosaCompileSpec.settings_from_list(compile_specs)
    ethosu = settings.get("ethosu")
    if not ethosu:
        raise ValueError("EthosUBackend got compile specs without Ethos-U settings: partition with "
                         "EthosUPartitioner(EthosUCompileSpec(...))")
    return settings, ethosu


class EthosUBackend(BackendDetails):
    """Lowers a partition to TOSA INT, compiles it with vela and returns the bin stream."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        settings, ethosu = _settings(compile_specs)
        path = settings.get("intermediate_path")
        # The core would pick its own file name; lower without writing, then write under the stem
        # that vela's files share, so partition_<n>.tosa sits next to partition_<n>_summary_*.csv.
        core_specs = [CompileSpec("arm_compile_spec",
                                  json.dumps({**settings, "intermediate_path": None}).encode())]
        graph, _ = lower_partition(edge_program, core_specs)
        stem = next_partition_stem(path) if path else "partition"
        if path:
            graph.write(path, stem, debug=settings.get("debug_mode") == "json")
        started = time.perf_counter()
        result = compile_with_vela(graph.flatbuffer, ethosu["target"], ethosu["system_config"],
                                   ethosu["memory_mode"], ethosu["config_ini"], ethosu["extra_flags"],
                                   work_dir=path, name=stem)
        report = PartitionReport.from_vela(result, name=stem, debug_map=graph.debug_map)
        report.vela_seconds = round(time.perf_counter() - started, 3)
        if path:  # before the budget check, so a failing compile leaves its numbers behind
            update_report_json(path, report)
        check_memory_budget(report, result.limits, ethosu.get("sram_limit_bytes"),
                            ethosu.get("weight_limit_bytes"))
        extra = {REPORT_BLOCK: json.dumps(asdict(report), separators=(",", ":")).encode()}
        if ethosu.get("tosa_graph", False):
            extra = {TOSA_BLOCK: graph.flatbuffer, **extra}
        payload = build_binstream(result, extra)
        return PreprocessResult(processed_bytes=payload)


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
