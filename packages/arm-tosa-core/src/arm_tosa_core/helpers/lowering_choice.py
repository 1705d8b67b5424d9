"""A lowering choice held in a ContextVar for the length of a `with` block.

The graph forms Ethos-U's `--tune` switches between (`transpose_forms.transpose_form`,
`ops.resize.bilinear_form`) are read deep inside the lowering, so they travel as context variables rather
than as arguments through every op family; this is the one place that checks and sets them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")


@contextmanager
def choose(var: ContextVar[T], value: T, allowed: Collection[T], what: str) -> Iterator[None]:
    """Set `var` to `value` inside the block (restored after it); ValueError naming `what` when `value` is
    not one of `allowed`."""
    if value not in allowed:
        raise ValueError(f"{what} {value!r}: use one of {tuple(allowed)}")
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)
