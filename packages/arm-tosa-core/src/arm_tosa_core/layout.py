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


def memory_layout(meta: object) -> Perm:
    """The layout a partition's input or output crosses the delegate boundary in: its tensor's dim order in
    the program (the identity for a contiguous tensor, (0, 2, 3, 1) for a channels-last one), since the
    ExecuTorch runtime hands the delegate the tensor's bytes as they lie in memory. `meta` is the node's
    (fake) tensor; anything else is the identity. A dim order that moves only size-1 dims lays the bytes
    out as the identity does, and is read as the identity."""
    rank = getattr(meta, "ndim", 0)
    if rank < 2 or not hasattr(meta, "stride"):
        return identity(rank)
    # the dim order ExecuTorch plans the tensor with: strides sorted largest first, ties kept in order
    # (exir.tensor.dim_order_from_stride)
    stride = tuple(meta.stride())
    return planned_layout(tuple(meta.shape), sorted(range(rank), key=lambda d: -stride[d]))


def planned_layout(shape: Sequence[int], dim_order: Sequence[int]) -> Perm:
    """The layout of a tensor of `shape` planned with `dim_order` (a program's dim order for it): the
    dim order itself, or the identity when it moves only size-1 dims (the bytes lie as the identity's)."""
    order = tuple(dim_order)
    return identity(len(order)) if only_unit_dims_move(shape, identity(len(order)), order) else order


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


def reshape_groups(shape: Sequence[int], new_shape: Sequence[int]) -> list[tuple[tuple[int, ...], tuple[int, ...]]] | None:
    """The non-1 dims of a reshape in groups (old dims, new dims) of equal element counts, each group the
    shortest run that splits or merges; None when the sizes do not match."""
    old = [i for i, d in enumerate(shape) if d != 1]
    new = [i for i, d in enumerate(new_shape) if d != 1]
    groups, i, j = [], 0, 0
    while i < len(old) or j < len(new):
        if i == len(old) or j == len(new):
            return None
        a, b = [old[i]], [new[j]]
        pa, pb = shape[old[i]], new_shape[new[j]]
        i, j = i + 1, j + 1
        while pa != pb:
            if pa < pb and i < len(old):
                pa *= shape[old[i]]
                a.append(old[i])
                i += 1
            elif pb < pa and j < len(new):
                pb *= new_shape[new[j]]
                b.append(new[j])
                j += 1
            else:
                return None
        groups.append((tuple(a), tuple(b)))
    return groups


def reshape_in_place(shape: Sequence[int], perm: Sequence[int], new_shape: Sequence[int]
                     ) -> tuple[Perm, Perm] | None:
    """How to do a torch reshape of a value stored in layout `perm` without going through PyTorch's layout.

    Returns (layout the value must be in first, layout of the result): the first keeps every split/merge
    group of dims together in ascending order, with the groups in the order they already have physically
    (so it equals `perm` when the reshape needs no data movement, and otherwise differs from it by the
    smallest regrouping); size-1 dims go first. A channel shuffle on an NHWC tensor so becomes RESHAPE,
    one TRANSPOSE of the split channel axes, RESHAPE, instead of a trip through NCHW. None when the sizes
    do not match."""
    groups = reshape_groups(shape, new_shape)
    if groups is None:
        return None
    group_of = {d: g for g, (old, _) in enumerate(groups) for d in old}
    order: list[int] = []  # groups in the physical order of their first dim
    for d in perm:
        if d in group_of and group_of[d] not in order:
            order.append(group_of[d])
    units = [d for d in perm if shape[d] == 1]
    first = tuple(units) + tuple(d for g in order for d in groups[g][0])
    new_units = [d for d, n in enumerate(new_shape) if n == 1]
    result = tuple(new_units) + tuple(d for g in order for d in groups[g][1])
    return first, result
