"""EthosUPartitioner: the TOSA partitioner plus what vela compiles for the chosen Ethos-U family."""

from __future__ import annotations

from collections.abc import Sequence

from torch.fx import Node
from torch.fx.passes.operator_support import OperatorSupportBase

from arm_tosa_core import TOSAPartitioner
from arm_tosa_core.quantized import is_dequantize, is_quantize

from .compile_spec import EthosUCompileSpec
from .constraints import ethosu_reason


class EthosUPartitioner(TOSAPartitioner):
    """Delegates to `EthosUBackend` what the spec's TOSA profile lowers and vela compiles.

    Nodes left on the CPU carry their reason (see `arm_tosa_core.partition_report`).
    `additional_checks` takes DontPartition, DontPartitionModule, DontPartitionName or any
    `OperatorSupportBase`; they can only remove nodes from delegation.
    """

    backend_id = "EthosUBackend"

    def __init__(self, compile_spec: EthosUCompileSpec,
                 additional_checks: Sequence[OperatorSupportBase] | None = None) -> None:
        if not isinstance(compile_spec, EthosUCompileSpec):
            raise TypeError(f"EthosUPartitioner needs an EthosUCompileSpec, got {type(compile_spec).__name__}; "
                            "build one with EthosUCompileSpec('ethos-u55-128') (or TOSAPartitioner for "
                            "a plain TosaCompileSpec)")
        super().__init__(compile_spec, additional_checks)

    def target_check(self, node: Node) -> str | None:
        return self.constraint_reason(node) or self._boundary_reason(node)

    def constraint_reason(self, node: Node) -> str | None:
        reason = ethosu_reason(node, self.compile_spec.family)
        return None if reason is None else f"{self.compile_spec.target}: {reason}"

    # The INT lowering needs each quantized island whole: the compute nodes that work on one set
    # of integer values between their dequantize inputs and quantize outputs (e.g. conv + relu).
    # When one member stays on the CPU, the whole island, its dequantize inputs and its quantize
    # outputs stay with it; otherwise a partition would see a float value where it needs integers.
    # (PT2E gives every dequantize a single user, so a dequantize belongs to one island.)
    def _boundary_reason(self, node: Node) -> str | None:
        if not node.meta.get("arm_quantized"):
            return None
        if is_quantize(node):
            members, verb = _island(node.args[0]), "it quantizes a result of"
        elif is_dequantize(node):
            members, verb = set().union(*(_island(u) for u in node.users)), "it feeds"
        else:
            members, verb = _island(node) - {node}, "it shares quantized values with"
        for member in sorted(members, key=lambda n: n.name):
            if self.own_reason(member) is not None:
                return f"{verb} {member.name}, which stays on the CPU"
        return None


def _island(start) -> set[Node]:
    """The quantized compute nodes connected to `start` without a quantize/dequantize between."""

    def member(n) -> bool:
        return (isinstance(n, Node) and n.op == "call_function" and bool(n.meta.get("arm_quantized"))
                and not is_quantize(n) and not is_dequantize(n))

    if not member(start):
        return set()
    seen, todo = {start}, [start]
    while todo:
        current = todo.pop()
        for n in (*current.all_input_nodes, *current.users):
            if n not in seen and member(n):
                seen.add(n)
                todo.append(n)
    return seen
