"""TOSAPartitioner: tags what the spec supports for delegation; everything else stays on the CPU.

Support comes from the op registry (`registry.unsupported_reason`) plus any user `additional_checks`
(e.g. executorch's DontPartition); then the node's own lowering rule is tried, and every proposed
partition is lowered once as the backend will (`trial_lowering`), so a claimed node always lowers:
a failure sends the node back to the CPU with the failure as its reason. Each node left on the CPU
gets its reason in `node.meta["arm_reason"]`, which `partition_report` shows.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence

import torch
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data
from torch._export.utils import is_buffer, is_lifted_tensor_constant, is_param
from torch._subclasses.fake_tensor import FakeTensor
from torch.export import ExportedProgram
from torch.fx import Node
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from . import registry
from .batch_norm_folding import fold_conv_batch_norm
from .compile_spec import TosaCompileSpec
from .delegation import REASON_KEY, record_reason
from .lowering import constant_of, is_mutated_buffer
from .quantized import duplicate_dequantize, mark_quantized_region
from .trial_lowering import partition_failure, trial_reason


def mark_constants(ep: ExportedProgram) -> None:
    """Flag placeholders that hold parameters, buffers or lifted constants (`meta["arm_constant"]`),
    and note the value range of the integer ones (`registry.note_constant_range`)."""
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            node.meta["arm_constant"] = bool(
                is_param(ep, node) or is_buffer(ep, node) or is_lifted_tensor_constant(ep, node))
            value = constant_of(ep, node) if node.meta["arm_constant"] else None
            registry.note_constant_range(node, value, is_mutated_buffer(ep, node))


class RegistrySupport(OperatorSupportBase):
    """Operator support from the registry for one spec, plus the user's extra checks."""

    def __init__(self, compile_spec: TosaCompileSpec, additional_checks: Sequence[OperatorSupportBase] = (),
                 target_check: Callable[[Node], str | None] | None = None) -> None:
        self.spec = compile_spec.tosa_spec
        self.additional_checks = list(additional_checks)
        self.target_check = target_check
        self.rejected: dict[Node, str] = {}  # decided after seeing the partitions
        self.program: ExportedProgram | None = None  # set: each supported node's lowering is tried
        self._trials: dict[Node, str | None] = {}

    def reason(self, node: Node) -> str | None:
        if node in self.rejected:
            return self.rejected[node]
        if node.target is operator.getitem:
            source = node.args[0]
            return None if source.meta.get(REASON_KEY) is None else "its source node stays on the CPU"
        reason = None
        if registry.is_control_flow(node) and self.target_check is not None:
            reason = self.target_check(node)  # a target without control flow says so first
        try:
            reason = reason or registry.unsupported_reason(node, self.spec)
        except Exception as exc:  # noqa: BLE001 - a support rule tripping on odd arguments
            reason = f"its support check failed, so it runs on the CPU: {exc}"
        if reason is None and self.target_check is not None:
            reason = self.target_check(node)
        if reason is None:
            for check in self.additional_checks:
                if not check.is_node_supported({}, node):
                    reason = f"excluded by {type(check).__name__}"
                    break
        if reason is None and self.program is not None:
            if node not in self._trials:
                self._trials[node] = trial_reason(self.program, node, self.spec)
            reason = self._trials[node]
        return reason

    def is_node_supported(self, submodules, node: Node) -> bool:
        if node.op != "call_function":
            return False
        return record_reason(node, self.reason(node))


class TOSAPartitioner(Partitioner):
    """An ExecuTorch partitioner delegating what `compile_spec` supports to TOSABackend.

    `additional_checks` accepts `OperatorSupportBase` instances (DontPartition, DontPartitionModule,
    DontPartitionName, or your own) that can only remove nodes from delegation.
    """

    backend_id = "TOSABackend"

    def __init__(self, compile_spec: TosaCompileSpec,
                 additional_checks: Sequence[OperatorSupportBase] | None = None) -> None:
        if not isinstance(compile_spec, TosaCompileSpec):
            raise TypeError(f"{type(self).__name__} needs a TosaCompileSpec (or a subclass), got "
                            f"{type(compile_spec).__name__}")
        self.compile_spec = compile_spec
        self.additional_checks = list(additional_checks or [])
        self.delegation_spec = DelegationSpec(self.backend_id, compile_spec.to_list())
        #: (`_state_signature`, integer constants) of each program of the lowering in progress
        self._integer_constants: list[tuple[frozenset, dict[str, torch.Tensor]]] = []
        self._partitioned = False  # a partition ran since the last preparation: the next one starts anew

    def target_check(self, node: Node) -> str | None:
        """Extra per-target constraints (subclasses override); None when the node is fine."""
        return None

    def own_reason(self, node: Node) -> str | None:
        """Why `node` stays on the CPU by its own rules (the registry's, the target's constraints,
        the user's checks), its neighbours not considered; None when those take it. Call it on a
        partitioned program (the quantized region is marked). Mixed precision uses it to tell an
        int16 node the target cannot take from one that only follows a neighbour to the CPU."""
        if node.op != "call_function" or node.target is operator.getitem:
            return None
        try:
            reason = registry.unsupported_reason(node, self.compile_spec.tosa_spec)
        except Exception as exc:  # noqa: BLE001 - as RegistrySupport.reason
            reason = f"its support check failed: {exc}"
        reason = reason or self.constraint_reason(node)
        for check in self.additional_checks if reason is None else ():
            if not check.is_node_supported({}, node):
                reason = f"excluded by {type(check).__name__}"
                break
        return reason

    def constraint_reason(self, node: Node) -> str | None:
        """The target's constraints on `node` alone: `target_check`, unless a subclass whose
        `target_check` also looks at neighbours overrides this."""
        return self.target_check(node)

    def support(self) -> RegistrySupport:
        return RegistrySupport(self.compile_spec, self.additional_checks, self.target_check)

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        self._partitioned = True
        signature = _state_signature(exported_program)
        _restore_integer_constants(exported_program, [record for key, record in self._integer_constants
                                                      if key <= signature])
        mark_constants(exported_program)
        if self.compile_spec.tosa_spec.support_integer():
            mark_quantized_region(exported_program.graph)
        support = self.support()
        support.program = exported_program
        order = {n: i for i, n in enumerate(exported_program.graph.nodes)}
        for _ in range(50):
            partitioner = CapabilityBasedPartitioner(exported_program.graph_module, support,
                                                     allows_single_node_partition=True)
            partitions = partitioner.propose_partitions()
            rejected = _stranded_quantized_nodes(partitions)
            for partition in partitions if not rejected else []:
                if _has_compute(partition.nodes):
                    rejected.update(partition_failure(exported_program, sorted(partition.nodes, key=order.get),
                                                      self.compile_spec.tosa_spec))
            if not rejected:
                break
            support.rejected.update(rejected)
        else:
            partitions = []  # never reached in practice: each round rejects at least one node
        tags = {}
        for partition in partitions:
            if not _has_compute(partition.nodes):
                continue
            tag = f"tag{partition.id}"
            for node in partition.nodes:
                node.meta["delegation_tag"] = tag
                if registry.is_control_flow(node):  # its sub-graphs travel with it into the delegate
                    for arg in node.all_input_nodes:
                        if arg.op == "get_attr":
                            arg.meta["delegation_tag"] = tag
            tags[tag] = self.delegation_spec
        tag_constant_data(exported_program)
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)

    def transform_for_pre_decomposition(self, exported_program: ExportedProgram) -> ExportedProgram:
        """Before exir decomposes: let families that are kept whole prepare the graph (e.g. SDPA), and
        give each dequantize user its own copy (see duplicate_dequantize).

        Inference batch norms after a convolution are folded into it first (a copy of the program;
        the one given is not changed), unless `additional_checks` might want to exclude them.
        """
        for entry in registry.entries():
            if entry.prepare_program is not None:
                exported_program = entry.prepare_program(exported_program)
        # one capture per program: exir prepares every method of a lowering before it partitions any, so
        # the first preparation after a partition starts the next lowering (records of earlier ones go)
        if self._partitioned:
            self._integer_constants, self._partitioned = [], False
        self._integer_constants.append((_state_signature(exported_program), _integer_constants(exported_program)))
        if not self.additional_checks:
            exported_program = fold_conv_batch_norm(exported_program)
        for entry in registry.entries():
            prepare = entry.prepare_preserve
            if entry.preserve and prepare is not None:
                prepare(exported_program)
        if self.compile_spec.tosa_spec.support_integer():
            duplicate_dequantize(exported_program.graph)
            exported_program.graph_module.recompile()
        return self._decompose_while_loop_bodies(exported_program)

    def _decompose_while_loop_bodies(self, ep: ExportedProgram) -> ExportedProgram:
        """Decompose now when a while_loop's graphs hold ops exir would decompose.

        exir (1.3) skips its decomposition pass when no graph it looks into holds an op of its table, and
        it looks into cond/map/scan graphs but not into while_loop's: a program whose top level holds
        only a while_loop (and quantize/dequantize) keeps e.g. `aten.sum.default` in the loop's graphs,
        which its Core ATen check then rejects. The ops this partitioner keeps whole stay whole."""
        table = torch.export.default_decompositions()
        if not any(n.op == "call_function" and n.target in table
                   for module in _while_loop_graphs(ep.graph_module) for n in module.graph.nodes):
            return ep
        for op in self.ops_to_not_decompose(ep)[0]:
            table.pop(op, None)
        return ep.run_decompositions(table)

    def ops_to_not_decompose(self, ep: ExportedProgram):
        """The ops exir should keep whole: registry families marked `preserve` whose every node in
        `ep` this partitioner will take.

        The check is made here, per op, rather than handed back to exir as a per-node filter: exir
        then needs one re-trace of the program instead of three (and none when nothing else is left to
        decompose), the largest part of compile time for a CNN. An op with even one node we cannot
        take is decomposed everywhere, which is always safe since its pieces lower too. With
        `additional_checks`, families kept whole only for speed (`preserve_for_speed`) are decomposed
        as exir would, so checks written against the decomposed ops still match.
        """
        mark_constants(ep)
        if self.compile_spec.tosa_spec.support_integer():
            mark_quantized_region(ep.graph)
        support = self.support()
        # user checks name ops as exir decomposes them (DontPartition(aten.convolution)): keep those
        # ops whole only when kept for a better lowering, not only for compile speed
        preservable = {t for entry in registry.entries() if entry.preserve
                       and not (self.additional_checks and entry.preserve_for_speed)
                       for t in entry.targets}
        # exir applies one table to every graph, and a node inside a cond/while_loop graph is not claimed
        # by itself (its HOP is, or stays on the CPU whole): an op kept whole there could stay non-core
        # in a graph left on the CPU, so ops found in control-flow graphs are decomposed everywhere
        preservable -= _control_flow_targets(ep)
        nodes_by_op: dict = {}
        for node in ep.graph.nodes:
            if node.op == "call_function" and node.target in preservable:
                nodes_by_op.setdefault(node.target, []).append(node)
        keep = [op for op, nodes in nodes_by_op.items() if all(support.reason(n) is None for n in nodes)]
        return keep, None


_MAX_CAPTURED = 1 << 20  # elements: position tables and masks, not weights


def _integer_constants(ep: ExportedProgram) -> dict[str, torch.Tensor]:
    """The program's integer and bool parameters, buffers and constants, by name.

    exir hands `partition` a copy whose state dict holds FakeTensors; the trial lowerings then see
    stand-ins, which is harmless for weights but not for the int64 buffers shape-only subgraphs fold
    (position ids, token types, a 2^40 offset): whether a folded value fits INT32 depends on them."""
    tensors = {**ep.state_dict, **ep.constants}
    return {k: v for k, v in tensors.items() if isinstance(v, torch.Tensor) and not v.dtype.is_floating_point
            and not v.dtype.is_complex and v.numel() <= _MAX_CAPTURED and not isinstance(v, FakeTensor)}


def _state_signature(ep: ExportedProgram) -> frozenset:
    """The names, shapes and dtypes of a program's parameters and buffers: what identifies it between
    its preparation and exir's faked copy in `partition` (which may hold more: constants exir lifts into
    buffers), so `partition` uses the records of programs whose signature is a subset of its own."""
    return frozenset((name, tuple(value.shape), value.dtype) for name, value in ep.state_dict.items()
                     if isinstance(value, torch.Tensor))


def _restore_integer_constants(ep: ExportedProgram, captured: list[dict[str, torch.Tensor]]) -> None:
    """Put the real values recorded by `_integer_constants` back into `partition`'s copy of the program
    (exir replaces that copy's state dict with the real one afterwards). `captured` holds the records of
    the programs that may be this one (methods of a multi-method program with the same parameters and
    buffers: `prefill` and `decode` both have a `_arm_folded_0`, of different shapes or values); a value is
    restored only where every record of the same name, shape and dtype agrees, else it stays a stand-in
    (unknown), never another method's."""
    for key, fake in list(ep.state_dict.items()):
        if not isinstance(fake, FakeTensor):
            continue
        reals = [c[key] for c in captured if key in c and c[key].shape == fake.shape and c[key].dtype == fake.dtype]
        if reals and all(torch.equal(r, reals[0]) for r in reals[1:]):
            ep.state_dict[key] = reals[0]


def _control_flow_targets(ep: ExportedProgram) -> set:
    """Targets of the call_function nodes of the program's control-flow graphs, at any depth."""
    return {n.target for name, module in ep.graph_module.named_modules()
            if name and isinstance(module, torch.fx.GraphModule)
            for n in module.graph.nodes if n.op == "call_function"}


def _while_loop_graphs(graph_module: torch.fx.GraphModule) -> list[torch.fx.GraphModule]:
    """The cond and body graphs of every while_loop in `graph_module` (at any depth), with the graphs
    nested inside them."""
    found = []
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.higher_order.while_loop:
            found += [m for a in node.args[:2] for m in getattr(graph_module, a.target).modules()
                      if isinstance(m, torch.fx.GraphModule)]
    for child in graph_module.children():
        if isinstance(child, torch.fx.GraphModule):
            found += _while_loop_graphs(child)
    return found


def _stranded_quantized_nodes(partitions) -> dict[Node, str]:
    """Quantized-region nodes whose float input was placed outside their partition.

    Such a node would receive a float tensor it can only handle as integers, so it is rejected and
    partitioning runs again (its neighbours then follow it to the CPU as needed).
    """
    stranded = {}
    for partition in partitions:
        members = set(partition.nodes)
        for node in members:
            if "dequantize" in str(node.target):
                # lowered as "the same integers with qparams": its float result must stay inside
                if any(user not in members for user in node.users):
                    stranded[node] = "its float result is used outside the partition, so it runs on the CPU"
                continue
            if not node.meta.get("arm_quantized"):
                continue
            for arg in node.all_input_nodes:
                val = arg.meta.get("val")
                if arg not in members and arg.op != "placeholder" and isinstance(val, torch.Tensor) \
                        and val.dtype.is_floating_point:
                    stranded[node] = (f"its dequantized input {arg.name} ended up outside this partition, "
                                      "so it runs in float on the CPU")
    return stranded


def _has_compute(nodes) -> bool:
    """A partition of only getitem nodes has nothing to run."""
    return any(n.target is not operator.getitem for n in nodes)


__all__ = ["TOSAPartitioner", "RegistrySupport", "mark_constants", "REASON_KEY"]
