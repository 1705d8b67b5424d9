"""The operator registry: one entry per op family holds everything the toolkit knows about it.

An entry says which aten overloads it covers, which TOSA profiles it claims, an extra support rule
(returning a reason in words when a node cannot be lowered), whether exir must keep the op whole
(`preserve`), how the quantizer annotates it (`quant`), and how it lowers. The partitioner, the
quantizer and the lowering all read the same entry, so they cannot disagree.

`preserve` keeps an op whole through exir's decomposition when every node of it is supported: for a
better lowering (SDPA, linear, resize), or, with `preserve_for_speed=True`, only to
spare exir a re-trace of the program (convolutions); the latter are decomposed as usual when the user
passes `additional_checks`, which name ops as exir decomposes them.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx import Node

from .helpers.common import aten_target
from .helpers.qparams import activation_dtype, is_quantize
from .helpers.table16 import int16_table_reason
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
    BINARY op (not an int16 product whose family sets `int16_fuses_activation` False), otherwise SHARED.
    """

    WEIGHTED = "weighted"
    BINARY = "binary"
    TABLE = "table"
    REDUCE = "reduce"
    SHARED = "shared"
    ACTIVATION = "activation"
LowerRule = Callable[[Any, Node], Any]

MAX_RANK = 6  # TOSA level 8K


FpIntegerRule = Callable[[Node, "OpEntry", TosaSpecification], "str | None"]
TargetRule = Callable[[Node, str], "str | None"]


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
    int_lower: LowerRule | None = None  # the family's own INT rule (see register_int_rule)
    #: kept whole only to spare exir a re-trace (see module docstring); decomposed with `additional_checks`
    preserve_for_speed: bool = False
    #: called with the exported program before exir decomposes, when the family is kept whole (SDPA)
    prepare_preserve: Callable[[Any], Any] | None = None
    #: called with every exported program before exir decomposes; returns it, or a rewritten one that
    #: computes the same values (see `detach_copy_destinations`)
    prepare_program: Callable[[Any], Any] | None = None
    #: a float16 node lowers in float32 and rounds once (a chain of operators; see half_math.py)
    fp32_opmath: bool = False
    #: compile-time-constant inputs fold into a constant, emitting no operator
    folds_constants: bool = False
    #: the output is a compile-time constant whatever the inputs (*_like factories read only shapes)
    constant_output: bool = False
    #: int32/int64 tensors lower with the FP profile's index arithmetic only (see `legal_dtypes`)
    fp_index_math: bool = False
    #: for an `fp_index_math` family, why a node's integer tensors still need the INT profile (or None)
    fp_integer_rule: FpIntegerRule | None = None
    #: whether the INT rule takes int16 activations: a bool, a function of the node, or None (by quant kind)
    int16: bool | Callable[[Node], bool] | None = None
    #: complex tensors are carried inside the graph as their real view (FFT)
    complex_values: bool = False
    #: a lifted constant input joins the quantized region unquantized (batch norm's statistics, a divisor)
    float_params: bool = False
    #: a comparison: quantized inputs share qparams, the bool result is not quantized
    bool_result: bool = False
    #: SHARED: how many leading positional args share the output's qparams (None: the first one)
    shared_inputs: int | None = None
    #: WEIGHTED: how many times the per-channel weight scales repeat along the bias (grouped transposed conv)
    bias_repeats: Callable[[Node], int] | None = None
    #: float on one side by definition (quantize/dequantize): no INT-region dtype checks, no INT rule swap
    quant_boundary: bool = False
    #: an indexing family: `(index argument, number of valid indices[, whether -count..-1 wrap])` of a
    #: node (see `int_range`)
    index_operand: Callable[[Node], tuple[Node, int] | tuple[Node, int, bool] | None] | None = None
    #: integer arithmetic whose int64 result TOSA computes in INT32 (add, sub, mul, sum): it can wrap where
    #: torch's int64 does not, so such a node lowers only where `int_range` proves its result within int32
    int64_arithmetic: bool = False
    #: REDUCE: the nodes whose output the quantizer gives its input's qparams (SHARED) instead of their own
    #: (global average pooling: then one int8 AVG_POOL2D that rounds once, as for max pooling)
    shares_qparams: Callable[[Node], bool] | None = None
    #: WEIGHTED: whether a clamp-like activation after an int16 (a16w8) product of this family carries the
    #: product's output qparams (fusion, as at int8). False: the product keeps its own output quantize and
    #: the activation shares it (a CLAMP on the codes), because the product's accumulator must be RESCALEd
    #: straight to its quantized output (Ethos-U85's 16-bit output multiplier, `int16_output_target`)
    int16_fuses_activation: bool = True
    #: per-target checks attached with `target_rule` (target name -> rules, in registration order)
    target_rules: dict[str, tuple[TargetRule, ...]] = field(default_factory=dict)

    def quant_kind(self, node: Node) -> Any:
        """How the quantizer annotates `node`: the family's `quant` kind, or SHARED where `shares_qparams`
        says so."""
        if self.shares_qparams is not None and self.shares_qparams(node):
            return Quant.SHARED
        return self.quant

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
                u55: bool = True, quant_aliases: Iterable[Any] = (), weight_axis: Any = 0,
                preserve_for_speed: bool = False, prepare_preserve: Callable[[Any], Any] | None = None,
                prepare_program: Callable[[Any], Any] | None = None,
                fp32_opmath: bool = False, folds_constants: bool = False, constant_output: bool = False,
                fp_index_math: bool = False, fp_integer_rule: FpIntegerRule | None = None,
                int16: bool | Callable[[Node], bool] | None = None, complex_values: bool = False,
                float_params: bool = False, bool_result: bool = False, shared_inputs: int | None = None,
                bias_repeats: Callable[[Node], int] | None = None, quant_boundary: bool = False,
                index_operand: Callable[[Node], Any] | None = None, int64_arithmetic: bool = False,
                shares_qparams: Callable[[Node], bool] | None = None,
                int16_fuses_activation: bool = True,
                **unknown: Any) -> Callable[[LowerRule], LowerRule]:
    """Decorator: register the decorated lowering rule for `targets` (aten OpOverloads).

    Every keyword is an `OpEntry` field (documented there). `quant_aliases` are the export-time
    overloads (e.g. aten.conv2d) that exir later decomposes into `targets` (e.g. aten.convolution);
    the quantizer annotates them with this family's `quant` kind. An unknown keyword is a TypeError
    (a misspelt property would otherwise be silently ignored).
    """
    if unknown:
        raise TypeError(f"register_op({name!r}): unknown keyword(s) {', '.join(sorted(unknown))}; "
                        f"valid keywords: {', '.join(REGISTER_OP_KEYWORDS)}")
    if fp_integer_rule is not None and not fp_index_math:
        raise TypeError(f"register_op({name!r}): fp_integer_rule refines fp_index_math; pass fp_index_math=True")

    def wrap(fn: LowerRule) -> LowerRule:
        entry = OpEntry(name, tuple(targets), fn, support=support, profiles=frozenset(profiles),
                        preserve=preserve, quant=quant, u55=u55, quant_aliases=tuple(quant_aliases),
                        weight_axis=weight_axis, preserve_for_speed=preserve_for_speed,
                        prepare_preserve=prepare_preserve, prepare_program=prepare_program,
                        fp32_opmath=fp32_opmath,
                        folds_constants=folds_constants, constant_output=constant_output,
                        fp_index_math=fp_index_math, fp_integer_rule=fp_integer_rule, int16=int16,
                        complex_values=complex_values, float_params=float_params, bool_result=bool_result,
                        shared_inputs=shared_inputs, bias_repeats=bias_repeats, quant_boundary=quant_boundary,
                        index_operand=index_operand, int64_arithmetic=int64_arithmetic,
                        shares_qparams=shares_qparams, int16_fuses_activation=int16_fuses_activation)
        for target in entry.targets:
            if target in _ENTRIES:
                raise RuntimeError(f"{target} registered twice ({_ENTRIES[target].name}, {name})")
            _ENTRIES[target] = entry
        for alias in entry.quant_aliases:
            _QUANT_ALIASES[alias] = entry
        _FAMILIES[name] = entry
        return fn

    return wrap


REGISTER_OP_KEYWORDS = tuple(p.name for p in inspect.signature(register_op).parameters.values()
                             if p.kind is inspect.Parameter.KEYWORD_ONLY)


def register_int_rule(name: str) -> Callable[[LowerRule], LowerRule]:
    """Decorator: the INT-profile lowering of family `name` (defined next to its FP rule)."""

    def wrap(fn: LowerRule) -> LowerRule:
        _FAMILIES[name].int_lower = fn
        return fn

    return wrap


def target_rule(targets: str | Iterable[str], *families: str) -> Callable[[TargetRule], TargetRule]:
    """Decorator: attach the decorated check to each of `families` for `targets` (e.g. "ethos-u55").

    A target package (above the core) states what its compiler cannot take per family this way; the
    rule is `rule(node, target_family) -> reason | None` and lives in `OpEntry.target_rules`. A family
    name that is not registered fails here, at import, rather than silently never matching.
    """
    targets = (targets,) if isinstance(targets, str) else tuple(targets)
    unknown = [f for f in families if f not in _FAMILIES]
    if not families or not targets or unknown:
        raise ValueError(f"target_rule({', '.join(targets)}): no op family named {', '.join(unknown) or '(none given)'}; "
                         f"registered families: {', '.join(sorted(_FAMILIES))}")

    def wrap(rule: TargetRule) -> TargetRule:
        for family in families:
            rules = _FAMILIES[family].target_rules
            for target in targets:
                rules[target] = rules.get(target, ()) + (rule,)
        return rule

    return wrap


# -- lowering a sub-graph ------------------------------------------------------------------------
NodeLowering = Callable[[Any, Node], None]
OutputLowering = Callable[[Any, Any], Any]
_GRAPH_LOWERING: dict[str, Any] = {}


def register_graph_lowering(lower_node: NodeLowering, emit_outputs: OutputLowering) -> None:
    """Called once by lowering.py: how one node lowers into a context, and how values become a graph's
    outputs. Control-flow families lower their sub-graphs with these (ops/ sit below the lowering)."""
    _GRAPH_LOWERING.update(lower_node=lower_node, emit_outputs=emit_outputs)


def graph_lowering() -> tuple[NodeLowering, OutputLowering]:
    """(lower_node, emit_outputs) as registered by lowering.py."""
    return _GRAPH_LOWERING["lower_node"], _GRAPH_LOWERING["emit_outputs"]


def register_quant_aliases(name: str, *aliases: Any) -> None:
    """Annotate the export-time ops `aliases` like family `name` (exir later decomposes them into it)."""
    entry = _FAMILIES[name]
    entry.quant_aliases += tuple(aliases)
    for alias in aliases:
        _QUANT_ALIASES[alias] = entry


def lookup(target: Any) -> OpEntry | None:
    return _ENTRIES.get(aten_target(target))


def quant_lookup(target: Any) -> OpEntry | None:
    """The family the quantizer uses for an export-time op (its own target or a quant alias)."""
    target = aten_target(target)
    return _ENTRIES.get(target) or _QUANT_ALIASES.get(target)


def entries() -> list[OpEntry]:
    """Every registered family (the package's `__init__` imports `ops`, which registers them all)."""
    return list(_FAMILIES.values())


def family(name: str) -> OpEntry:
    """The family registered as `name` (KeyError naming the registered ones when there is none)."""
    if name not in _FAMILIES:
        raise KeyError(f"no op family named {name!r}; registered families: {', '.join(sorted(_FAMILIES))}")
    return _FAMILIES[name]


# -- the generic part of every support decision -------------------------------------------------
_FLOAT = {torch.float32, torch.float16}
_INTEGER = {torch.int8, torch.int32, torch.int64}  # int64 is carried as INT32 (see builder)
INDEX_INTEGERS = {torch.int32, torch.int64}

# TOSA 1.0's FP profile has 32-bit integers only for index arithmetic: ADD, SUB, MUL and INTDIV,
# CAST to and from float, GATHER indices, ARGMAX results, CONST and IDENTITY. Every other operator on
# int32 (comparisons, SELECT, MAXIMUM, CLAMP, NEGATE, RESHAPE, TRANSPOSE, SLICE, CONCAT, REDUCE_*,
# casts to or from bool) needs the INT profile; `tosa-opt --tosa-validate=strict-op-spec-alignment`
# rejects it (see profile_check.py). Families marked `fp_index_math` lower integer tensors with only
# those operators (add/sub/mul and clone_cast narrow it with their `fp_integer_rule`; the indexing
# families check their values themselves).


def legal_dtypes(spec: TosaSpecification) -> set[torch.dtype]:
    """The dtypes a tensor of any family may have under `spec`.

    Under a spec without the INT profile, int32/int64 tensors are legal only for index arithmetic
    (families marked `fp_index_math`), not in general.
    """
    dtypes = {torch.bool}
    if spec.support_float():
        dtypes |= _FLOAT | ({torch.bfloat16} if spec.support_extension("bf16") else set())
    if spec.support_integer():  # plain int16 tensors are PRO-INT (int16 *activations* need EXT-INT16)
        dtypes |= _INTEGER | {torch.int16}
    return dtypes


def is_compile_time_constant(node: Any, depth: int = 64) -> bool:
    """Whether `node` lowers to a compile-time constant: a parameter, buffer or lifted constant
    (`arm_constant`, set by the partitioner), or a constant-folding family applied to constants
    (`constant_folding.py` evaluates those; `depth` bounds the chain, e.g. T5's relative-position
    buckets are ~20 operators from their `arange`)."""
    return _compile_time(node, depth, {})


def _compile_time(node: Any, depth: int, memo: dict) -> bool:
    if not isinstance(node, Node):
        return True  # a python scalar
    if node in memo:
        return memo[node]
    if node.op == "get_attr":  # a tensor attribute of a control-flow sub-graph
        return True
    if node.op == "placeholder":
        return bool(node.meta.get("arm_constant", False))
    entry = lookup(node.target) if node.op == "call_function" else None
    if entry is None or not entry.folds_constants or depth == 0 or node.meta.get("arm_quantized"):
        result = False
    elif entry.constant_output:  # *_like factories read only their input's shape
        result = True
    else:
        result = all(_compile_time(a, depth - 1, memo) for a in node.all_input_nodes)
    memo[node] = result
    return result


# -- integer value ranges ------------------------------------------------------------------------
FP32_EXACT = 1 << 24  # every integer of magnitude up to this is exact in float32
#: placeholder meta: `(lo, hi)` of an integer constant whose values are fixed when the program lowers
CONSTANT_RANGE_KEY = "arm_int_values"


def note_constant_range(node: Node, value: Any, mutated: bool) -> None:
    """Record on a parameter / buffer / lifted-constant placeholder the range of its integer values,
    which `int_range` then takes as the node's definition (e.g. the quantizer folds transformers'
    `arange(n)` positions into a buffer, and only the buffer's values bound them). A buffer the
    program writes (`mutated`) holds other values on later calls, so it gets no range."""
    node.meta.pop(CONSTANT_RANGE_KEY, None)
    bounds = None if mutated else _values_range(value)
    if bounds is not None:
        node.meta[CONSTANT_RANGE_KEY] = bounds


def _values_range(value: Any) -> tuple[int, int] | None:
    """(min, max) of an integer constant tensor; None for anything else, or a FakeTensor stand-in that did not
    keep its (small) real value."""
    if isinstance(value, FakeTensor):
        value = value.constant
    if not isinstance(value, torch.Tensor) or isinstance(value, FakeTensor) or value.dtype not in INDEX_INTEGERS \
            or not value.numel():
        return None
    return int(value.min()), int(value.max())


def int_range(node: Any) -> tuple[int, int] | None:
    """The values an integer tensor provably takes, `(lo, hi)` inclusive, or None when unknown.

    Used where TOSA 1.0's FP profile lacks an int32 operator (RESHAPE, TRANSPOSE, comparisons, ...) and
    a rule could compute on the values as float32 instead, which is exact only within +-2^24
    (`FP32_EXACT`).

    Assumes the program is run only on inputs for which eager PyTorch does not raise. Then a value is
    bounded by any one of its *uses* that constrains every element: an index operand of an indexing
    family (its entry's `index_operand`: embedding rows, gather / index_select / index_copy along a dim
    of size K) holds values in [0, K), since torch raises on any other (so token ids are bounded by the
    vocabulary, cache positions by the cache length); a view, an integer-to-integer copy or a `copy_`
    source keeps every element, so it is bounded as its result is; `x + c` with c bounded by its
    definition bounds x by the sum's range minus c's. Several such uses intersect. A value is also
    bounded by its *definition*: `arange` by its ends, a python int by itself, a constant (parameter,
    buffer the program never writes, lifted constant) by its values (`note_constant_range`), add/sub by their
    operands, data movement (select, slice, views, casts, copy) by its source. Anything else (a
    program input with no bounding use, a float cast) is unknown: None, and the caller keeps the node
    on the CPU with a reason rather than risk a rounded index. Guarantees: never a range narrower than
    the values eager accepts.
    """
    if isinstance(node, bool) or not isinstance(node, (int, Node)):
        return None
    if isinstance(node, int):
        return (node, node)
    return _int_range(node, 24, frozenset())


def _int_range(node: Any, depth: int, path: frozenset) -> tuple[int, int] | None:
    if isinstance(node, bool) or not isinstance(node, (int, Node)):
        return None
    if isinstance(node, int):
        return (node, node)
    if node.op == "get_attr":  # a tensor attribute of a control-flow sub-graph: its own values
        return _values_range(getattr(node.graph.owning_module, node.target, None))
    if depth == 0 or node in path or not _is_integer_tensor(node):
        return None
    path = path | {node}
    return _intersect(_range_from_definition(node, depth - 1, path), _range_from_uses(node, depth - 1, path))


def _is_integer_tensor(node: Node) -> bool:
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.dtype in INDEX_INTEGERS


def _intersect(a: tuple[int, int] | None, b: tuple[int, int] | None) -> tuple[int, int] | None:
    if a is None or b is None:
        return a if b is None else b
    return max(a[0], b[0]), min(a[1], b[1])


def _range_from_uses(node: Node, depth: int, path: frozenset) -> tuple[int, int] | None:
    bounds = None
    for user in node.users:
        entry = lookup(user.target) if user.op == "call_function" else None
        found = None
        if entry is None:
            continue
        if entry.index_operand is not None:
            operand = entry.index_operand(user)
            if operand is not None and operand[0] is node:  # (index, count[, negative indices wrap])
                found = (-operand[1] if len(operand) > 2 and operand[2] else 0, operand[1] - 1)
        elif not _keeps_integers(user):
            pass
        elif entry.name in ("view", "clone_cast") and user.args[0] is node:
            found = _int_range(user, depth, path)
        elif entry.name == "copy" and len(user.args) > 1 and user.args[1] is node:
            found = _int_range(user, depth, path)  # copy_(dst, src): every src element, broadcast
        elif entry.name in ("add", "sub") and user.kwargs.get("alpha", 1) == 1:
            found = _operand_of_sum(user, node, depth, path)
        bounds = _intersect(bounds, found)
    return bounds


def _operand_of_sum(user: Node, node: Node, depth: int, path: frozenset) -> tuple[int, int] | None:
    """x's range from `y = x + c` (or x - c, c - x) when y's and c's ranges are known."""
    if len(user.args) < 2 or (user.args[0] is node) == (user.args[1] is node) or not user.meta["val"].numel():
        return None
    total = _int_range(user, depth, path)
    other_arg = user.args[1] if user.args[0] is node else user.args[0]
    other = (other_arg, other_arg) if isinstance(other_arg, int) and not isinstance(other_arg, bool) else \
        _range_from_definition(other_arg, depth, path) if isinstance(other_arg, Node) else None
    if total is None or other is None:
        return None
    if lookup(user.target).name == "add":
        return total[0] - other[1], total[1] - other[0]
    if user.args[0] is node:  # x - c
        return total[0] + other[0], total[1] + other[1]
    return other[0] - total[1], other[1] - total[0]  # c - x


_MOVES = ("view", "clone_cast", "select", "slice", "permute", "transpose", "expand")


def _range_from_definition(node: Node, depth: int, path: frozenset) -> tuple[int, int] | None:
    if node.op == "placeholder":  # a constant's own values (`note_constant_range`), else a program input
        return node.meta.get(CONSTANT_RANGE_KEY)
    if node.op != "call_function" or not _is_integer_tensor(node):
        return None
    entry = lookup(node.target)
    name = entry.name if entry is not None else str(node.target)
    if "arange" in str(node.target):
        ends = [a for a in node.args if not isinstance(a, bool)]
        if not all(isinstance(a, int) for a in ends) or not node.meta["val"].numel():
            return None
        values = range(*ends)
        return min(values[0], values[-1]), max(values[0], values[-1])
    if aten_target(node.target) is torch.ops.aten.full.default and isinstance(node.args[1], int):
        return node.args[1], node.args[1]  # bool is an int too: True fills 1
    if entry is None:
        return None
    if name in _MOVES:
        return _int_range(node.args[0], depth, path)
    if name == "copy" and len(node.args) > 1:
        return _int_range(node.args[1], depth, path)
    if name in ("add", "sub") and len(node.args) == 2 and node.kwargs.get("alpha", 1) == 1:
        a, b = (_int_range(x, depth, path) for x in node.args)
        if a is None or b is None:
            return None
        return (a[0] + b[0], a[1] + b[1]) if name == "add" else (a[0] - b[1], a[1] - b[0])
    if name == "clamp" and all(isinstance(b, int) and not isinstance(b, bool) for b in node.args[1:3]) \
            and len(node.args) == 3 and node.args[1] <= node.args[2]:
        return node.args[1], node.args[2]  # torch's clamp: within [min, max] whatever its input
    if name == "mul" and len(node.args) == 2:
        a, b = (_int_range(x, depth, path) for x in node.args)
        if a is None or b is None:
            return None
        corners = [x * y for x in a for y in b]
        return min(corners), max(corners)
    if name == "sum_mean" and isinstance(node.args[0], Node) and node.meta["val"].numel():
        source = node.args[0]
        terms = source.meta["val"].numel() // node.meta["val"].numel()
        dtype = source.meta["val"].dtype
        each = (0, 1) if dtype == torch.bool else (torch.iinfo(dtype).min, torch.iinfo(dtype).max) \
            if dtype in (torch.int8, torch.int16, torch.uint8) else _int_range(source, depth, path)
        return None if each is None else (min(0, each[0]) * terms, max(0, each[1]) * terms)
    return None


def _keeps_integers(node: Node) -> bool:
    """A view of its first input, a copy to another integer dtype or a `copy_` into an integer tensor
    (every element kept, unchanged when in range), or an integer sum."""
    entry = lookup(node.target)
    if entry is None or not _is_integer_tensor(node):
        return False
    return entry.name in ("view", "clone_cast", "copy", "add", "sub")


_INT32_RANGE = (-(1 << 31), (1 << 31) - 1)


def _int64_arithmetic_reason(node: Node, entry: OpEntry) -> str | None:
    """Why an `int64_arithmetic` node cannot compute its int64 result in INT32, or None."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dtype != torch.int64 or not val.numel():
        return None
    bounds = int_range(node)
    if bounds is not None and _INT32_RANGE[0] <= bounds[0] and bounds[1] <= _INT32_RANGE[1]:
        return None
    known = "are not bounded by constants, shapes or index uses" if bounds is None else f"reach {bounds}"
    return (f"{entry.name} computes its int64 result in the INT32 that TOSA carries int64 in, which would wrap "
            f"past +-2^31 where torch does not; its values {known}, so it runs on the CPU")


def fp_movable_integers(node: Node, entry: OpEntry, spec: TosaSpecification) -> str | None:
    """An `fp_integer_rule` for data movement: int32/int64 values move as float32 under TOSA FP when
    `int_range` proves them within +-2^24; otherwise a reason."""
    source = node.args[0]
    bounds = int_range(source)
    if bounds is not None and max(abs(bounds[0]), abs(bounds[1])) <= FP32_EXACT:
        return None
    dtype = source.meta["val"].dtype if isinstance(source, Node) else "integer"
    known = "are unknown" if bounds is None else f"reach {bounds}"
    return (f"{entry.name} on {dtype} tensors needs the INT profile: TOSA 1.0 FP has 32-bit integers only for "
            "index arithmetic, and moving them as float32 is exact only for values provably within +-2^24 "
            f"(e.g. token ids used as embedding indices); the values of {getattr(source, 'name', source)} "
            f"{known}, so under {spec} it runs on the CPU")


def exact_in_float32(native: FpIntegerRule | None = None, *, moves: bool = False) -> FpIntegerRule:
    """An `fp_integer_rule`: `native` (the family's own FP-profile integer rule; None: it has no int32
    operator under FP), and where that refuses, None when `int_range` proves the node's integers within
    +-2^24, so it lowers on float32 copies of them (`integer_float_math`). `moves`: the family only
    moves or picks values, so its result's range is all that must be proved (select reads one element of
    a tensor whose other elements may be anything)."""

    def rule(node: Node, entry: OpEntry, spec: TosaSpecification) -> str | None:
        reason = native(node, entry, spec) if native is not None else _int_profile_reason(node, entry, spec)
        if reason is None:
            return None
        tensors = [node] if moves else [node, *node.all_input_nodes]
        unknown = []
        for t in tensors:
            val = t.meta.get("val")
            if not isinstance(val, torch.Tensor) or val.dtype not in INDEX_INTEGERS or is_compile_time_constant(t):
                continue
            bounds = int_range(t)
            if bounds is None or max(abs(bounds[0]), abs(bounds[1])) > FP32_EXACT:
                unknown.append(t.name)
        if not unknown:
            return None
        return (f"{reason} (computing on the values as float32 would be exact only where they are provably "
                f"within +-2^24; those of {', '.join(unknown)} are not)")

    rule.native_reason = native or _int_profile_reason
    return rule


def lowered_metas(node: Node) -> list[Any]:
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
    profile (see `fp_index_math`); None when it can, or when it has no such tensors."""
    metas = lowered_metas(node)
    dtype = next((m.dtype for m in metas if m.dtype in INDEX_INTEGERS), None)
    if dtype is None:
        return None
    if entry.folds_constants and all(is_compile_time_constant(a) for a in node.all_input_nodes):
        return None  # folded at compile time: no integer operator is emitted
    if entry.fp_integer_rule is not None:
        return entry.fp_integer_rule(node, entry, spec)
    if entry.fp_index_math:
        return None
    return _int_profile_reason(node, entry, spec)


def _int_profile_reason(node: Node, entry: OpEntry, spec: TosaSpecification) -> str | None:
    dtype = next((m.dtype for m in lowered_metas(node) if m.dtype in INDEX_INTEGERS), None)
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


CONTROL_FLOW_OPS = {torch.ops.higher_order.cond: "COND_IF", torch.ops.higher_order.while_loop: "WHILE_LOOP"}


def is_control_flow(node: Node) -> bool:
    """Whether `node` is torch.cond or torch.while_loop (TOSA COND_IF / WHILE_LOOP)."""
    return node.op == "call_function" and node.target in CONTROL_FLOW_OPS


def _lowers_int16(entry: OpEntry, node: Node) -> bool:
    """Whether the family's INT rule takes int16 activations: its `int16` field (a bool, or a function
    of the node), else by quant kind (TABLE: when its int16 table is within 1 LSB, see `_int16_table_reason`)."""
    flag = entry.int16
    if callable(flag):
        return bool(flag(node))
    if flag is not None:
        return bool(flag)
    if entry.quant == Quant.TABLE:
        return _int16_table_reason(entry, node) is None
    return entry.quant in (Quant.SHARED, Quant.ACTIVATION, Quant.REDUCE, Quant.BINARY)


def _int16_table_reason(entry: OpEntry, node: Node) -> str | None:
    """Why the interpolated int16 TABLE of `node` would be more than 1 LSB off fake-quant on some input
    code (built and checked on all 65,536 codes by `helpers.table16`); None when it is within."""
    reason = int16_table_reason(node)
    return None if reason is None else f"{entry.name} ({aten_target(node.target).__name__}) with int16 activations: {reason}"


def unsupported_reason(node: Node, spec: TosaSpecification, proven_int32: Collection[Node] = ()) -> str | None:
    """Why `node` cannot be lowered for `spec`, in words; None when it can. `proven_int32`: nodes whose int64
    result the caller proved within int32 by other means than `int_range` (a while_loop's counter, bounded
    by the loop's condition: `control_flow.loop_counters`)."""
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
    if entry.quant_boundary:  # float on one side by definition
        return entry.support(node, spec) if entry.support else None
    quantized = bool(node.meta.get("arm_quantized"))
    if quantized:
        if not spec.support_integer():
            return f"quantized {entry.name} needs the INT profile"
        reason = entry.int_path()
        if reason:
            return reason
        if activation_dtype(node) == torch.int16 and not _lowers_int16(entry, node):
            if entry.quant == Quant.TABLE and entry.int16 is None:
                return _int16_table_reason(entry, node)
            return f"{entry.name} with int16 activations has no integer lowering yet (int8 works)"
    if entry.folds_constants and not quantized and not entry.constant_output and node.all_input_nodes \
            and all(is_compile_time_constant(a) for a in node.all_input_nodes):
        return None  # evaluated at compile time (constant_folding.py): no operator, so no dtype limit
    legal = legal_dtypes(spec)
    if quantized:
        legal = legal | _FLOAT  # float in name only: these values are carried as integers
    fp_only = not spec.support_integer()
    for where, meta in tensor_metas(node):
        if meta.dtype.is_complex and entry.complex_values:
            pass  # carried inside the graph as its real view (the family's rule keeps it off the boundary)
        elif meta.dtype not in legal and not (fp_only and meta.dtype in INDEX_INTEGERS):
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
    if reason is None and entry.int64_arithmetic and not quantized and node not in proven_int32:
        reason = _int64_arithmetic_reason(node, entry)
    return reason


#: the most integer values a bounded integer's quantize looks up (`bounded_integer_cast`)
MAX_LOOKUP = 1 << 16


def _casts_to_float(node: Node) -> bool:
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.dtype.is_floating_point


def bounded_integer_cast(node: Node) -> tuple[int, int] | None:
    """`(lo, hi)` when `node` casts integers to float only to quantize them (every user a quantize) and
    `registry.int_range` proves them within MAX_LOOKUP values: transformers' RoPE positions
    (`position_ids.float()`, bounded by the cache they index). Their quantize then lowers as a lookup
    of codes computed at compile time (`ops.quantize`), so no float tensor and no CPU cast remain.
    None otherwise."""
    entry = lookup(node.target) if node.op == "call_function" else None
    if entry is None or entry.name != "clone_cast" or not _casts_to_float(node) or not node.users:
        return None
    source = node.args[0]
    val = source.meta.get("val") if isinstance(source, Node) else None
    if not isinstance(val, torch.Tensor) or val.dtype not in INDEX_INTEGERS:
        return None
    if not all(is_quantize(u) and "per_tensor" in str(u.target) for u in node.users):
        return None
    bounds = int_range(source)
    if bounds is None or bounds[1] - bounds[0] >= MAX_LOOKUP:
        return None
    return bounds
