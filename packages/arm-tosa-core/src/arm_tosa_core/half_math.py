"""float16 nodes of multi-step families lower in float32 (CAST in, the family's float32 rule, CAST out).

PyTorch computes half-precision softmax, norms, reductions, average pools and composite activations in
float ("opmath") and rounds once at the end; the same chain of TOSA float16 operators rounds after every
step and drifts by several float16 ulps (a float16 layer_norm was 4 ulps off). Lowering these families
in float32 keeps the result within one rounding of PyTorch's. Single-operator families (add, exp, ...)
round once either way and stay in float16. A family opts in with `fp32_opmath=True` on its entry.
"""

from __future__ import annotations

import torch
from torch.fx import Node
from torch.utils import _pytree as pytree

from .builder import Op
from .context import LoweringContext, Value
from .registry import OpEntry

_MISSING = object()


def wants_fp32(entry: OpEntry, node: Node) -> bool:
    """Whether `node` of a family marked `fp32_opmath` is a plain (not quantized) float16 node to lower
    in float32 (families whose float16 lowering is a chain of operators; see module docstring)."""
    if not entry.fp32_opmath or node.meta.get("arm_quantized"):
        return False
    val = node.meta.get("val")
    first = val[0] if isinstance(val, (tuple, list)) and val else val
    return isinstance(first, torch.Tensor) and first.dtype == torch.float16


def _cast(ctx: LoweringContext, value: Value, dtype: torch.dtype) -> Value:
    if value.is_const:
        return ctx.constant(value.const.to(dtype))
    return ctx.emit(Op.CAST, [value.tensor], value.shape, dtype, value.perm)


def lower_in_fp32(ctx: LoweringContext, node: Node, rule):
    """`rule(ctx, node)` with the node's float16 inputs and output type as float32, the results CAST back."""
    saved = {}
    for arg in node.all_input_nodes:
        value = ctx.values.get(arg)
        if isinstance(value, Value) and value.dtype == torch.float16:
            saved[arg] = value
            ctx.values[arg] = _cast(ctx, value, torch.float32)
    storage = node.meta.get("arm_storage_dtype", _MISSING)
    node.meta["arm_storage_dtype"] = torch.float32
    try:
        out = rule(ctx, node)
    finally:
        ctx.values.update(saved)
        if storage is _MISSING:
            del node.meta["arm_storage_dtype"]
        else:
            node.meta["arm_storage_dtype"] = storage
    back = lambda v: _cast(ctx, v, torch.float16) if isinstance(v, Value) and v.dtype == torch.float32 else v  # noqa: E731
    return pytree.tree_map(back, out, is_leaf=lambda v: isinstance(v, Value))
