"""int16 only where it lowers: single ops whose int16 form the target leaves on the CPU stay int8.

a16w8 (globally or per module) can send an op to the CPU that int8 keeps on the NPU: an int16
TABLE that cannot follow its function within 1 LSB for the calibrated qparams (LayerNorm's rsqrt,
softmax's exp and reciprocal), or an int16 operand an operator of the target does not take (MATMUL
on Ethos-U55/U65). The program then splits into more partitions and the CPU does int16 work the
NPU's cycle counts never show. So after quantizing, the target's partitioner decides (nothing is
lowered or compiled), and each compute node it leaves on the CPU by its own rules
(``TOSAPartitioner.own_reason``: neighbours that only follow it are not counted) that it did not
leave so in the reference model (the user's quantizer, all-int8) and that reads or writes int16 is
set back to int8 (``TOSAQuantizer.set_node_name``); then the model is quantized again. Around such a
node the int8 <-> int16 requantizations are RESCALEs inside the partition. A new quantization moves
qparams, so this repeats while new nodes appear, at most ``MAX_ROUNDS`` times.

Nodes are named as in the graph the quantizer annotates, which a converted model's compute nodes
keep; the lowered program's nodes are traced back to them by their ``from_node`` provenance.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from executorch.exir.backend.partitioner import Partitioner, PartitionResult
from torch import fx
from torch.export import ExportedProgram

MAX_ROUNDS = 3
"""Quantizations after the first: each may set more nodes to int8 (qparams move with their neighbours)."""

KEPT_INT8_META = "arm_kept_int8"
"""``GraphModule.meta`` key of a quantized model: {node name: why its int16 form stays on the CPU}."""

CpuReasons = Callable[[fx.GraphModule], Mapping[str, str]]
"""{compute node of a converted model: why the target leaves it on the CPU by its own rules}."""


def own_cpu_reasons(partitioner, example_inputs: tuple) -> CpuReasons:
    """A ``CpuReasons`` asking ``partitioner`` (a ``TOSAPartitioner``) about the program that
    ``torch.export`` and ``to_edge_transform_and_lower`` make of a converted model, as a compile
    would; it only decides: nothing is delegated, so no backend compiler runs."""
    def reasons(quantized: fx.GraphModule) -> dict[str, str]:
        verdict = _Decide(partitioner, id(quantized.graph))
        to_edge_transform_and_lower(torch.export.export(quantized, example_inputs), partitioner=[verdict],
                                    compile_config=EdgeCompileConfig(_check_ir_validity=False))
        return verdict.reasons

    return reasons


class _Decide(Partitioner):
    """``inner``'s partitioning with nothing delegated; records its own-rule CPU reasons by the names
    the nodes have in the graph ``graph_id`` (the converted model's)."""

    def __init__(self, inner, graph_id: int) -> None:
        super().__init__()
        self.inner, self.graph_id, self.reasons = inner, graph_id, {}

    def transform_for_pre_decomposition(self, ep: ExportedProgram) -> ExportedProgram:
        return self.inner.transform_for_pre_decomposition(ep)

    def ops_to_not_decompose(self, ep: ExportedProgram):
        return self.inner.ops_to_not_decompose(ep)

    def partition(self, ep: ExportedProgram) -> PartitionResult:
        self.inner.partition(ep)
        for node in ep.graph.nodes:
            tagged = node.meta.pop("delegation_tag", None)
            if node.op != "call_function" or tagged is not None:
                continue
            reason = self.inner.own_reason(node) or _own_lowering_failure(node)
            name = _source_name(node, self.graph_id)
            if reason is not None and name is not None:
                self.reasons[name] = reason
        return PartitionResult(tagged_exported_program=ep, partition_tags={})


def _own_lowering_failure(node: fx.Node) -> str | None:
    """The partitioner's trial lowering of `node` itself failed (its reason, not a neighbour's): e.g. an
    int16 SiLU whose TABLE is off, decomposed to sigmoid * x, leaves a sigmoid with no quantize after it."""
    reason = node.meta.get("arm_reason")
    return reason if isinstance(reason, str) and reason.startswith("its lowering failed") else None


def _source_name(node: fx.Node, graph_id: int) -> str | None:
    """The name of the node of graph ``graph_id`` that ``node`` was traced from, if any."""
    sources = node.meta.get("from_node") or []
    while sources:
        source = sources[-1]
        if source.graph_id == graph_id:
            return source.name
        sources = source.from_node
    return None


def int16_nodes(model: fx.GraphModule) -> set[str]:
    """Compute nodes of a converted model that read or write int16 activations."""
    def int16(n) -> bool:
        return isinstance(n, fx.Node) and "quantize_per" in str(n.target) and len(n.args) > 5 \
            and n.args[5] == torch.int16

    return {n.name for n in model.graph.nodes if n.op == "call_function" and "quantize_per" not in str(n.target)
            and (any(int16(a) for a in n.all_input_nodes) or any(int16(u) for u in n.users))}


def keep_int8_where_int16_stays_on_cpu(quantize: Callable[[Mapping[str, str]], fx.GraphModule],
                                       cpu_reasons: CpuReasons,
                                       reference: Callable[[], Mapping[str, str]]) -> fx.GraphModule:
    """``quantize(kept)`` (``kept``: {node name: reason}, those nodes int8), first with none kept,
    then with the int16 nodes ``cpu_reasons`` leaves on the CPU that ``reference()`` (the all-int8
    model's reasons, asked for only when some node is int16) does not, until none is new. The
    model's ``meta[KEPT_INT8_META]`` lists them."""
    kept: dict[str, str] = {}
    model = quantize(kept)
    for _ in range(MAX_ROUNDS):
        wide = int16_nodes(model)
        if not wide:
            break
        int8_cpu = reference()
        new = {n: r for n, r in cpu_reasons(model).items() if n in wide and n not in int8_cpu and n not in kept}
        if not new:
            break
        kept.update(new)
        model = quantize(kept)
    model.meta[KEPT_INT8_META] = dict(kept)
    return model
