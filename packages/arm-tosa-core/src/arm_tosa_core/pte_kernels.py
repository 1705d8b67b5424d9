"""KernelCall execution for the .pte interpreter: ExecuTorch operator names -> torch ops.

A KernelCall's args are the operator schema's arguments in order (defaults included, out arguments
last), followed by the value(s) the call returns. Ops the runtime implements itself (symbolic
scalar prims, runtime views, dim-order copies) are interpreted here; everything else is looked up
as ``torch.ops.<namespace>.<name>.<overload>`` and called on the live values.
"""

from __future__ import annotations

import importlib
import math
import operator
from collections.abc import Callable
from typing import Any

import torch

from arm_tosa_core.pte_values import ValueTable, torch_dtype

_MEMORY_FORMATS = {
    0: torch.contiguous_format,
    1: torch.preserve_format,
    2: torch.channels_last,
    3: torch.channels_last_3d,
}
_LAYOUTS = {0: torch.strided, 1: torch.sparse_coo}

# Modules whose import registers the non-aten operators ExecuTorch programs name. They are
# imported only when a lookup misses, since some pull in large parts of exir.
_REGISTRIES = (
    "torch.ao.quantization.fx._decomposed",
    "executorch.exir.passes.dim_order_ops_registry",
    "executorch.exir.passes.executorch_prim_ops_registry",
)

# executorch_prim::<name>.Scalar: symbolic-shape arithmetic on Int/Double/Bool values.
_PRIM_SCALAR: dict[str, Callable[..., Any]] = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "floordiv": operator.floordiv,
    "truediv": operator.truediv,
    "mod": lambda a, b: int(a) % int(b),
    "eq": operator.eq,
    "gt": operator.gt,
    "lt": operator.lt,
    "ge": operator.ge,
    "le": operator.le,
    "neg": operator.neg,
    "ceil": math.ceil,
    "round": round,
    "trunc": math.trunc,
    "sym_float": float,
    "sym_int": int,
    "sym_max": max,
    "sym_min": min,
    "sym_not": operator.not_,
    "sym_ite": lambda b, t, f: t if b else f,
}


def _et_view(values: ValueTable, args: list[int]) -> None:
    # The runtime points `out` at self's data with the new sizes: an alias, not a copy.
    src, sizes, out = values.get(args[0]), values.get(args[1]), args[2]
    values.values[out] = src.view(sizes) if src.is_contiguous() else src.reshape(sizes)


def _et_copy_index(values: ValueTable, args: list[int]) -> None:
    # Map/scan loops stack per-iteration results: row `index` of the bounded output, which then
    # holds index + 1 rows.
    to, src, index = args[0], values.get(args[1]), values.get(args[2])
    full = values.full_tensor(to)
    full[index].copy_(src)
    values.values[to] = full[: index + 1]


def _dim_order_copy(values: ValueTable, args: list[int]) -> None:
    # (self, non_blocking, dim_order, out, ret): the out tensor was built with the target dtype
    # and dim order from the program, so a copy converts both.
    src = values.get(args[0])
    dim_order = values.get(args[2])
    out = args[3]
    if dim_order is not None and len(dim_order) != src.dim():
        raise ValueError(f"_to_dim_order_copy: dim_order {dim_order} does not fit rank {src.dim()}")
    target = values.get(out)
    if tuple(target.shape) == tuple(src.shape):
        target.copy_(src)
    else:
        values.store(out, src.to(target.dtype))


def _empty_dim_order(values: ValueTable, args: list[int]) -> None:
    # (size, dim_order, out, ret): the out tensor already exists; only its shape may change.
    size = values.get(args[0])
    out = values.get(args[2])
    if list(out.shape) != list(size):
        values.store(args[2], torch.empty(size, dtype=out.dtype))


_SPECIAL: dict[tuple[str, str], Callable[[ValueTable, list[int]], None]] = {
    ("executorch_prim::et_view", "default"): _et_view,
    ("executorch_prim::et_copy_index", "tensor"): _et_copy_index,
    ("dim_order_ops::_to_dim_order_copy", "out"): _dim_order_copy,
    ("dim_order_ops::_clone_dim_order", "out"): _dim_order_copy,
    ("dim_order_ops::_empty_dim_order", "out"): _empty_dim_order,
}


def call_kernel(values: ValueTable, name: str, overload: str, args: list[int]) -> None:
    """Executes one KernelCall of operator `name`.`overload` on the value table."""
    overload = overload or "default"
    special = _SPECIAL.get((name, overload))
    if special is not None:
        special(values, args)
        return
    ns, _, short = name.partition("::")
    if ns == "executorch_prim" and overload == "Scalar" and short in _PRIM_SCALAR:
        values.store(args[-1], _PRIM_SCALAR[short](*(values.get(i) for i in args[:-1])))
        return
    op = resolve_operator(name, overload)
    schema = op._schema
    n_args = len(schema.arguments)
    if len(args) < n_args:
        raise ValueError(
            f"malformed .pte: {name}.{overload} takes {n_args} arguments, the call passes {len(args)}"
        )
    named = {
        a.name: _convert(values, idx, a) for a, idx in zip(schema.arguments, args, strict=False)
    }
    outs = {a.name: idx for a, idx in zip(schema.arguments, args, strict=False) if a.is_out}
    returns = args[n_args:]
    if not _registered(op):
        twin = _functional_twin(op)
        if twin is None:
            raise NotImplementedError(
                f"operator {name}.{overload} is declared in torch but has no CPU kernel and no "
                "functional variant: import the library that implements it before run_pte"
            )
        result = _call(twin, {k: v for k, v in named.items() if k not in outs})
        results = result if isinstance(result, (tuple, list)) else (result,)
        for idx, part in zip(outs.values(), results, strict=True):
            values.store(idx, part)
        return
    result = _call(op, named)
    if outs:
        return  # the out variant wrote into the planned tensors it was given
    if len(returns) == 1:
        values.store(returns[0], result)
    elif returns:
        for idx, part in zip(returns, result, strict=True):
            values.store(idx, part)


def resolve_operator(name: str, overload: str) -> torch._ops.OpOverload:
    """The torch op for an ExecuTorch operator name ("ns::op") and overload ("" = default)."""
    ns, sep, short = name.partition("::")
    if not sep:
        raise NotImplementedError(f"operator '{name}' has no namespace; expected 'ns::name'")
    overload = overload or "default"
    op = _lookup(ns, short, overload)
    if op is None:
        _load_registries()
        op = _lookup(ns, short, overload)
    if op is None:
        raise NotImplementedError(
            f"operator {name}.{overload} is not a registered torch op, so run_pte cannot execute "
            "it: register it with torch.library (or import the module that does) before run_pte"
        )
    return op


def _lookup(ns: str, short: str, overload: str) -> torch._ops.OpOverload | None:
    packet = getattr(getattr(torch.ops, ns), short, None)
    if packet is None or overload not in _overload_names(packet):
        return None
    return getattr(packet, overload)


def _overload_names(packet: torch._ops.OpOverloadPacket) -> list[str]:
    # Asks the dispatcher: packet.overloads() is fixed when the packet is first created, so it
    # misses overloads a library registers later (executorch.kernels.quantized adds `.out`).
    names = torch._C._jit_get_operation(packet._qualified_op_name)[1]
    return [name or "default" for name in names]


_registries_loaded = False


def _load_registries() -> None:
    global _registries_loaded
    if _registries_loaded:
        return
    _registries_loaded = True
    for module in _REGISTRIES:
        try:
            importlib.import_module(module)
        except ImportError:  # an optional registry missing only narrows what can run
            pass


def _registered(op: torch._ops.OpOverload) -> bool:
    """Whether the op has a kernel the CPU dispatch can reach (schema-only out ops do not)."""
    keys = ("CPU", "CompositeExplicitAutograd", "CompositeImplicitAutograd")
    return any(torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), k) for k in keys)


def _functional_twin(op: torch._ops.OpOverload) -> torch._ops.OpOverload | None:
    """The overload of the same op that takes the same non-out arguments and returns its result."""
    want = [(a.name, str(a.type)) for a in op._schema.arguments if not a.is_out]
    packet = op.overloadpacket
    for name in _overload_names(packet):
        cand = getattr(packet, name)
        args = cand._schema.arguments
        if not any(a.is_out for a in args) and [(a.name, str(a.type)) for a in args] == want:
            if _registered(cand):
                return cand
    return None


def _call(op: torch._ops.OpOverload, named: dict[str, Any]) -> Any:
    pos = [named[a.name] for a in op._schema.arguments if not a.kwarg_only]
    kw = {a.name: named[a.name] for a in op._schema.arguments if a.kwarg_only}
    return op(*pos, **kw)


def _convert(values: ValueTable, idx: int, arg: torch._C.Argument) -> Any:
    """The Python value for schema argument `arg`, read from value `idx`."""
    kind = str(arg.real_type)
    optional = kind.startswith("Optional[")
    if optional:
        kind = kind[len("Optional[") : -1]
    if optional and values.is_absent(idx):
        return None
    val = values.get(idx)
    if val is None:
        return None
    if kind == "ScalarType":
        return torch_dtype(val)
    if kind == "MemoryFormat":
        return _MEMORY_FORMATS[val]
    if kind == "Layout":
        return _LAYOUTS[val]
    if kind == "Device":
        return torch.device("cpu")  # the interpreter runs every kernel on the host
    return val
