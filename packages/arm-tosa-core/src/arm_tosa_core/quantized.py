"""The INT profile: quantization parameters on values, RESCALE, and the quantized region.

After PT2E `convert_pt2e`, every quantized edge is `quantize -> dequantize`. The INT lowering folds them:
a dequantize gives its int8 input tensor `qparams`; ops compute in integers (int32 accumulators carry
an `acc` scale); a quantize RESCALEs to its parameters, or passes through when they already match.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import numpy as np
import torch
from torch.fx import Graph, Node

from .builder import DType, Op, T, tosa_dtype
from .registry import aten_target

try:  # out-variants of quantize/dequantize, needed by to_executorch for the CPU-side boundary ops
    import executorch.kernels.quantized  # noqa: F401
except ImportError:  # pragma: no cover - executorch builds without the quantized kernels
    pass

qd = torch.ops.quantized_decomposed
QUANTIZE = {qd.quantize_per_tensor.default, qd.quantize_per_tensor.tensor}
DEQUANTIZE = {qd.dequantize_per_tensor.default, qd.dequantize_per_tensor.tensor,
              qd.dequantize_per_channel.default}


@dataclass(frozen=True)
class QParams:
    """Affine quantization: real = scale * (q - zero_point). Per-channel when `scale` is an array."""

    scale: float | np.ndarray
    zero_point: int
    dtype: torch.dtype  # int8 / int16, or int32 for accumulators
    qmin: int
    qmax: int
    axis: int | None = None  # logical channel axis of a per-channel scale

    @property
    def per_channel(self) -> bool:
        return isinstance(self.scale, np.ndarray) and self.scale.size > 1

    def same_as(self, other: QParams) -> bool:
        return (not self.per_channel and not other.per_channel and self.zero_point == other.zero_point
                and self.dtype == other.dtype and math.isclose(float(self.scale), float(other.scale),
                                                                rel_tol=1e-7))

    @staticmethod
    def accumulator(scale) -> QParams:
        return QParams(scale, 0, torch.int32, -(2**31), 2**31 - 1)


def target_of(node: Node):
    return aten_target(node.target)


def is_quantize(node) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and target_of(node) in QUANTIZE


def is_dequantize(node) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and target_of(node) in DEQUANTIZE


def qparams_of(node: Node, const_of=None) -> QParams:
    """QParams from a quantize/dequantize node's arguments (`const_of` resolves constant nodes)."""
    args = list(node.args)
    if target_of(node) is qd.dequantize_per_channel.default:
        scales, _zps, axis, qmin, qmax, dtype = args[1:7]
        value = const_of(scales) if const_of is not None else None
        if value is None:
            raise ValueError(f"per-channel scales {scales} of {node.name} are not constant")
        return QParams(np.asarray(value.double().numpy(), dtype=np.float64), 0, dtype, qmin, qmax, axis)
    scale, zp, qmin, qmax, dtype = args[1:6]
    return QParams(float(_const_scalar(scale)), int(_const_scalar(zp)), dtype, qmin, qmax)


def _const_scalar(arg):
    if isinstance(arg, Node):
        raise ValueError(f"quantization parameter {arg.name} is computed at run time (dynamic "
                         "quantization); TOSA needs constant scales")
    return arg


# -- RESCALE -----------------------------------------------------------------------------------
def multiplier_shift(scale: float, scale32: bool = True) -> tuple[int, int]:
    """TOSA's (multiplier, shift) with multiplier * 2^-shift == scale, shift in [2, 62]."""
    if scale <= 0:
        return 0, 2
    bits = 31 if scale32 else 15
    mantissa, exponent = math.frexp(scale)
    multiplier = round(mantissa * (1 << bits))
    shift = bits - exponent
    if multiplier == 1 << bits:
        multiplier //= 2
        shift -= 1
    while shift > 62:  # tiny scales: lose precision rather than break the range rule
        multiplier >>= 1
        shift -= 1
    while shift < 2:
        raise ValueError(f"rescale factor {scale} is too large for TOSA RESCALE")
    return multiplier, shift


def rescale(b, x: T, scale, in_zp: int, out_zp: int, out_dtype: DType,
            input_unsigned: bool = False) -> T:
    """Emit RESCALE: out = round(scale * (x - in_zp)) + out_zp, saturated to `out_dtype`.

    `scale` may be an array (per channel along the tensor's last axis).
    """
    import tosa_serializer as ts

    scales = np.atleast_1d(np.asarray(scale, dtype=np.float64))
    folded = _fold_widening(b, x, scales, in_zp, out_dtype)
    if folded is not None:  # RESCALE(acc -> int8) then RESCALE(int8 -> int32): one RESCALE from acc
        x, scales, in_zp = folded
    per_channel = scales.size > 1
    scale32 = x.dtype != DType.INT48
    pairs = [multiplier_shift(float(s), scale32) for s in scales]
    mult = b.const(np.array([p[0] for p in pairs]), DType.INT32 if scale32 else DType.INT16)
    shift = b.const(np.array([p[1] for p in pairs]), DType.INT8)
    zps = [b.const(np.array([in_zp]), x.dtype if x.dtype != DType.INT48 else DType.INT48),
           b.const(np.array([out_zp]), out_dtype)]
    out = b.op(Op.RESCALE, [x, mult, shift, *zps], x.shape, out_dtype, scale32,
               ts.RoundingMode.SINGLE_ROUND, per_channel, input_unsigned, False)
    b.rescales[out.name] = (x, scales, in_zp, out_zp)
    return out


def _fold_widening(b, x: T, scales: np.ndarray, in_zp: int, out_dtype: DType):
    """When `x` is itself a RESCALE of a wide accumulator and this RESCALE widens back to int32, return
    (accumulator, combined scales, its zero point). The int8 intermediate is skipped (it stays in the
    graph only if something else reads it), so the result may differ from a two-step rescale by the
    intermediate's rounding: at most one output LSB."""
    if not b.fold_rescales or out_dtype != DType.INT32 or x.dtype not in (DType.INT8, DType.INT16):
        return None
    info = b.rescales.get(x.name)
    if info is None:
        return None
    source, first_scales, first_in_zp, first_out_zp = info
    if source.dtype not in (DType.INT32, DType.INT48) or first_out_zp != in_zp:
        return None
    if scales.size > 1 and first_scales.size > 1 and scales.size != first_scales.size:
        return None
    return source, first_scales * scales, first_in_zp


def requantize(ctx, value, target: QParams):
    """`value` (int8/int16 with qparams, or an int32 accumulator) expressed with `target` qparams."""
    from .context import Value

    q = value.qparams
    if q is None:
        raise ValueError("value is not quantized")
    if q.same_as(target):
        return value
    t = ctx.tensor(value)
    scale = np.asarray(q.scale, dtype=np.float64) / float(target.scale)
    if q.per_channel and (q.axis is None or value.perm[-1] != q.axis):
        t = ctx.tensor(value, _channel_last(value.perm, q.axis))
        perm = _channel_last(value.perm, q.axis)
    else:
        perm = value.perm
    out = rescale(ctx.b, t, scale, q.zero_point, target.zero_point, tosa_dtype(target.dtype))
    return Value(value.shape, value.dtype, tensor=out, perm=perm, qparams=target)


def _channel_last(perm, axis):
    rest = [p for p in perm if p != axis]
    return tuple(rest + [axis])


def to_int32(ctx, value, scale_factor: float = 1.0):
    """Rescale a quantized int8/int16 value to int32 with the zero point removed.

    Returns (tensor, scale of one int32 unit). `scale_factor` > 1 keeps fractional precision
    (e.g. 2^20 for additions).
    """
    q = value.qparams
    t = ctx.tensor(value)
    out = rescale(ctx.b, t, scale_factor, q.zero_point, 0, DType.INT32)
    return out, float(q.scale) / scale_factor


# -- the quantized region ---------------------------------------------------------------------
def duplicate_dequantize(graph: Graph) -> None:
    """Give every user of a dequantize node its own copy.

    Guarantees each consumer can sit in a partition together with its dequantize: a shared one can
    otherwise be placed apart from some consumers, leaving them a float input they cannot lower.
    """
    for node in list(graph.nodes):
        if not is_dequantize(node) or len(node.users) < 2:
            continue
        for user in list(node.users)[1:]:
            with graph.inserting_before(user):
                copy = graph.call_function(node.target, node.args, node.kwargs)
            copy.meta = dict(node.meta)
            user.replace_input_with(node, copy)


def _has_int_path(node: Node) -> bool:
    from .registry import lookup

    if node.target is operator.getitem:
        return True
    entry = lookup(node.target)
    return entry is not None and entry.int_path() is None


def _float_parameter(node: Node, arg: Node) -> bool:
    """`arg` is a float constant that `node`'s INT rule folds at compile time (its family says so with
    `float_params=True`, e.g. batch norm's statistics), so it need not be quantized."""
    from .registry import lookup

    if not (arg.op == "get_attr" or (arg.op == "placeholder" and arg.meta.get("arm_constant"))):
        return False
    entry = lookup(node.target) if node.op == "call_function" else None
    return entry is not None and entry.float_params


def mark_quantized_region(graph: Graph) -> None:
    """Flag (`meta["arm_quantized"]`) the float nodes that sit between dequantize and quantize nodes.

    A float call_function node is in the region when each float tensor input comes from a dequantize
    or another region node, and each user is a quantize or another region node. Found by shrinking
    the set of candidates to a fixed point. Quantize nodes fed from the region and dequantize nodes
    feeding it are flagged too; those at the program's float boundary are not (they stay on the CPU).
    """
    candidates = set()
    for node in graph.nodes:
        node.meta.pop("arm_quantized", None)
        if node.op != "call_function" or is_quantize(node) or is_dequantize(node):
            continue
        if (node.target is operator.getitem or _is_float(node) or _bool_result(node)) and _has_int_path(node):
            candidates.add(node)
    changed = True
    while changed:
        changed = False
        for node in list(candidates):
            floats = [a for a in node.all_input_nodes if _is_float(a)]
            ok = all(is_dequantize(a) or a in candidates or _float_parameter(node, a) for a in floats)
            # a float made from no quantized value (a cast of a bool mask) has no qparams to carry
            ok = ok and (bool(floats) or node.target is operator.getitem)
            if not _bool_result(node):  # a comparison's bool result goes anywhere
                ok = ok and all(is_quantize(u) or u in candidates for u in node.users)
            ok = ok and bool(node.users) and (not _bool_result(node) or any(
                is_dequantize(a) for a in node.all_input_nodes))
            if not ok:
                candidates.discard(node)
                changed = True
    for node in candidates:
        node.meta["arm_quantized"] = True
    for node in graph.nodes:
        if is_quantize(node) and node.args[0] in candidates:
            node.meta["arm_quantized"] = True
        elif is_dequantize(node) and any(u in candidates for u in node.users):
            node.meta["arm_quantized"] = True
    for node in graph.nodes:
        if is_dequantize(node) and _requantizes_between_regions(node):
            node.meta["arm_quantized"] = True
            for user in node.users:
                user.meta["arm_quantized"] = True


def _requantizes_between_regions(dq: Node) -> bool:
    """A dequantize whose every user is a quantize, between two region nodes: where one layer's int8
    result feeds a layer with int16 activations (or back), PT2E writes dequantize(int8) -> quantize(int16).
    The pair is one RESCALE, so it joins the region (and the partition) instead of splitting it."""
    source = dq.args[0] if dq.args else None
    if not (isinstance(source, Node) and is_quantize(source) and source.meta.get("arm_quantized")):
        return False
    if not dq.users or not all(is_quantize(u) for u in dq.users):
        return False
    return all(any(d.meta.get("arm_quantized") for d in u.users) for u in dq.users)


def _bool_result(node: Node) -> bool:
    """A comparison of quantized values (its family sets `bool_result`): inputs in the region, output bool."""
    from .registry import lookup

    entry = lookup(node.target)
    return entry is not None and entry.bool_result


def _is_float(node: Node) -> bool:
    val = node.meta.get("val")
    if isinstance(val, (tuple, list)):
        return any(isinstance(v, torch.Tensor) and v.dtype.is_floating_point for v in val)
    return isinstance(val, torch.Tensor) and val.dtype.is_floating_point
