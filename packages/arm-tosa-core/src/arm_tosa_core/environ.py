"""Scoped process environment: set variables for a block, then put back exactly what was there."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping


@contextlib.contextmanager
def environ_set(env: Mapping[str, str]) -> Iterator[Mapping[str, str]]:
    """Set `env` in os.environ while the block runs; afterwards each variable has its old value again, or is
    unset where it was unset. Yields `env`."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
