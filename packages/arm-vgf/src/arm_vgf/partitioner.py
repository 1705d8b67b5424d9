"""VgfPartitioner: the core TOSA partitioner plus what the ML SDK model converter rejects.

The constraints below were found by converting the TOSA graphs of the core's op tables (every FP
family, and the main int8 and int16-activation families): everything the TOSA reference model
accepts converts, except CASTs between bool and floating point, which `spirv.Tosa.Cast` refuses
(bool converts only to and from int8/int16/int32). Such casts stay on the CPU with the reason
below; tests/test_vgf_backend.py shows the converter failing without this check.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.fx import Node
from torch.fx.passes.operator_support import OperatorSupportBase

from arm_tosa_core import TOSAPartitioner, registry

from .compile_spec import VgfCompileSpec


def _dtype(node: Node) -> torch.dtype | None:
    # Quantized nodes are float in torch but carried as integers (the core's storage dtype).
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return None
    return node.meta.get("arm_storage_dtype", val.dtype)


def _bool_float_cast(node: Node) -> str | None:
    entry = registry.lookup(node.target)
    if entry is None or entry.name != "clone_cast" or not node.args:
        return None
    source = node.args[0]
    if not isinstance(source, Node) or source.meta.get("arm_constant"):
        return None  # constants are converted at compile time: no CAST is emitted
    src, dst = _dtype(source), _dtype(node)
    if src is None or dst is None:
        return None
    if (src == torch.bool and dst.is_floating_point) or (src.is_floating_point and dst == torch.bool):
        return (f"the ML SDK model converter cannot CAST {src} to {dst} (bool converts only to and "
                f"from int8/int16/int32 there); cast through an integer, e.g. "
                f"x.to(torch.int32).to({dst})")
    return None


# One entry per converter limitation: a check returning the reason in words, or None.
VGF_CONSTRAINTS = (_bool_float_cast,)


class VgfPartitioner(TOSAPartitioner):
    """Delegates what the VGF target supports to VgfBackend; the rest stays on the CPU.

    `additional_checks` accepts `OperatorSupportBase` instances (e.g. executorch's DontPartition)
    that can only remove nodes from delegation.
    """

    backend_id = "VgfBackend"

    def __init__(self, compile_spec: VgfCompileSpec,
                 additional_checks: Sequence[OperatorSupportBase] | None = None) -> None:
        if not isinstance(compile_spec, VgfCompileSpec):
            raise TypeError(f"VgfPartitioner needs a VgfCompileSpec, got {type(compile_spec).__name__}: "
                            "use VgfCompileSpec() (or VgfCompileSpec(\"TOSA-1.0+FP\"))")
        super().__init__(compile_spec, additional_checks)

    def target_check(self, node: Node) -> str | None:
        """Why the model converter cannot take `node`, or None."""
        for check in VGF_CONSTRAINTS:
            reason = check(node)
            if reason is not None:
                return reason
        return None
