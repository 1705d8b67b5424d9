"""Reductions over a contiguous run of dims (shader `reduce`), softmax (shader `softmax`, also used by
attention with a causal mask) and layer / RMS norm (shader `norm`). A row of at least ROW_MIN contiguous
elements gets a workgroup (`reduce_row`, `softmax_row`, `norm_row`: subgroup or shared-memory sums,
row_reduce.glsl) instead of one invocation looping over it."""

from __future__ import annotations

import os

import torch
from torch.fx import Node

from ..graph import VARIANT, numel
from ..opcodes import opcode
from ..registry import INT_VARIANTS, aten_key, float_tensors, register, tensor_dtypes

aten = torch.ops.aten
_REDUCE = {aten.mean.dim: "mean", aten.mean.default: "mean", aten.sum.dim_IntList: "sum",
           aten.amax.default: "max", aten.amin.default: "min"}


def _dims(node: Node) -> list[int]:
    """The reduced dims, sorted and non-negative. No dim, None and an empty list all mean every dim
    (torch: `x.sum()` is `sum(x, [])`, `amax(x)` is `amax(x, [])`)."""
    rank = node.args[0].meta["val"].dim()
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if dims is None or (isinstance(dims, list | tuple) and len(dims) == 0):
        return list(range(rank))
    dims = [dims] if isinstance(dims, int) else list(dims)
    return sorted(d % rank for d in dims) if rank else []


#: "0" at lowering: every softmax / norm / reduction keeps one invocation per row (the generic path)
ROW_REDUCE_ENV = "VKDG_ROW_REDUCE"
#: row_reduce.glsl's workgroup (ROW_LANES)
ROW_LANES = 64
#: shorter rows keep one invocation each: a workgroup's barriers cost more than the loop they save
ROW_MIN = 32
#: norm rows at least this long run `norm_row_wide` (256 lanes): at 64 lanes a single 4096-wide row is
#: latency-bound (34 us on the H100, 64 loads per lane per pass)
NORM_WIDE_MIN = 1024
NORM_WIDE_LANES = 256


def workgroup_per_row(red, inner) -> bool:
    """Whether rows of `red` elements (a symbolic length: assumed long), `inner` apart, get a workgroup."""
    return (isinstance(inner, int) and inner == 1 and (not isinstance(red, int) or red >= ROW_MIN)
            and os.environ.get(ROW_REDUCE_ENV) != "0")


def split3(shape: list, first: int, last: int) -> tuple:
    """(outer, reduced, inner) element counts around dims first..last."""
    return numel(shape[:first]), numel(shape[first:last + 1]), numel(shape[last + 1:])


def _reduce_support(node: Node) -> str | None:
    dims = _dims(node)
    if dims and dims != list(range(dims[0], dims[-1] + 1)):
        return f"reduction over non-adjacent dims {dims}"
    if node.kwargs.get("dtype") not in (None, torch.float32, torch.float16):
        return "reduction to another dtype"
    return float_tensors(node)


@register("reduce", list(_REDUCE), ["reduce", "reduce_row"], support=_reduce_support)
def lower_reduce(ctx, node: Node) -> None:
    x = ctx.inp(node.args[0])
    dims = _dims(node) or [0]  # a rank-0 input: one element, read as shape [1]
    y = ctx.out(node)
    outer, red, inner = split3(x.shape or [1], dims[0], dims[-1])
    if workgroup_per_row(red, inner):
        ctx.dispatch("reduce_row", [x, y], [opcode("reduce", _REDUCE[aten_key(node.target)]), outer, red, 1],
                     (outer * ROW_LANES,))
        return
    ctx.dispatch("reduce", [x, y], [opcode("reduce", _REDUCE[aten_key(node.target)]), outer, red, inner],
                 (outer * inner,))


ARGREDUCE = {aten.argmax.default: "argmax", aten.argmin.default: "argmin"}


def _arg_support(node: Node) -> str | None:
    return tensor_dtypes(torch.float32, torch.float16, torch.int32, torch.int64)(node)


@register("argreduce", list(ARGREDUCE), ["argreduce"], support=_arg_support, variants=INT_VARIANTS)
def lower_argreduce(ctx, node: Node) -> None:
    """argmax / argmin over one dim (keepdim or not), or over every element when dim is None."""
    x = ctx.inp(node.args[0])
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    y = ctx.out(node)
    shape = x.shape or [1]
    if dim is None:
        outer, red, inner = 1, numel(shape), 1
    else:
        outer, red, inner = split3(shape, dim % len(shape), dim % len(shape))
    ctx.dispatch("argreduce", [x, y], [opcode("argreduce", ARGREDUCE[aten_key(node.target)]), outer, red, inner],
                 (outer * inner,), variant=VARIANT[x.dtype])


def softmax(ctx, x, y, dim: int, log: bool = False, causal_q: int | None = None,
            masked_rows_zero: bool = False) -> None:
    """Softmax over `dim`; with `causal_q` (the query count), scores [.., q, kv] keep kv <= q (as torch).
    `masked_rows_zero` (attention): a row of only -inf scores gives 0, as torch's SDPA does (plain
    softmax gives NaN there, as torch.softmax does)."""
    outer, red, inner = split3(x.shape, dim, dim)
    if workgroup_per_row(red, inner):
        ctx.dispatch("softmax_row", [x, y], [outer, red, int(log), int(causal_q is not None),
                                             causal_q if causal_q is not None else 1, int(masked_rows_zero)],
                     (outer * ROW_LANES,))
        return
    ctx.dispatch("softmax", [x, y], [outer, red, inner, int(log), int(causal_q is not None),
                                     causal_q if causal_q is not None else 1, int(masked_rows_zero)],
                 (outer * inner,))


def _softmax_support(node: Node) -> str | None:
    if len(node.args) > 2 and node.args[2]:
        return "softmax with half_to_float"
    return float_tensors(node)


@register("softmax", [aten._softmax.default, aten._log_softmax.default], ["softmax", "softmax_row"],
          support=_softmax_support)
def lower_softmax(ctx, node: Node) -> None:
    x = ctx.inp(node.args[0])
    y = ctx.out(node)
    softmax(ctx, x, y, node.args[1] % max(len(x.shape), 1),
            log=aten_key(node.target) == aten._log_softmax.default)


def _ln_support(node: Node) -> str | None:
    if any(u.args[1] != 0 for u in node.users):
        return "layer norm mean/rstd outputs are used"
    return float_tensors(node)


def norm_row(ctx, tensors: list, push: list, rows, cols) -> None:
    """A workgroup per norm row (push as norm_row.comp's): 256 lanes for rows of NORM_WIDE_MIN or more
    (a symbolic length counts as long), 64 below."""
    if not isinstance(cols, int) or cols >= NORM_WIDE_MIN:
        ctx.dispatch("norm_row_wide", tensors, push, (rows * NORM_WIDE_LANES,))
    else:
        ctx.dispatch("norm_row", tensors, push, (rows * ROW_LANES,))


def norm(ctx, x, w, b, y, rows, cols, eps: float, has_w: bool, has_b: bool, rms: bool) -> None:
    """Layer (or RMS) norm of `rows` contiguous rows of `cols`."""
    push = [rows, cols, float(eps), int(has_w), int(has_b), int(rms)]
    if workgroup_per_row(cols, 1):
        norm_row(ctx, [x, w, b, y], [*push, 1, 0], rows, cols)
    else:
        ctx.dispatch("norm", [x, w, b, y], push, (rows, 1, 1))


@register("layer_norm", [aten.native_layer_norm.default], ["norm", "norm_row", "norm_row_wide"], support=_ln_support)
def lower_layer_norm(ctx, node: Node) -> None:
    x = ctx.inp(node.args[0])
    cols = numel(list(node.args[1]))
    w = ctx.inp(node.args[2]) if node.args[2] is not None else x
    b = ctx.inp(node.args[3]) if node.args[3] is not None else x
    y = ctx.g.new_tensor(x.shape)
    ctx.values[node] = [y, None, None]
    rows = numel(x.shape[:len(x.shape) - len(node.args[1])])
    norm(ctx, x, w, b, y, rows, cols, node.args[4], node.args[2] is not None, node.args[3] is not None, False)


def rms_norm_eps(node: Node) -> float:
    """An aten.rms_norm node's eps (None: float32's machine epsilon)."""
    eps = node.args[3] if len(node.args) > 3 and node.args[3] is not None else torch.finfo(torch.float32).eps
    return float(eps)


@register("rms_norm", [aten.rms_norm.default], ["norm", "norm_row", "norm_row_wide"], support=float_tensors,
          preserve=[aten.rms_norm.default])
def lower_rms_norm(ctx, node: Node) -> None:
    x = ctx.inp(node.args[0])
    shape = list(node.args[1])
    cols = numel(shape)
    w = ctx.inp(node.args[2]) if len(node.args) > 2 and node.args[2] is not None else x
    y = ctx.out(node)
    rows = numel(x.shape[:len(x.shape) - len(shape)])
    norm(ctx, x, w, w, y, rows, cols, rms_norm_eps(node), len(node.args) > 2 and node.args[2] is not None, False, True)
