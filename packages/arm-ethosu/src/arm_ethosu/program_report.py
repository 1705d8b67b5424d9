"""vela's numbers for a lowered program, read back from its Ethos-U payloads.

Each Ethos-U payload carries its partition's report in a "vela_report" block after the bin
stream's end marker, so `ethosu_report` works on anything that holds the payloads: the
EdgeProgramManager from `to_edge_transform_and_lower`, the ExecutorchProgramManager from
`to_executorch`, an ExportedProgram, or a .pte (bytes or path), in this process or a later one.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from executorch.exir.lowered_backend_module import executorch_call_delegate
from torch.export import ExportedProgram

from .binstream import parse_binstream
from .report import EthosUReport, PartitionReport

BACKEND_ID = "EthosUBackend"
TOSA_BLOCK = "tosa_graph"
REPORT_BLOCK = "vela_report"
REPORT_FILE = "report.json"


def ethosu_payloads(program: Any) -> list[bytes]:
    """The processed bytes of every EthosUBackend delegate, in execution order."""
    if isinstance(program, (bytes, bytearray, memoryview, str, os.PathLike)):
        from arm_tosa_core.pte_delegates import list_delegates

        if isinstance(program, (str, os.PathLike)) and not Path(program).is_file():
            raise FileNotFoundError(f"no .pte file at {program}")
        return [bytes(d.processed) for d in list_delegates(program) if d.backend_id == BACKEND_ID]
    if hasattr(program, "exported_program"):
        program = program.exported_program()
    elif hasattr(program, "buffer"):
        return ethosu_payloads(program.buffer)
    if not isinstance(program, ExportedProgram):
        raise TypeError("ethosu_report takes an EdgeProgramManager, ExecutorchProgramManager, "
                        f"ExportedProgram or .pte bytes/path, not {type(program).__name__}")
    gm = program.graph_module
    payloads = []
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is executorch_call_delegate:
            lowered = getattr(gm, node.args[0].target)
            if lowered.backend_id == BACKEND_ID:
                payloads.append(bytes(lowered.processed_bytes))
    return payloads


def partition_report_of(payload: bytes, name: str | None = None) -> PartitionReport:
    """The vela report stored in one payload, checked against the stream's own sizes."""
    stream = parse_binstream(payload)
    if REPORT_BLOCK not in stream.extra:
        raise ValueError(f"this Ethos-U payload has no {REPORT_BLOCK!r} block (built by another "
                         "toolchain?); recompile with arm_ethosu to get vela's numbers")
    report = PartitionReport(**json.loads(stream.extra[REPORT_BLOCK]))
    stored = (len(stream.cmd_data), len(stream.weight_data), stream.scratch_size)
    if stored != (report.cmd_bytes, report.weight_bytes, report.scratch_size):
        raise ValueError(f"the payload's vela_report (command/weight/scratch bytes "
                         f"{(report.cmd_bytes, report.weight_bytes, report.scratch_size)}) does not "
                         f"match its bin stream {stored}: the payload was edited after compiling")
    if name is not None:
        report.name = name
    return report


def ethosu_report(program: Any) -> EthosUReport:
    """vela's numbers (cycles, memory, MACs, per-layer rows) for every Ethos-U partition of `program`.

    Partitions are named `partition_<i>` in execution order: the stem of their artifact files (see
    `arm_tosa_core.artifacts`), which each payload records.
    """
    payloads = ethosu_payloads(program)
    if not payloads:
        raise ValueError("the program has no EthosUBackend delegate: lower it with "
                         "EthosUPartitioner(EthosUCompileSpec(...))")
    parts = []
    for i, payload in enumerate(payloads):
        part = partition_report_of(payload)
        if part.name == "partition":  # compiled without an artifact folder
            part.name = f"partition_{i}"
        parts.append(part)
    return EthosUReport(parts)


def _index(report: PartitionReport) -> int:
    match = re.search(r"(\d+)$", report.name)
    return int(match.group(1)) if match else -1


def update_report_json(directory: str | Path, report: PartitionReport) -> Path:
    """Add (or replace) one partition in `directory`/report.json.

    The file lists the partitions of the program compiled into `directory`, named by their artifact
    stems (partition_0, partition_1, ...): partition_0 starts a new file.
    """
    path = Path(directory) / REPORT_FILE
    parts: list[PartitionReport] = []
    if report.name != "partition_0" and path.is_file():
        try:
            parts = EthosUReport.from_json(path.read_text()).partitions
        except (ValueError, KeyError, TypeError):
            parts = []  # not ours, or from an older version: start over
    parts = sorted([p for p in parts if p.name != report.name] + [report], key=_index)
    path.write_text(EthosUReport(parts).to_json())
    return path
