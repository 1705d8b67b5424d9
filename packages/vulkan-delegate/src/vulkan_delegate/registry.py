"""One registry entry per op family: the targets it takes, its support rule, its lowering, and the
shader templates it dispatches. The partitioner, the lowering and the shader list all read it (and
a test checks the runtime embeds exactly the shaders named here).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import Node

from arm_tosa_core.delegation import aten_key

VARIANTS = ("f32", "f16")
INT_VARIANTS = ("f32", "f16", "i32")  # families that also compute on int32/bool tensors
COPY_VARIANTS = ("f32", "f16", "i32")  # the copy shader casts between every pair
MAX_RANK = 6
# Variants of a shader template beyond its families' (not per family: sdpa and mm share `matmul`):
# `small` / `big` (fp16; matmul's `f32big` too), the 16x16 / 128x128 GEMM tiles a lowering picks by shape
# (ops/conv.py gemm_variant), and matmul's `f16smallsplit` (the small tile where it gives few workgroups,
# ops/matmul.py);
# `f16coop` / `f16bigcoop` / `f16smallsplitcoop`, the tensor-core twins of `f16` / `f16big` / `f16smallsplit`,
# which no payload names: the runtime
# swaps them in at load where the device has VK_KHR_cooperative_matrix (runtime-cpp's
# vulkan_delegate/shader_select.cpp); `f16bigcoop2`, `f16big`'s twin where the device has VK_NV_cooperative_matrix2
# too.
SHADER_VARIANTS = {"matmul": ("f32small", "f16small", "f16smallsplit", "f16smallsplitcoop", "f16coop", "f16big",
                              "f16bigcoop", "f32big", "f16bigcoop2"),
                   "conv2d_gemm": ("f32small", "f16small", "f16big", "f16bigcoop", "f32big"),
                   "rope": ("f32", "f16"),  # the rotary chain's add (ops/rope.py, via the binary family)
                   "ewise_expr": ("f32", "f16")}  # fused unary/binary trees (fuse.py, after every family)
# Twins no payload names, which the runtime swaps in at load (runtime-cpp's vulkan_delegate/variant_select.cpp):
# `f16math32`, fp16 storage with fp32 arithmetic, where the device lacks shaderFloat16 (or VKDG_FP16_MATH=0);
# `sg`, the row reductions' subgroup-arithmetic form, where the device has it (unless VKDG_SUBGROUP=0).
_ROW = ("f32sg", "f16sg")
RUNTIME_TWINS = {**{s: ("f16math32",) for s in ("unary", "binary", "pool2d", "upsample2d", "compare", "argreduce",
                                                 "where", "take", "gather", "index_write", "pad", "mask_bool",
                                                 "conv2d_dw", "ewise_expr")},
                 **{s: _ROW for s in ("softmax_row", "norm_row", "norm_row_wide", "reduce_row")},
                 # `f16sgcoop`: fp16 flash attention on tensor cores where the device has VK_KHR_cooperative_matrix
                 "attention_flash": (*_ROW, "f16sgcoop"),
                 "copy": ("f16_f16math32", "f32_f16math32", "f16_f32math32", "f16_i32math32", "i32_f16math32")}

Support = Callable[[Node], str | None]
Lower = Callable[[Any, Node], Any]


@dataclass
class OpFamily:
    name: str
    targets: list[Any]
    lower: Lower
    shaders: list[str]
    support: Support | None = None
    preserve: list[Any] = field(default_factory=list)  # ops exir must not decompose (kept whole)
    variants: tuple[str, ...] = VARIANTS


_FAMILIES: list[OpFamily] = []
_BY_TARGET: dict[Any, OpFamily] = {}


def register(name: str, targets: list, shaders: list[str], support: Support | None = None,
             preserve: list | None = None, variants: tuple[str, ...] = VARIANTS) -> Callable[[Lower], Lower]:
    """Decorator for a lowering rule: `@register("relu", [aten.relu.default], ["unary"])`."""

    def wrap(fn: Lower) -> Lower:
        fam = OpFamily(name, list(targets), fn, list(shaders), support, list(preserve or []), variants)
        _FAMILIES.append(fam)
        for t in fam.targets:
            _BY_TARGET[aten_key(t)] = fam
        return fn

    return wrap


def families() -> list[OpFamily]:
    _load()
    return list(_FAMILIES)


def lookup(target: Any) -> OpFamily | None:
    _load()
    return _BY_TARGET.get(aten_key(target))


def shader_names() -> set[str]:
    """Every compiled shader variant the registry can dispatch (the runtime must embed each)."""
    return {f"{s}_{v}" for f in families() for s in f.shaders for v in f.variants} | {
        f"copy_{a}_{b}" for a in COPY_VARIANTS for b in COPY_VARIANTS} | {
        f"{s}_{v}" for s, vs in SHADER_VARIANTS.items() for v in vs} | {
        f"{s}_{v}" for s, vs in RUNTIME_TWINS.items() for v in vs}


def _load() -> None:
    from . import ops  # noqa: F401  (importing the ops package fills the registry)


FLOATS = (torch.float32, torch.float16)  # float16: a model.half() program (computed in the compute dtype)
INTS = (torch.int32, torch.int64, torch.bool)  # computed as int32 (int64 narrowed where it provably fits)
_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.int32: "int32", torch.int64: "int64",
          torch.bool: "bool"}


def tensor_dtypes(*allowed: torch.dtype) -> Support:
    """A support rule: every tensor in and out has one of the `allowed` dtypes and rank <= MAX_RANK."""
    names = "/".join(_NAMES[d] for d in allowed)

    def rule(node: Node) -> str | None:
        vals = [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]
        for v in vals:
            for t in v if isinstance(v, list | tuple) else [v]:
                if isinstance(t, torch.Tensor):
                    if t.dtype not in allowed:
                        return f"dtype {t.dtype} (the Vulkan delegate runs {aten_key(node.target)} on {names} tensors)"
                    if t.dim() > MAX_RANK:
                        return f"rank {t.dim()} > {MAX_RANK}"
        return None

    return rule


#: float32 (or fp16 via force_fp16, or a model.half() program's float16) tensors only
float_tensors = tensor_dtypes(*FLOATS)
#: any dtype the delegate stores: floats, and int32/int64/bool (layout ops move them unchanged)
any_tensors = tensor_dtypes(*FLOATS, *INTS)
