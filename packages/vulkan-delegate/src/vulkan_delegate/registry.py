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
MAX_RANK = 6

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
        f"copy_{a}_{b}" for a in VARIANTS for b in VARIANTS}


def _load() -> None:
    from . import ops  # noqa: F401  (importing the ops package fills the registry)


def float_tensors(node: Node) -> str | None:
    """Common rule: every tensor in and out is float32 (fp16 is a compile option, not an input type)."""
    vals = [node.meta.get("val")] + [a.meta.get("val") for a in node.all_input_nodes]
    for v in vals:
        for t in v if isinstance(v, list | tuple) else [v]:
            if isinstance(t, torch.Tensor):
                if t.dtype != torch.float32:
                    return f"dtype {t.dtype} (the Vulkan delegate computes float32 tensors, or fp16 via force_fp16)"
                if t.dim() > MAX_RANK:
                    return f"rank {t.dim()} > {MAX_RANK}"
    return None
