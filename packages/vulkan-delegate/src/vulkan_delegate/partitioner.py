"""VulkanPartitioner: claims the nodes whose registry entry accepts them; the rest stay on the CPU with
a reason (`arm_tosa_core.delegation.record_reason`, shown by `partition_report`)."""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

import sympy
import torch
from executorch.exir.backend.canonical_partitioners.pattern_op_partitioner import (
    CapabilityBasedPartitioner,
)
from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
from executorch.exir.backend.utils import tag_constant_data
from torch._subclasses.fake_tensor import FakeTensor
from torch.export import ExportedProgram
from torch.fx import Node
from torch.fx.passes.operator_support import OperatorSupportBase

from arm_tosa_core.delegation import aten_key, record_reason

from .backend import BACKEND_ID, compile_specs
from .graph import INT32_MAX, INT32_MIN, contiguous_strides
from .int_range import fits_int32
from .lower import HOST_DTYPES, LoweringContext, constant_placeholders, dim_of, is_static_fill
from .ops.elementwise import INT32_PROOF_FAMILIES
from .registry import families, lookup
from .trial import _stand_in, trial_reason

_OPTIONS = {"force_fp16", "require_dynamic_shapes"}
_NO_COMPUTE = {operator.getitem}


def _op_name(target: Any) -> str:
    return str(aten_key(target))


def _dynamic_reason(node: Node) -> str | None:
    """Sizes must be integer polynomials of input dims with an upper bound (the arena is planned at it),
    those of the node's inputs too (a delegate input's size is evaluated by the runtime as well)."""
    vals = [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]
    for v in vals:
        for t in v if isinstance(v, list | tuple) else [v]:
            if not isinstance(t, torch.Tensor):
                continue
            for d in t.shape:
                if not isinstance(d, torch.SymInt) or d.node.expr.is_Integer:
                    continue
                expr = d.node.expr
                if not isinstance(sympy.expand(expr), sympy.Expr) or any(
                        not a.is_Symbol and not a.is_Integer and not a.is_Add and not a.is_Mul
                        for a in sympy.preorder_traversal(expr)):
                    return f"size {expr} is not a polynomial of the dynamic dims"
                env = d.node.shape_env
                for s in expr.free_symbols:
                    upper = env.var_to_range[s].upper
                    if not isinstance(upper, int | sympy.Integer):  # torch's int_oo claims is_finite
                        return (f"dynamic dim {s} has no upper bound; export with "
                                f"torch.export.Dim('{s}', max=N)")
    return None


def constant_nodes(ep: ExportedProgram) -> set[Node]:
    """Weights and the nodes computed only from weights (or from no tensor: a static arange) that the
    lowering folds at compile time: those whose value the payload can store (float32/float16, bool,
    int32, int64 within int32; the masks and position ids a transformer derives from aranges), and
    others read only by folded nodes. A fold needs every input folded too."""
    names = set(constant_placeholders(ep))
    consts: set[Node] = set()
    for n in ep.graph.nodes:
        if n.op == "placeholder" and n.name in names:
            consts.add(n)
        elif (n.op == "call_function" and n.target not in _NO_COMPUTE
              and (all(a in consts for a in n.all_input_nodes) if n.all_input_nodes else is_static_fill(n))):
            consts.add(n)
    values = LoweringContext(ep, fp16=False)  # evaluates folds, for the int64 range check
    folded = {n for n in consts if n.op == "placeholder"}
    for n in reversed(ep.graph.nodes):
        if n in consts and n.op == "call_function" and (
                _storable(n, values) or (n.users and all(u in folded for u in n.users))):
            folded.add(n)
    for n in ep.graph.nodes:  # a fold needs every input folded too (an int one may run on the CPU instead)
        if n in folded and n.op == "call_function" and any(a not in folded for a in n.all_input_nodes):
            folded.discard(n)
    return folded


def _storable(node: Node, values: LoweringContext) -> bool:
    """Whether a folded value can be a payload constant (int64 only within int32)."""
    v = node.meta.get("val")
    if not isinstance(v, torch.Tensor) or v.dtype not in HOST_DTYPES:
        return False
    if v.dtype != torch.int64:
        return True
    try:
        value = values.const_value(node)
        return value is not None and (value.numel() == 0 or (
            INT32_MIN <= int(value.min()) and int(value.max()) <= INT32_MAX))
    except Exception:  # noqa: BLE001  (fake weights at partition time: no values, so no int64 fold)
        return False


def _layout_reason(node: Node) -> str | None:
    """The runtime hands a delegate each tensor's bytes in the dim order the program plans for it; the
    lowering permutes a partition's inputs and outputs from and to that order (lower.py), read from the
    strides. A dynamic-shape tensor in another dim order has symbolic strides, whose order is not known
    at lowering: a node touching one stays on the CPU, where the kernels follow the dim order."""
    vals = [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]
    for v in vals:
        for t in v if isinstance(v, list | tuple) else [v]:
            if (isinstance(t, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in t.shape)
                    and [dim_of(s) for s in t.stride()] != contiguous_strides([dim_of(d) for d in t.shape])):
                return ("a dynamic-shape tensor in a non-contiguous dim order (channels-last): export it with "
                        "contiguous example inputs (x.contiguous()) or static shapes")
    return None


class _Support(OperatorSupportBase):
    """`ep` given (at partition time): a node the rules accept is also lowered on trial (trial.py)."""

    def __init__(self, allow: set[str] | None, block: set[str], consts: set[Node] = frozenset(),
                 ep: ExportedProgram | None = None) -> None:
        self.allow, self.block, self.consts, self.ep = allow, block, consts, ep
        self.refused: dict[Node, str] = {}  # claims withdrawn once the partitions were known

    def reason(self, node: Node) -> str | None:
        if node in self.refused:
            return self.refused[node]
        if node.target in _NO_COMPUTE or node in self.consts:
            return None
        name = _op_name(node.target)
        if name in self.block:
            return "in operator_blocklist"
        if self.allow is not None and name not in self.allow:
            return "not in operator_allowlist"
        fam = lookup(node.target)
        if fam is None:
            return f"no Vulkan shader for {name}"
        if fam.support is not None:
            why = fam.support(node)
            if why:
                return why
        why = _dynamic_reason(node)
        if why is None and self.ep is not None:
            why = trial_reason(self.ep, node)
        return why

    def is_node_supported(self, submodules, node: Node) -> bool:
        if node.op != "call_function":
            return False
        # dim orders are checked here, on the edge graph, not in ops_to_not_decompose: before decomposition a
        # view (the transpose feeding an SDPA) carries its strides, which say nothing of what the runtime plans
        return record_reason(node, self.reason(node) or _layout_reason(node))


def _int32_unproven(ep: ExportedProgram, partitions) -> dict[Node, str]:
    """Claimed int64 arithmetic whose int32 proof used values computed outside its own partition.

    The trial proves a bound from the whole program; the backend sees one partition, where a value
    made on the CPU (or in another partition) is a plain input of unknown range. Such a node must
    leave the partition, else its lowering raises. Each round only removes claims, so it ends."""
    values = LoweringContext(ep, fp16=False)

    def const_value(node: Node):
        # exir may hand partitioners fake weights: they stand in as the trial's do (trial.py), so this
        # check withdraws only what the partition boundary hides, not what the trial accepted.
        try:
            value = values.const_value(node)
            return _stand_in(value) if isinstance(value, FakeTensor) else value
        except Exception:  # noqa: BLE001  (a data-dependent fake shape: nothing proven from it)
            return None

    unproven = {}
    for p in partitions:
        inside = set(p.nodes)
        for n in p.nodes:
            fam = lookup(n.target)
            if fam is None or fam.name not in INT32_PROOF_FAMILIES:
                continue
            why = fits_int32(n, const_value, inside)
            if why:
                unproven[n] = why + " within its partition (an operand comes from the CPU)"
    return unproven


class VulkanPartitioner(Partitioner):
    """Partitioner of the Vulkan compute delegate (same signature as ExecuTorch's Vulkan docs).

    compile_options: {"force_fp16": bool (compute and store activations and weights in fp16; inputs
    and outputs stay fp32), "require_dynamic_shapes": bool (claim only nodes whose sizes the runtime
    can re-evaluate per call; every rule here can, so this only makes the check explicit)}.
    operator_blocklist / operator_allowlist: op names ("aten.relu.default") or overloads.
    """

    def __init__(self, compile_options: dict[str, Any] | None = None,
                 operator_blocklist: Iterable[Any] | None = None,
                 operator_allowlist: Iterable[Any] | None = None) -> None:
        options = dict(compile_options or {})
        unknown = set(options) - _OPTIONS
        if unknown:
            raise ValueError(f"unknown compile_options {sorted(unknown)}; valid: {sorted(_OPTIONS)}")
        self.compile_options = options
        self.delegation_spec = DelegationSpec(BACKEND_ID, compile_specs(bool(options.get("force_fp16"))))
        self.block = {_op_name(o) if not isinstance(o, str) else o for o in operator_blocklist or []}
        self.allow = None if operator_allowlist is None else {
            _op_name(o) if not isinstance(o, str) else o for o in operator_allowlist}

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        support = _Support(self.allow, self.block, constant_nodes(exported_program), exported_program)
        while True:
            partitions = CapabilityBasedPartitioner(exported_program.graph_module, support,
                                                    allows_single_node_partition=True).propose_partitions()
            unproven = _int32_unproven(exported_program, partitions)
            if not unproven:
                break
            support.refused.update(unproven)
        tags = {}
        for p in partitions:
            if all(n.target in _NO_COMPUTE for n in p.nodes):
                continue
            tag = f"vk{p.id}"
            for n in p.nodes:
                n.meta["delegation_tag"] = tag
            tags[tag] = self.delegation_spec
        tag_constant_data(exported_program)
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)

    def ops_to_not_decompose(self, ep: ExportedProgram):
        support = _Support(self.allow, self.block)
        keep = {t for f in families() for t in f.preserve}
        ops = {}
        for n in ep.graph.nodes:
            if n.op == "call_function" and n.target in keep:
                ops.setdefault(n.target, []).append(n)
        return [op for op, nodes in ops.items() if all(support.reason(n) is None for n in nodes)], None
