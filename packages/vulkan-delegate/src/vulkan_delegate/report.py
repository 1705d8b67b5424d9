"""partition_report: what runs on the Vulkan GPU, and for each node left on the CPU, why."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import torch
from executorch.exir.lowered_backend_module import executorch_call_delegate
from torch.export import ExportedProgram

from .partitioner import REASON_KEY
from .registry import aten_key

_NOT_COMPUTE = {operator.getitem, executorch_call_delegate, torch.ops.aten.sym_size.int}


@dataclass
class CpuNode:
    name: str
    target: str
    reason: str


@dataclass
class PartitionReport:
    """Delegated node names per partition (with payload size) and CPU nodes with reasons."""

    delegates: list[tuple[str, list[str], int]] = field(default_factory=list)
    cpu_nodes: list[CpuNode] = field(default_factory=list)

    @property
    def delegated_count(self) -> int:
        return sum(len(nodes) for _, nodes, _ in self.delegates)

    def __str__(self) -> str:
        lines = [f"Delegated {self.delegated_count} of {self.delegated_count + len(self.cpu_nodes)} "
                 f"operators in {len(self.delegates)} partition(s)"]
        lines += [f"  partition {i} -> {b}: {len(n)} nodes, {size} bytes"
                  for i, (b, n, size) in enumerate(self.delegates)]
        lines += ["On the CPU:"] * bool(self.cpu_nodes)
        lines += [f"  {c.target}  {c.name}: {c.reason}" for c in self.cpu_nodes]
        return "\n".join(lines)


def partition_report(program: Any) -> PartitionReport:
    """Report for an EdgeProgramManager or ExportedProgram after `to_edge_transform_and_lower`."""
    ep = program.exported_program() if hasattr(program, "exported_program") else program
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"partition_report takes a lowered program, not {type(program).__name__}")
    report = PartitionReport()
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is executorch_call_delegate:
            lowered = getattr(ep.graph_module, node.args[0].target)
            inner = [n.name for n in lowered.original_module.graph.nodes
                     if n.op == "call_function" and n.target not in _NOT_COMPUTE]
            report.delegates.append((lowered.backend_id, inner, len(lowered.processed_bytes)))
        elif node.target not in _NOT_COMPUTE:
            reason = node.meta.get(REASON_KEY) or "not claimed by any partitioner"
            report.cpu_nodes.append(CpuNode(node.name, str(aten_key(node.target)), reason))
    return report
