"""torch.gather(x, dim, index) as one TOSA GATHER over the flattened x.

out[p] = x[p with coordinate `dim` replaced by index[p]]: the flat position in x is a constant part
(the other coordinates times their strides) plus index[p] * stride[dim]. A constant index folds into
one int32 constant (range-checked here: GATHER has no bounds checks); a runtime index costs an int32
MUL and ADD (INT profile: its flattening RESHAPE is int32). torch.gather has no negative indices.
"""

from __future__ import annotations

import math

import torch
from torch.fx import Node

from ..builder import DType, Op, tosa_dtype
from ..context import LoweringContext, Value
from ..errors import UnsupportedModelError
from ..helpers.common import mul_shift
from ..helpers.shapes import is_compile_time, values_support
from ..registry import Quant, register_op

aten = torch.ops.aten


def _gather_support(node: Node, spec) -> str | None:
    if len(node.args) > 3 and node.args[3] or node.kwargs.get("sparse_grad"):
        return "gather with sparse_grad is not lowered"
    index = node.args[2]
    if index.meta["val"].dtype not in (torch.int32, torch.int64):
        return f"gather indices of dtype {index.meta['val'].dtype} are not lowered"
    if not is_compile_time(index) and not spec.support_integer():
        return ("gather with a runtime index tensor needs the INT profile (its int32 index arithmetic and "
                f"RESHAPE); under {spec} it runs on the CPU")
    return values_support(node.args[0], spec, node)


def _positions(x_shape, index_shape, dim: int) -> tuple[torch.Tensor, int]:
    """(flat position in x of every index entry with coordinate `dim` at 0, stride of `dim`)."""
    strides = [math.prod(x_shape[d + 1:]) for d in range(len(x_shape))]
    grids = torch.meshgrid(*[torch.arange(s) for s in index_shape], indexing="ij") if index_shape else []
    base = torch.zeros(tuple(index_shape), dtype=torch.int64)
    for d, grid in enumerate(grids):
        if d != dim:
            base = base + grid * strides[d]
    return base, strides[dim] if x_shape else 1


@register_op("gather", [aten.gather.default], support=_gather_support, quant=Quant.SHARED, fp_index_math=True, folds_constants=True)
def lower_gather(ctx: LoweringContext, node: Node) -> Value:
    x, index = ctx.val(node.args[0]), ctx.val(node.args[2])
    dim = node.args[1] % max(x.rank, 1)
    shape, dtype = ctx.out_meta(node)
    if x.is_const and index.is_const:
        return ctx.constant(torch.gather(x.const, dim, index.const.long()))
    base, stride = _positions(x.shape, index.shape, dim)
    size, width = math.prod(x.shape), max(1, math.prod(index.shape))
    if index.is_const:
        picks = index.const.long()
        bad = picks[(picks < 0) | (picks >= x.shape[dim])]
        if bad.numel():
            raise UnsupportedModelError(f"gather index {int(bad[0])} is out of range for a dimension of size "
                                        f"{x.shape[dim]}; fix the constant indices in the model")
        flat = ctx.b.const((base + picks * stride).reshape(1, width).to(torch.int32).numpy(), DType.INT32)
    else:
        t = ctx.tensor(ctx.reshape(index, (1, width)), (0, 1))
        scaled = ctx.b.op(Op.MUL, [t, ctx.scalar(stride, DType.INT32, 2), mul_shift(ctx)], t.shape, DType.INT32)
        flat = ctx.b.op(Op.ADD, [scaled, ctx.b.const(base.reshape(1, width).to(torch.int32).numpy(), DType.INT32)],
                        t.shape, DType.INT32)
    values = ctx.tensor(x, tuple(range(x.rank)), tosa_dtype(x.dtype) if x.is_const else None)
    picked = ctx.b.op(Op.GATHER, [ctx.b.reshape(values, [1, size, 1]), flat], [1, width, 1], values.dtype)
    out = ctx.from_tensor(ctx.b.reshape(picked, shape), shape, dtype)
    out.qparams = x.qparams
    return out
