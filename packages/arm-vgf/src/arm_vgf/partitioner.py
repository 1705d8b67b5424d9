"""VgfPartitioner: the core TOSA partitioner plus what the ML SDK model converter rejects.

Converting the TOSA graphs of the core's op tables (every FP family, and the main int8 and
int16-activation families) found one limitation: CASTs between bool and floating point, which
`spirv.Tosa.Cast` refuses. TOSA 1.0 has no such CAST either, so the core now lowers them as SELECT /
LOGICAL_NOT(EQUAL), which converts. The other is control flow: with a "+cf" spec the core lowers
torch.cond / torch.while_loop to COND_IF / WHILE_LOOP, which the converter refuses ("failed to legalize
operation 'tosa.cond_if' that was explicitly marked illegal"), so they stay on the CPU here.
`VGF_CONSTRAINTS` is where a converter limitation goes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from torch.fx import Node
from torch.fx.passes.operator_support import OperatorSupportBase

from arm_tosa_core import TOSAPartitioner
from arm_tosa_core.registry import is_control_flow

from .compile_spec import VgfCompileSpec


def _control_flow(node: Node) -> str | None:
    if not is_control_flow(node):
        return None
    return (f"{node.target.__name__}: the ML SDK model converter (0.11.0) does not convert TOSA control flow "
            "(COND_IF/WHILE_LOOP: \"failed to legalize operation\"), so it runs on the CPU")


# One entry per model-converter limitation: a check returning the reason in words, or None.
# Known with ai-ml-sdk-model-converter 0.11.0 for what the core emits (see the docstring).
VGF_CONSTRAINTS: tuple[Callable[[Node], str | None], ...] = (_control_flow,)


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
