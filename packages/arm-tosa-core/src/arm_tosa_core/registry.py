"""The operator registry: one entry per op family holds everything the toolkit knows about it.

An entry says which aten overloads it covers, which TOSA profiles it claims, an extra support rule
(returning a reason in words when a node cannot be lowered), whether exir must keep the op whole
(`preserve`), how the quantizer annotates it (`quant`), and how it lowers. The partitioner, the
quantizer and the lowering all read the same entry, so they cannot disagree.

`preserve` keeps an op whole through exir's decomposition when every node of it is supported: for a
better lowering (SDPA, linear, resize), or, with the extra flag `preserve_for_speed=True`, only to
spare exir a re-trace of the program (convolutions); the latter are decomposed as usual when the user
passes `additional_checks`, which name ops as exir decomposes them.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import Node

from .delegation import aten_key
from .specification import TosaSpecification

SupportRule = Callable[[Node, TosaSpecification], "str | None"]


class Quant:
    """How the PT2E quantizer annotates a family (the `quant` field of an entry).

    WEIGHTED: activation input, constant weight (per-channel), int32 bias, activation output.
    BINARY: every tensor input and the output get their own activation qparams.
    TABLE: one input, one output, each with qparams (INT lowers to a TABLE lookup).
    REDUCE: like TABLE, for averages/sums (INT accumulates in int32 and rescales).
    SHARED: output shares the input's qparams (data movement, max pooling): no requantization.
    ACTIVATION: a clamp; fused into the producer's output range when it follows a WEIGHTED or
    BINARY op, otherwise SHARED.
    """

    WEIGHTED = "weighted"
    BINARY = "binary"
    TABLE = "table"
    REDUCE = "reduce"
    SHARED = "shared"
    ACTIVATION = "activation"
LowerRule = Callable[[Any, Node], Any]

MAX_RANK = 6  # TOSA level 8K


@dataclass
class OpEntry:
    """Everything about one op family; see module docstring."""

    name: str
    targets: tuple[Any, ...]
    lower: LowerRule
    support: SupportRule | None = None
    profiles: frozenset[str] = frozenset({"FP", "INT"})
    preserve: bool = False
    quant: Any = None  # a QuantPattern (see arm_quantizer): how PT2E annotates this family
    u55: bool = True  # runs inside the Ethos-U55/U65 operator subset
    quant_aliases: tuple[Any, ...] = ()  # ops the quantizer sees before exir decomposes them
    weight_axis: Any = 0  # per-channel axis of the weight (or a function of the node) for WEIGHTED
    extra: dict = field(default_factory=dict)
    int_lower: LowerRule | None = None  # the family's own INT rule (see register_int_rule)

    def int_path(self) -> str | None:
        """Why this family cannot lower quantized nodes, or None when it can."""
        if self.int_lower is not None or self.quant in (Quant.SHARED, Quant.TABLE, Quant.ACTIVATION):
            return None
        if self.quant is None:
            return f"{self.name} is not quantizable in this toolkit (it stays in float on the CPU)"
        return f"{self.name} has no integer lowering yet"


_ENTRIES: dict[Any, OpEntry] = {}
_FAMILIES: dict[str, OpEntry] = {}
_QUANT_ALIASES: dict[Any, OpEntry] = {}


def register_op(name: str, targets: Iterable[Any], *, support: SupportRule | None = None,
                profiles: Iterable[str] = ("FP", "INT"), preserve: bool = False, quant: Any = None,
                u55: bool = True, quant_aliases: Iterable[Any] = (), weight_axis: int = 0,
                **extra: Any) -> Callable[[LowerRule], LowerRule]:
    """Decorator: register the decorated lowering rule for `targets` (aten OpOverloads).

    `quant_aliases` are the export-time overloads (e.g. aten.conv2d) that exir later decomposes into
    `targets` (e.g. aten.convolution); the quantizer annotates them with this family's `quant` kind.
    """

    def wrap(fn: LowerRule) -> LowerRule:
        entry = OpEntry(name, tuple(targets), fn, support, frozenset(profiles), preserve, quant, u55,
                        tuple(quant_aliases), weight_axis, extra)
        for target in entry.targets:
            if target in _ENTRIES:
                raise RuntimeError(f"{target} registered twice ({_ENTRIES[target].name}, {name})")
            _ENTRIES[target] = entry
        for alias in entry.quant_aliases:
            _QUANT_ALIASES[alias] = entry
        _FAMILIES[name] = entry
        return fn

    return wrap


def register_int_rule(name: str) -> Callable[[LowerRule], LowerRule]:
    """Decorator: the INT-profile lowering of family `name` (defined next to its FP rule)."""

    def wrap(fn: LowerRule) -> LowerRule:
        _FAMILIES[name].int_lower = fn
        return fn

    return wrap


def register_quant_aliases(name: str, *aliases: Any) -> None:
    """Annotate the export-time ops `aliases` like family `name` (exir later decomposes them into it)."""
    entry = _FAMILIES[name]
    entry.quant_aliases += tuple(aliases)
    for alias in aliases:
        _QUANT_ALIASES[alias] = entry


#: The aten OpOverload behind an edge-dialect target (or the target itself): the registry's key.
aten_target = aten_key


def lookup(target: Any) -> OpEntry | None:
    _load_rules()
    return _ENTRIES.get(aten_target(target))


def quant_lookup(target: Any) -> OpEntry | None:
    """The family the quantizer uses for an export-time op (its own target or a quant alias)."""
    _load_rules()
    target = aten_target(target)
    return _ENTRIES.get(target) or _QUANT_ALIASES.get(target)


def entries() -> list[OpEntry]:
    _load_rules()
    return list(_FAMILIES.values())


def _load_rules() -> None:
    from . import ops  # noqa: F401  (importing registers every family)


# -- the generic part of every support decision -------------------------------------------------
_FLOAT = {torch.float32, torch.float16}
_INTEGER = {torch.int8, torch.int32, torch.int64}  # int64 is carried as INT32 (see builder)
_INDEX_INTEGERS = {torch.int32, torch.int64}

# TOSA 1.0's FP profile has 32-bit integers only for index arithmetic: ADD, SUB, MUL and INTDIV,
# CAST to and from float, GATHER indices, ARGMAX results, CONST and IDENTITY. Every other operator on
# int32 (comparisons, SELECT, MAXIMUM, CLAMP, NEGATE, RESHAPE, TRANSPOSE, SLICE, CONCAT, REDUCE_*,
# casts to or from bool) needs the INT profile; `tosa-opt --tosa-validate=strict-op-spec-alignment`
# rejects it (see profile_check.py). These families lower integer tensors with only those operators
# (for add/sub/mul see `_fp_integer_reason`; the indexing families check their values themselves).
_FP_INDEX_MATH = frozenset({"add", "sub", "mul", "div_rounding", "clone_cast", "embedding", "index_select", "argmax",
                            "amax_amin", "gather",
                            "index_tensor",
                            "tensor_factory"})
# Families whose lowering turns compile-time-constant inputs into a constant, emitting no operator.
_FOLDS_CONSTANTS = frozenset({"view", "permute", "transpose", "clone_cast", "expand", "repeat", "slice",
                              "select", "split", "unbind", "constant_pad", "tensor_factory", "compare",
                              "ne", "logical", "where"})


def legal_dtypes(spec: TosaSpecification) -> set[torch.dtype]:
    """The dtypes a tensor of any family may have under `spec`.

    Under a spec without the INT profile, int32/int64 tensors are legal only for index arithmetic
    (see `_FP_INDEX_MATH`), not in general.
    """
    dtypes = {torch.bool}
    if spec.support_float():
        dtypes |= _FLOAT | ({torch.bfloat16} if spec.support_extension("bf16") else set())
    if spec.support_integer():  # plain int16 tensors are PRO-INT (int16 *activations* need EXT-INT16)
        dtypes |= _INTEGER | {torch.int16}
    return dtypes


def is_compile_time_constant(node: Any, depth: int = 16) -> bool:
    """Whether `node` lowers to a compile-time constant: a parameter, buffer or lifted constant
    (`arm_constant`, set by the partitioner), or a constant-folding family applied to constants."""
    if not isinstance(node, Node):
        return True  # a python scalar
    if node.op == "get_attr":  # a tensor attribute of a control-flow sub-graph
        return True
    if node.op == "placeholder":
        return bool(node.meta.get("arm_constant", False))
    entry = lookup(node.target) if node.op == "call_function" else None
    if entry is None or entry.name not in _FOLDS_CONSTANTS or depth == 0:
        return False
    if entry.name == "tensor_factory":  # *_like factories read only their input's shape
        return True
    return all(is_compile_time_constant(a, depth - 1) for a in node.all_input_nodes)


def _lowered_metas(node: Node) -> list[Any]:
    """The tensors a lowering touches: every input, and the outputs that are used (max pooling's
    unused int64 indices, for example, are never computed)."""
    metas = [a.meta.get("val") for a in node.all_input_nodes]
    val = node.meta.get("val")
    if isinstance(val, (tuple, list)):
        used = {u.args[1] for u in node.users if u.target is operator.getitem}
        metas += [v for i, v in enumerate(val) if i in used]
    else:
        metas.append(val)
    return [m for m in metas if isinstance(m, torch.Tensor)]


def _fp_integer_reason(node: Node, entry: OpEntry, spec: TosaSpecification) -> str | None:
    """Why a node cannot be lowered with its int32/int64 tensors under a spec without the INT
    profile (see `_FP_INDEX_MATH`); None when it can, or when it has no such tensors."""
    metas = _lowered_metas(node)
    dtype = next((m.dtype for m in metas if m.dtype in _INDEX_INTEGERS), None)
    if dtype is None:
        return None
    if entry.name in _FOLDS_CONSTANTS and all(is_compile_time_constant(a) for a in node.all_input_nodes):
        return None  # folded at compile time: no integer operator is emitted
    if entry.name in ("add", "sub", "mul"):
        rank = len(node.meta["val"].shape)
        for a in node.all_input_nodes:
            val = a.meta.get("val")
            if val is not None and val.dtype in _INDEX_INTEGERS and val.dim() != rank \
                    and not is_compile_time_constant(a):
                return (f"{entry.name} broadcasting a rank-{val.dim()} {val.dtype} tensor to rank {rank} needs "
                        f"an int32 RESHAPE, which only the INT profile has; under {spec} it runs on the CPU")
        return None
    if entry.name == "clone_cast":
        kinds = {"float" if m.dtype.is_floating_point else "bool" if m.dtype == torch.bool else "int"
                 for m in metas}
        if "bool" not in kinds:
            return None  # CAST between int32 and float, or no operator at all (int64 <-> int32)
        return (f"casting between bool and {dtype} needs the INT profile; under {spec} it runs on the CPU")
    if entry.name in _FP_INDEX_MATH:
        return None
    return (f"{entry.name} on {dtype} tensors needs the INT profile (TOSA 1.0 FP has 32-bit integers only "
            f"for index arithmetic: add/sub/mul, casts to and from float, gather indices); under {spec} it "
            "runs on the CPU")


def tensor_metas(node: Node) -> list[tuple[str, Any]]:
    """Every tensor `node` reads or writes, named for a reason ("input 0 (x)", "output 1")."""
    metas = []
    for i, arg in enumerate(node.all_input_nodes):
        metas.append((f"input {i} ({arg.name})", arg.meta.get("val")))
    val = node.meta.get("val")
    for j, v in enumerate(val if isinstance(val, (tuple, list)) else [val]):
        metas.append((f"output {j}", v))
    return [(w, v) for w, v in metas if isinstance(v, torch.Tensor)]


def _activation_dtype(node: Node):
    """The integer type of a quantized node's activations (from the dequantize feeding it)."""
    for arg in node.all_input_nodes:
        if "dequantize_per_tensor" in str(arg.target) and len(arg.args) >= 6:
            return arg.args[5]
    return None


CONTROL_FLOW_OPS = {torch.ops.higher_order.cond: "COND_IF", torch.ops.higher_order.while_loop: "WHILE_LOOP"}


def is_control_flow(node: Node) -> bool:
    """Whether `node` is torch.cond or torch.while_loop (TOSA COND_IF / WHILE_LOOP)."""
    return node.op == "call_function" and node.target in CONTROL_FLOW_OPS


def _lowers_int16(entry: OpEntry, node: Node) -> bool:
    """Whether the family's INT rule takes int16 activations: its `int16` extra (a bool, or a function
    of the node), else by quant kind (TABLE: when its int16 table is within 1 LSB, see `_int16_table_reason`)."""
    flag = entry.extra.get("int16")
    if callable(flag):
        return bool(flag(node))
    if flag is not None:
        return bool(flag)
    if entry.quant == Quant.TABLE:
        return _int16_table_reason(entry, node) is None
    return entry.quant in (Quant.SHARED, Quant.ACTIVATION, Quant.REDUCE, Quant.BINARY)


def _int16_table_reason(entry: OpEntry, node: Node) -> str | None:
    """Why the interpolated int16 TABLE of `node` would be more than 1 LSB off fake-quant on some input
    code (built and checked on all 65,536 codes by `ops.table16`); None when it is within."""
    from .ops.table16 import int16_table_reason

    reason = int16_table_reason(node)
    return None if reason is None else f"{entry.name} ({aten_target(node.target).__name__}) with int16 activations: {reason}"


def unsupported_reason(node: Node, spec: TosaSpecification) -> str | None:
    """Why `node` cannot be lowered for `spec`, in words; None when it can."""
    entry = lookup(node.target)
    if entry is None:
        return f"operator {aten_target(node.target)} has no TOSA lowering in this toolkit"
    if node.target in CONTROL_FLOW_OPS:  # its own rule checks its operands and every sub-graph node
        return entry.support(node, spec)
    if not (entry.profiles & spec.profiles):
        return (f"{entry.name} is lowered only for the {'/'.join(sorted(entry.profiles))} profile(s), "
                f"not {str(spec)}")
    if spec.is_u55_subset and not entry.u55:
        return f"{entry.name} is outside the Ethos-U55/U65 operator subset"
    if entry.name in ("quantize", "dequantize"):  # float on one side by definition
        return entry.support(node, spec) if entry.support else None
    quantized = bool(node.meta.get("arm_quantized"))
    if quantized:
        if not spec.support_integer():
            return f"quantized {entry.name} needs the INT profile"
        reason = entry.int_path()
        if reason:
            return reason
        if _activation_dtype(node) == torch.int16 and not _lowers_int16(entry, node):
            if entry.quant == Quant.TABLE and entry.extra.get("int16") is None:
                return _int16_table_reason(entry, node)
            return f"{entry.name} with int16 activations has no integer lowering yet (int8 works)"
    legal = legal_dtypes(spec)
    if quantized:
        legal = legal | _FLOAT  # float in name only: these values are carried as integers
    fp_only = not spec.support_integer()
    for where, meta in tensor_metas(node):
        if meta.dtype.is_complex and entry.extra.get("complex_values"):
            pass  # carried inside the graph as its real view (the family's rule keeps it off the boundary)
        elif meta.dtype not in legal and not (fp_only and meta.dtype in _INDEX_INTEGERS):
            hint = ""
            if meta.dtype.is_floating_point and not spec.support_float():
                hint = " (quantize the model, or use a spec with the FP profile)"
            return f"{where} has dtype {meta.dtype}, not legal for {spec}{hint}"
        if meta.dim() > MAX_RANK:
            return f"{where} has rank {meta.dim()}; TOSA allows at most {MAX_RANK}"
        if any(not isinstance(d, int) for d in meta.shape):
            return f"{where} has a dynamic shape {tuple(meta.shape)}; TOSA 1.0 needs static shapes"
    reason = entry.support(node, spec) if entry.support is not None else None
    if reason is None and fp_only:  # the family's own reason first: it is more specific
        reason = _fp_integer_reason(node, entry, spec)
    return reason
