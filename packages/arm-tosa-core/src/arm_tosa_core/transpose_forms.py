"""How a TRANSPOSE is written into the flatbuffer: as recorded ("as-is", the default) or "collapsed".

"collapsed" writes a TRANSPOSE as RESHAPE -> TRANSPOSE of the fewest axes -> RESHAPE: size-1 axes are dropped
and input axes that stay next to each other (in the same order) in the output are merged (within vela's
TRANSPOSE limits, see `collapse_for_vela`; beyond them the TRANSPOSE stays as recorded). The three ops move
the same bytes to the same places as the one TRANSPOSE (a RESHAPE keeps the row-major order), so the form is
exact by construction. Why: vela 5.2 on U55-128 moves the NCHW -> NHWC input of a 3x128x128 image as a
rank-4 TRANSPOSE (0, 2, 3, 1) in 24,640 NPU cycles and as its collapsed [3, 16384] -> [16384, 3] in 12,320;
on U85 regor runs the collapsed form on the CPU (131,381 NPU cycles become 9.8 M total). So Ethos-U writes
"collapsed" by default on U55/U65 and "as-is" on U85 (`arm_ethosu.compile_spec.default_transpose_form`), and
its `--tune` tries the other form on U55/U65 (`arm_ethosu.backend.graph_forms`). Other backends keep "as-is".

The form is read when the builder serializes (`TosaGraphBuilder.serialize`), after the builder has folded
chains of transposes, so it changes no folding.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar

from .helpers.lowering_choice import choose

TRANSPOSE_FORMS = ("as-is", "collapsed")
#: vela's TRANSPOSE axis limit (16 bits; `arm_ethosu.constraints.AXIS_LIMIT`). A TRANSPOSE whose collapsed
#: form would have an axis longer than this, or more than three axes, is written as recorded: merging the
#: axes of a 3x512x512 image gives [3, 262144], which vela cannot transpose on the NPU.
MAX_COLLAPSED_AXIS = 65536
MAX_COLLAPSED_RANK = 3
_transpose_form: ContextVar[str] = ContextVar("arm_tosa_core_transpose_form", default="as-is")


def transpose_form(form: str) -> AbstractContextManager[None]:
    """Serialize the TRANSPOSEs of graphs built inside this block in `form` (one of `TRANSPOSE_FORMS`)."""
    return choose(_transpose_form, form, TRANSPOSE_FORMS, "transpose form")


def current_form() -> str:
    return _transpose_form.get()


def collapse(shape: Sequence[int], perm: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The fewest-axes equivalent of transposing a tensor of `shape` by `perm` (output axis i is input axis
    perm[i]): (input shape to reshape to, its perm), or None when it has as many axes as `perm` already.
    A collapsed perm that is the identity means the transpose is only a reshape."""
    kept = [a for a in range(len(shape)) if shape[a] != 1]
    order = [kept.index(p) for p in perm if p in kept]  # the output order of the kept input axes
    sizes = [shape[a] for a in kept]
    groups: list[list[int]] = []  # runs of input axes that stay adjacent and in order, in output order
    for axis in order:
        if groups and groups[-1][-1] + 1 == axis:
            groups[-1].append(axis)
        else:
            groups.append([axis])
    if len(groups) == len(perm):
        return None
    by_input = sorted(groups, key=lambda g: g[0])
    in_shape = []
    for group in by_input:
        size = 1
        for axis in group:
            size *= sizes[axis]
        in_shape.append(size)
    return tuple(in_shape), tuple(by_input.index(g) for g in groups)


def collapse_for_vela(shape: Sequence[int], perm: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """`collapse`, or None (write the TRANSPOSE as recorded) where the collapsed form would break vela's
    TRANSPOSE limits (`MAX_COLLAPSED_AXIS`, `MAX_COLLAPSED_RANK`)."""
    fewer = collapse(shape, perm)
    if fewer is None or list(fewer[1]) == sorted(fewer[1]):  # a pure reshape has no TRANSPOSE to limit
        return fewer
    in_shape = fewer[0]
    return fewer if len(in_shape) <= MAX_COLLAPSED_RANK and max(in_shape) <= MAX_COLLAPSED_AXIS else None
