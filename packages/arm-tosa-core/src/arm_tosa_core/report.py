"""partition_report: what was delegated, and for each node left on the CPU, why (in words).

One report for every delegate of this project (TOSA, Ethos-U, VGF and the Vulkan delegate, which
re-exports it): reasons come from `delegation.cpu_reason`, TOSA payloads also list their operators.
"""

from __future__ import annotations

import json
import operator
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from executorch.exir.lowered_backend_module import executorch_call_delegate
from torch.export import ExportedProgram

from .delegation import aten_key, cpu_reason

_NOT_COMPUTE = {operator.getitem, executorch_call_delegate, torch.ops.aten.sym_size.int}


@dataclass
class DelegateSummary:
    backend_id: str
    nodes: list[str]
    ops: dict[str, int]
    payload_bytes: int


@dataclass
class CpuNode:
    name: str
    target: str
    reason: str


@dataclass
class PartitionReport:
    """Delegated partitions and CPU nodes of a lowered program."""

    delegates: list[DelegateSummary] = field(default_factory=list)
    cpu_nodes: list[CpuNode] = field(default_factory=list)

    @property
    def delegated_count(self) -> int:
        return sum(len(d.nodes) for d in self.delegates)

    @property
    def delegated_share(self) -> float:
        total = self.delegated_count + len(self.cpu_nodes)
        return 1.0 if total == 0 else self.delegated_count / total

    def to_dict(self) -> dict:
        return {"delegated_share": self.delegated_share, "delegates": [asdict(d) for d in self.delegates],
                "cpu_nodes": [asdict(c) for c in self.cpu_nodes]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def __str__(self) -> str:
        lines = [f"Delegated {self.delegated_count} of {self.delegated_count + len(self.cpu_nodes)} "
                 f"operators ({100 * self.delegated_share:.1f} %) in {len(self.delegates)} partition(s)"]
        for i, d in enumerate(self.delegates):
            ops = ", ".join(f"{k} {v}" for k, v in sorted(d.ops.items(), key=lambda kv: -kv[1]))
            lines.append(f"  partition {i} -> {d.backend_id}: {len(d.nodes)} nodes, {d.payload_bytes} bytes"
                         + (f"; {ops}" if ops else ""))
        if self.cpu_nodes:
            lines.append("On the CPU:")
            width = max(len(c.target) for c in self.cpu_nodes)
            for c in self.cpu_nodes:
                lines.append(f"  {c.target:<{width}}  {c.name}: {c.reason}")
        return "\n".join(lines)


def _counts(payload: bytes) -> dict[str, int]:
    try:
        from .tosa_inspect import tosa_op_counts

        return dict(tosa_op_counts(payload))
    except Exception:  # payloads of other formats (vela, VGF) carry no plain TOSA graph
        return {}


def partition_report(program: Any) -> PartitionReport:
    """Report for an EdgeProgramManager or ExportedProgram after `to_edge_transform_and_lower`."""
    ep = program.exported_program() if hasattr(program, "exported_program") else program
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"partition_report takes a lowered program, not {type(program).__name__}")
    report = PartitionReport()
    gm = ep.graph_module
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is executorch_call_delegate:
            lowered = getattr(gm, node.args[0].target)
            inner = [n.name for n in lowered.original_module.graph.nodes
                     if n.op == "call_function" and n.target not in _NOT_COMPUTE]
            payload = bytes(lowered.processed_bytes)
            ops = _counts(payload) if lowered.backend_id == "TOSABackend" else {}
            report.delegates.append(DelegateSummary(lowered.backend_id, inner, ops, len(payload)))
        elif node.target not in _NOT_COMPUTE:
            report.cpu_nodes.append(CpuNode(node.name, str(aten_key(node.target)), cpu_reason(node)))
    return report
