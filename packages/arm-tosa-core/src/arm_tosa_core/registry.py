"""The operator registry: one entry per op family holds everything the toolkit knows about it.

An entry says which aten overloads it covers, which TOSA profiles it claims, an extra support rule
(returning a reason in words when a node cannot be lowered), whether exir must keep the op whole
(`preserve`), how the quantizer annotates it (`quant`), and how it lowers. The partitioner, the
quantizer and the lowering all read the same entry, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import Node

from .specification import TosaSpecification

SupportRule = Callable[[Node, TosaSpecification], "str | None"]
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
    extra: dict = field(default_factory=dict)


_ENTRIES: dict[Any, OpEntry] = {}
_FAMILIES: dict[str, OpEntry] = {}


def register_op(name: str, targets: Iterable[Any], *, support: SupportRule | None = None,
                profiles: Iterable[str] = ("FP", "INT"), preserve: bool = False, quant: Any = None,
                u55: bool = True, **extra: Any) -> Callable[[LowerRule], LowerRule]:
    """Decorator: register the decorated lowering rule for `targets` (aten OpOverloads)."""

    def wrap(fn: LowerRule) -> LowerRule:
        entry = OpEntry(name, tuple(targets), fn, support, frozenset(profiles), preserve, quant, u55, extra)
        for target in entry.targets:
            if target in _ENTRIES:
                raise RuntimeError(f"{target} registered twice ({_ENTRIES[target].name}, {name})")
            _ENTRIES[target] = entry
        _FAMILIES[name] = entry
        return fn

    return wrap


def aten_target(target: Any) -> Any:
    """The aten OpOverload behind an edge-dialect target (or the target itself)."""
    return getattr(target, "_op", target)


def lookup(target: Any) -> OpEntry | None:
    _load_rules()
    return _ENTRIES.get(aten_target(target))


def entries() -> list[OpEntry]:
    _load_rules()
    return list(_FAMILIES.values())


def _load_rules() -> None:
    from . import ops  # noqa: F401  (importing registers every family)


# -- the generic part of every support decision -------------------------------------------------
_FLOAT = {torch.float32, torch.float16}
_INTEGER = {torch.int8, torch.int32, torch.bool}


def legal_dtypes(spec: TosaSpecification) -> set[torch.dtype]:
    dtypes = {torch.bool, torch.int32, torch.int64}
    if spec.support_float():
        dtypes |= _FLOAT | ({torch.bfloat16} if spec.support_extension("bf16") else set())
    if spec.support_integer():
        dtypes |= _INTEGER | ({torch.int16} if spec.support_extension("int16") else set())
    return dtypes


def _tensor_metas(node: Node) -> list[tuple[str, Any]]:
    metas = []
    for i, arg in enumerate(node.all_input_nodes):
        metas.append((f"input {i} ({arg.name})", arg.meta.get("val")))
    val = node.meta.get("val")
    for j, v in enumerate(val if isinstance(val, (tuple, list)) else [val]):
        metas.append((f"output {j}", v))
    return [(w, v) for w, v in metas if isinstance(v, torch.Tensor)]


def unsupported_reason(node: Node, spec: TosaSpecification) -> str | None:
    """Why `node` cannot be lowered for `spec`, in words; None when it can."""
    entry = lookup(node.target)
    if entry is None:
        return f"operator {aten_target(node.target)} has no TOSA lowering in this toolkit"
    if not (entry.profiles & spec.profiles):
        return (f"{entry.name} is lowered only for the {'/'.join(sorted(entry.profiles))} profile(s), "
                f"not {str(spec)}")
    if spec.is_u55_subset and not entry.u55:
        return f"{entry.name} is outside the Ethos-U55/U65 operator subset"
    legal = legal_dtypes(spec)
    for where, meta in _tensor_metas(node):
        if meta.dtype not in legal:
            hint = ""
            if meta.dtype.is_floating_point and not spec.support_float():
                hint = " (quantize the model, or use a spec with the FP profile)"
            return f"{where} has dtype {meta.dtype}, not legal for {spec}{hint}"
        if meta.dim() > MAX_RANK:
            return f"{where} has rank {meta.dim()}; TOSA allows at most {MAX_RANK}"
        if any(not isinstance(d, int) for d in meta.shape):
            return f"{where} has a dynamic shape {tuple(meta.shape)}; TOSA 1.0 needs static shapes"
    if entry.support is not None:
        return entry.support(node, spec)
    return None
