"""How a TRANSPOSE is written into the flatbuffer: as recorded ("as-is", the default) or "collapsed".

"collapsed" writes a TRANSPOSE as RESHAPE -> TRANSPOSE of the fewest axes -> RESHAPE: size-1 axes are dropped
and input axes that stay next to each other (in the same order) in the output are merged. The three ops move
the same bytes to the same places as the one TRANSPOSE (a RESHAPE keeps the row-major order), so the form is
exact by construction. Why: vela 5.2 on U55-128 moves the NCHW -> NHWC input of a 3x128x128 image as a
rank-4 TRANSPOSE (0, 2, 3, 1) in 24,640 NPU cycles and as its collapsed [3, 16384] -> [16384, 3] in 12,320;
on U85 regor runs the collapsed form on the CPU (131,381 NPU cycles become 9.8 M total), so only Ethos-U's
`--tune` on U55/U65 tries it (`arm_ethosu.backend.graph_forms`).

The form is read when the builder serializes (`TosaGraphBuilder.serialize`), after the builder has folded
chains of transposes, so it changes no folding.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

TRANSPOSE_FORMS = ("as-is", "collapsed")
_transpose_form: ContextVar[str] = ContextVar("arm_tosa_core_transpose_form", default="as-is")


@contextmanager
def transpose_form(form: str) -> Iterator[None]:
    """Serialize the TRANSPOSEs of graphs built inside this block in `form` (one of `TRANSPOSE_FORMS`)."""
    if form not in TRANSPOSE_FORMS:
        raise ValueError(f"transpose form {form!r}: use one of {TRANSPOSE_FORMS}")
    token = _transpose_form.set(form)
    try:
        yield
    finally:
        _transpose_form.reset(token)


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
