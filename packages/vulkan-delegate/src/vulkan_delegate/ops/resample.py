"""Spatial resampling: 2-D nearest / bilinear upsampling (shader `upsample2d`), grid sampling (shader
`grid_sample2d`) and constant padding (shader `pad`)."""

from __future__ import annotations

import numpy as np
import torch
from torch.fx import Node

from ..graph import numel
from ..lower import shape_of
from ..registry import aten_key, float_tensors, register

aten = torch.ops.aten
# the overloads F.interpolate leaves in exir's graphs (a direct call of a .default one arrives
# decomposed into index arithmetic)
NEAREST, BILINEAR = aten.upsample_nearest2d.vec, aten.upsample_bilinear2d.vec


def _scales(node: Node) -> tuple[list, bool]:
    """(scale factor per spatial dim, or None each when an output size was given; align_corners)."""
    a = list(node.args) + [None] * 3
    bilinear = aten_key(node.target) == BILINEAR
    factors = a[3] if bilinear else a[2]
    return (list(factors) if factors else [None, None]), bool(a[2]) if bilinear else False


def _upsample_support(node: Node) -> str | None:
    x = node.args[0].meta["val"]
    if x.dim() != 4:
        return f"upsampling of a rank-{x.dim()} input (the Vulkan delegate upsamples NCHW)"
    spatial = [*x.shape[2:], *node.meta["val"].shape[2:]]
    if not all(isinstance(d, int) for d in spatial):
        return "upsampling with a dynamic height or width (the interpolation scales are compile-time)"
    return float_tensors(node)


def source_scale(size_in: int, size_out: int, factor: float | None, align_corners: bool) -> float:
    """torch's source-index scale, in fp32 as torch computes it (area_pixel_compute_scale)."""
    if align_corners:
        return float(np.float32(size_in - 1) / np.float32(size_out - 1)) if size_out > 1 else 0.0
    if factor is not None and factor > 0:
        return float(np.float32(1.0 / factor))
    return float(np.float32(size_in) / np.float32(size_out))


@register("upsample2d", [NEAREST, BILINEAR], ["upsample2d"], support=_upsample_support)
def lower_upsample(ctx, node: Node) -> None:
    x = ctx.inp(node.args[0])
    y = ctx.out(node)
    n, c, h, w = x.shape
    _, _, oh, ow = y.shape
    factors, align = _scales(node)
    scale_h, scale_w = (source_scale(i, o, f, align) for i, o, f in zip((h, w), (oh, ow), factors, strict=True))
    bilinear = aten_key(node.target) == BILINEAR
    ctx.dispatch("upsample2d", [x, y], [n * c, h, w, oh, ow, scale_h, scale_w, int(bilinear), int(align)],
                 (oh * ow, n * c))


def _pad_support(node: Node) -> str | None:
    pads = node.args[1]
    if not all(isinstance(p, int) for p in pads):
        return "padding amounts that are not integers"
    value = node.args[2] if len(node.args) > 2 else node.kwargs.get("value", 0)
    if not isinstance(value, int | float):
        return "padding value is not a number"
    return float_tensors(node)


@register("constant_pad", [aten.constant_pad_nd.default], ["pad"], support=_pad_support)
def lower_constant_pad(ctx, node: Node) -> None:
    """y = x placed at offset `before` inside a tensor of `value` (pads: last dim first, as torch)."""
    x = ctx.inp(node.args[0])
    y = ctx.out(node, shape_of(node))
    rank = len(x.shape)
    pads = list(node.args[1])
    value = node.args[2] if len(node.args) > 2 else node.kwargs.get("value", 0)
    before = [0] * rank
    for i in range(len(pads) // 2):
        before[rank - 1 - i] = pads[2 * i]
    lead = [1] * (6 - rank)
    n = numel(y.shape)
    ctx.dispatch("pad", [x, y], [n, *lead, *(y.shape or []), *lead, *(x.shape or []), *[0] * (6 - rank), *before,
                                 float(value)], (n,))


GRID_MODES = {0: "bilinear", 1: "nearest"}
GRID_PADDING = {0: "zeros", 1: "border"}


def _grid_sample_support(node: Node) -> str | None:
    mode, padding = node.args[2], node.args[3]
    if mode not in GRID_MODES:
        return f"grid_sample mode {mode} (the Vulkan delegate samples bilinear or nearest)"
    if padding not in GRID_PADDING:
        return f"grid_sample padding mode {padding} (the Vulkan delegate pads with zeros or the border)"
    return float_tensors(node)


@register("grid_sample2d", [aten.grid_sampler_2d.default], ["grid_sample2d"], support=_grid_sample_support)
def lower_grid_sample(ctx, node: Node) -> None:
    x, grid = ctx.inp(node.args[0]), ctx.inp(node.args[1])
    y = ctx.out(node)
    n, c, h, w = x.shape
    _, _, oh, ow = y.shape
    ctx.dispatch("grid_sample2d", [x, grid, y], [n, c, h, w, oh, ow, int(node.args[2]), int(node.args[3]),
                                                 int(node.args[4])], (oh * ow, c, n))
