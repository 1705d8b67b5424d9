"""Integer nodes lowered on float32 copies of their values under TOSA 1.0's FP profile.

The FP profile has int32 only for index arithmetic (add/sub/mul, casts, gather indices): no int32
RESHAPE, SLICE or comparison. A family whose entry's `fp_integer_rule` is `registry.exact_in_float32`
lowers such a node anyway when `registry.int_range` proves its integer values within +-2^24: the
inputs are CAST to float32, the family's float rule runs, and an integer result is CAST back. Float32
holds every such integer exactly, and moves, sums within the bound and comparisons of them are exact
(transformers' StaticCache positions and causal mask: `cache_position` bounded by the cache it indexes).
"""

from __future__ import annotations

import torch
from torch.fx import Node
from torch.utils import _pytree as pytree

from .builder import Op
from .context import LoweringContext, Value
from .errors import LoweringError
from .registry import FP32_EXACT, INDEX_INTEGERS, OpEntry, lowered_metas
from .specification import TosaSpecification


def wants_float32_integers(entry: OpEntry, node: Node, spec: TosaSpecification) -> bool:
    """Whether `node` has integer tensors its family cannot compute natively under `spec` but may as
    float32 (the support rule proved them exact: `registry.exact_in_float32`)."""
    native = getattr(entry.fp_integer_rule, "native_reason", None)
    if native is None or spec.support_integer() or node.meta.get("arm_quantized"):
        return False
    if not any(m.dtype in INDEX_INTEGERS for m in lowered_metas(node)):
        return False
    return native(node, entry, spec) is not None


def _cast(ctx: LoweringContext, value: Value, dtype: torch.dtype) -> Value:
    if value.is_const:
        if dtype == torch.float32 and value.const.numel() and int(value.const.abs().max()) > FP32_EXACT:
            raise LoweringError(f"an integer constant up to {int(value.const.abs().max())} is not exact in float32")
        return ctx.constant(value.const.to(dtype))
    return ctx.emit(Op.CAST, [value.tensor], value.shape, dtype, value.perm)


def lower_integers_in_float32(ctx: LoweringContext, node: Node, rule) -> Value:
    """`rule(ctx, node)` with the node's integer inputs CAST to float32 and its integer result CAST back."""
    saved = {}
    for arg in node.all_input_nodes:
        value = ctx.values.get(arg)
        if isinstance(value, Value) and value.dtype in INDEX_INTEGERS:
            saved[arg] = value
            ctx.values[arg] = _cast(ctx, value, torch.float32)
    val = node.meta["val"]
    integer_out = isinstance(val, torch.Tensor) and val.dtype in INDEX_INTEGERS
    if integer_out:
        node.meta["arm_storage_dtype"] = torch.float32
    node.meta["arm_compute_dtype"] = torch.float32  # what a comparison's operands are
    try:
        out = rule(ctx, node)
    finally:
        ctx.values.update(saved)
        del node.meta["arm_compute_dtype"]
        if integer_out:
            del node.meta["arm_storage_dtype"]
    back = lambda v: _cast(ctx, v, val.dtype) if integer_out and isinstance(v, Value) else v  # noqa: E731
    return pytree.tree_map(back, out, is_leaf=lambda v: isinstance(v, Value))
