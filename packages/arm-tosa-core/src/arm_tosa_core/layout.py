"""Layout arithmetic: a value's physical TOSA tensor is its logical (torch) tensor permuted by `perm`.

Lowering rules say which layout they need (convolution and pooling want NHWC); everything else works
in whatever layout its input already has. These helpers decide when a layout change is free (only
size-1 dimensions move: a RESHAPE) and when it costs a TRANSPOSE.
"""

from __future__ import annotations

from collections.abc import Sequence

Perm = tuple[int, ...]

NCHW_TO_NHWC: Perm = (0, 2, 3, 1)


def identity(rank: int) -> Perm:
    return tuple(range(rank))


def is_identity(perm: Sequence[int]) -> bool:
    return all(i == p for i, p in enumerate(perm))


def apply(shape: Sequence[int], perm: Sequence[int]) -> tuple[int, ...]:
    """Physical shape of a logical `shape` stored in layout `perm`."""
    return tuple(shape[p] for p in perm)


def inverse(perm: Sequence[int]) -> Perm:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def relative(src: Sequence[int], dst: Sequence[int]) -> Perm:
    """The TRANSPOSE perms taking a tensor stored in layout `src` to layout `dst`."""
    pos = {d: i for i, d in enumerate(src)}
    return tuple(pos[d] for d in dst)


def only_unit_dims_move(shape: Sequence[int], src: Sequence[int], dst: Sequence[int]) -> bool:
    """True when going from layout `src` to `dst` keeps the order of every non-1 dimension.

    Then the data order is unchanged and a RESHAPE does the job of a TRANSPOSE.
    """
    a = [d for d in src if shape[d] != 1]
    b = [d for d in dst if shape[d] != 1]
    return a == b


def after_permute(perm: Sequence[int], dims: Sequence[int]) -> Perm:
    """Layout of `torch.permute(x, dims)` when x is stored in layout `perm`, without moving data."""
    return tuple(list(dims).index(p) for p in perm)


def drop_dims(perm: Sequence[int], removed: Sequence[int]) -> Perm:
    """Layout after removing logical dims `removed` (e.g. a reduction without keepdim)."""
    removed_set = set(removed)
    kept = [p for p in perm if p not in removed_set]
    return tuple(p - sum(1 for r in removed_set if r < p) for p in kept)


def insert_leading(perm: Sequence[int], count: int) -> Perm:
    """Layout after prepending `count` logical size-1 dims (as broadcasting does)."""
    return tuple(range(count)) + tuple(p + count for p in perm)
