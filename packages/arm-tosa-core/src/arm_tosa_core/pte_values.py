"""The value table of one ExecuTorch execution plan, materialized as torch objects.

Planned tensors are views into per-memory-id byte arenas at the offsets the memory planner chose,
exactly like the runtime: the emitter elides static views (``memory.view``) by giving the view its
base's allocation and emitting no instruction, so only shared storage makes those values correct.
Constants are read from the program's constant buffers in their stored dim order.
"""

from __future__ import annotations

from typing import Any

import torch
from executorch.exir import schema
from executorch.exir._serialize._program import PTEFile
from executorch.exir.scalar_type import ScalarType
from executorch.exir.tensor import get_scalar_type, stride_from_dim_order


def torch_dtype(scalar_type: int) -> torch.dtype:
    """Maps an ExecuTorch ScalarType number (the c10 numbering) to a torch dtype."""
    try:
        return get_scalar_type(ScalarType(scalar_type))
    except (KeyError, ValueError):
        raise NotImplementedError(
            f"ExecuTorch scalar type {scalar_type} has no torch dtype the interpreter can use"
        ) from None


def _is_none_placeholder(ev: schema.EValue) -> bool:
    """The emitter stands an empty BYTE tensor in for a None passed to a `Tensor?` argument."""
    t = ev.val
    return (
        isinstance(t, schema.Tensor)
        and t.allocation_info is None
        and t.data_buffer_idx == 0
        and list(t.sizes) == [0]
    )


class ValueTable:
    """Holds the live value of every EValue of one plan for one execution."""

    def __init__(self, pte: PTEFile, plan: schema.ExecutionPlan) -> None:
        self._pte = pte
        self._plan = plan
        self.evalues: list[schema.EValue] = plan.values
        self._inputs = set(plan.inputs)
        self._arenas: dict[int, torch.Tensor] = {}
        # Full-size views of DYNAMIC_BOUND tensors, which ops may shrink (et_copy_index grows them back).
        self._bounds: dict[int, torch.Tensor] = {}
        self.values: list[Any] = [self._materialize(i, ev) for i, ev in enumerate(self.evalues)]

    # ---- construction ------------------------------------------------------------------------
    def _arena(self, mem_id: int) -> torch.Tensor:
        if mem_id not in self._arenas:
            sizes = self._plan.non_const_buffer_sizes
            if mem_id <= 0 or mem_id >= len(sizes):
                raise ValueError(
                    f"malformed .pte: tensor planned in memory id {mem_id}, but the plan has "
                    f"{len(sizes)} buffer sizes"
                )
            self._arenas[mem_id] = torch.zeros(sizes[mem_id], dtype=torch.uint8)
        return self._arenas[mem_id]

    def _materialize(self, idx: int, ev: schema.EValue) -> Any:
        val = ev.val
        if isinstance(val, schema.Tensor):
            return self._tensor(idx, val)
        if isinstance(val, schema.Double):
            return float(val.double_val)  # "inf"/"-inf" are stored as strings
        if isinstance(val, schema.Int):
            return val.int_val
        if isinstance(val, schema.Bool):
            return val.bool_val
        if isinstance(val, schema.String):
            return val.string_val
        if isinstance(val, schema.Null):
            return None
        # Lists reference other values by index and are resolved on each read (see get()).
        return val

    def _tensor(self, idx: int, t: schema.Tensor) -> torch.Tensor:
        dtype = torch_dtype(t.scalar_type)
        sizes = list(t.sizes)
        strides = stride_from_dim_order(sizes, list(t.dim_order)) if sizes else []
        if t.allocation_info is not None:
            view = self._arena_view(idx, t, dtype, sizes, strides)
            if t.data_buffer_idx > 0:  # a mutable buffer with an initial state
                view.copy_(self._constant(idx, t, dtype, sizes, strides, mutable=True))
            if t.shape_dynamism == schema.TensorShapeDynamism.DYNAMIC_BOUND:
                self._bounds[idx] = view
            return view
        info = t.extra_tensor_info
        if t.data_buffer_idx > 0 or (
            info is not None and info.location == schema.TensorDataLocation.EXTERNAL
        ):
            return self._constant(idx, t, dtype, sizes, strides, mutable=False)
        # Not planned: a user input bound later, a dynamic-unbound tensor, or a None placeholder.
        return torch.empty_strided(sizes, strides, dtype=dtype)

    def _arena_view(
        self, idx: int, t: schema.Tensor, dtype: torch.dtype, sizes: list[int], strides: list[int]
    ) -> torch.Tensor:
        alloc = t.allocation_info
        assert alloc is not None
        arena = self._arena(alloc.memory_id)
        itemsize = torch.empty(0, dtype=dtype).element_size()
        offset = alloc.memory_offset
        span = _storage_elements(sizes, strides)
        if offset % itemsize or offset + span * itemsize > arena.numel():
            raise ValueError(
                f"malformed .pte: value {idx} ({dtype}, sizes {sizes}) at byte offset {offset} does "
                f"not fit aligned in memory id {alloc.memory_id} of {arena.numel()} bytes"
            )
        view = torch.empty(0, dtype=dtype)
        view.set_(arena.untyped_storage(), offset // itemsize, sizes, strides)
        return view

    def _constant(
        self,
        idx: int,
        t: schema.Tensor,
        dtype: torch.dtype,
        sizes: list[int],
        strides: list[int],
        mutable: bool,
    ) -> torch.Tensor:
        data = self._constant_bytes(idx, t, mutable)
        itemsize = torch.empty(0, dtype=dtype).element_size()
        count = _storage_elements(sizes, strides)
        if len(data) < count * itemsize:
            raise ValueError(
                f"malformed .pte: constant value {idx} needs {count * itemsize} bytes, its buffer "
                f"holds {len(data)}"
            )
        if count == 0:
            return torch.empty_strided(sizes, strides, dtype=dtype)
        # Buffers are padded to the constant alignment: read only this tensor's bytes. The stored
        # bytes follow the tensor's dim order, so the strides from dim_order give the logical view.
        flat = torch.frombuffer(bytearray(data[: count * itemsize]), dtype=dtype)
        return flat.as_strided(sizes, strides)

    def _constant_bytes(self, idx: int, t: schema.Tensor, mutable: bool) -> bytes:
        info = t.extra_tensor_info
        if info is not None and info.location == schema.TensorDataLocation.EXTERNAL:
            key = info.fully_qualified_name or ""
            named = self._pte.named_data
            entry = named.pte_data.get(key) if named is not None else None
            if entry is None:
                raise ValueError(
                    f"constant '{key}' (value {idx}) is stored outside the .pte (a .ptd data file); "
                    "run_pte reads only the .pte: export without external_constants"
                )
            return bytes(named.buffers[entry.buffer_index])
        if mutable:
            buffers = self._pte.mutable_data or []
            kind = "mutable-data"
        else:
            buffers = self._pte.program.constant_buffer
            kind = "constant"
        if t.data_buffer_idx >= len(buffers):
            raise ValueError(
                f"malformed .pte: value {idx} refers to {kind} buffer {t.data_buffer_idx}, the "
                f"program has {len(buffers)}"
            )
        return bytes(buffers[t.data_buffer_idx].storage)

    # ---- reads -------------------------------------------------------------------------------
    def get(self, idx: int) -> Any:
        """The current value at `idx`, with list values resolved to Python lists."""
        val = self.values[idx]
        if isinstance(val, schema.IntList):
            return [self.values[i] for i in val.items]  # items are indices of Int values
        if isinstance(val, schema.TensorList):
            return [self.values[i] for i in val.items]
        if isinstance(val, schema.OptionalTensorList):
            return [None if i < 0 else self.values[i] for i in val.items]
        if isinstance(val, (schema.DoubleList, schema.BoolList)):
            return list(val.items)
        return val

    def is_absent(self, idx: int) -> bool:
        """True where the value stands for None (a Null, or the empty `Tensor?` placeholder)."""
        ev = self.evalues[idx]
        return isinstance(ev.val, schema.Null) or (
            idx not in self._inputs and _is_none_placeholder(ev)
        )

    def full_tensor(self, idx: int) -> torch.Tensor:
        """The upper-bound view of a DYNAMIC_BOUND tensor (the value itself otherwise)."""
        return self._bounds.get(idx, self.values[idx])

    def is_constant(self, idx: int) -> bool:
        t = self.evalues[idx].val
        return isinstance(t, schema.Tensor) and t.allocation_info is None and t.data_buffer_idx > 0

    # ---- writes ------------------------------------------------------------------------------
    def store(self, idx: int, result: Any) -> None:
        """Writes an op's result into value `idx`, keeping planned storage (and its aliases)."""
        ev = self.evalues[idx].val
        if isinstance(ev, schema.TensorList):
            for item, part in zip(ev.items, result, strict=True):
                self.store(item, part)
            return
        if not isinstance(ev, schema.Tensor):
            self.values[idx] = result
            return
        if not isinstance(result, torch.Tensor):
            result = torch.as_tensor(result)
        target = self.values[idx]
        if result is target:
            return
        if not isinstance(target, torch.Tensor) or ev.allocation_info is None:
            self.values[idx] = result
            return
        if tuple(target.shape) != tuple(result.shape):
            full = self.full_tensor(idx)
            if result.numel() > full.numel():
                raise RuntimeError(
                    f"value {idx}: result of shape {tuple(result.shape)} exceeds its planned "
                    f"upper bound {tuple(full.shape)}"
                )
            # The runtime resizes in place: same storage start, contiguous strides.
            target = torch.empty(0, dtype=full.dtype)
            target.set_(full.untyped_storage(), full.storage_offset(), result.shape)
            self.values[idx] = target
        target.copy_(result)

    def bind_input(self, position: int, idx: int, given: Any) -> None:
        """Places user input number `position` into plan input value `idx`, checking it."""
        ev = self.evalues[idx].val
        if not isinstance(ev, schema.Tensor):
            if isinstance(given, torch.Tensor):
                given = given.item()
            self.values[idx] = given
            return
        if not isinstance(given, torch.Tensor):
            raise TypeError(f"input {position} must be a torch.Tensor, got {type(given).__name__}")
        dtype = torch_dtype(ev.scalar_type)
        expected = tuple(ev.sizes)
        if given.dtype != dtype:
            raise ValueError(
                f"input {position} has dtype {given.dtype}, the program expects {dtype}: convert it "
                f"with .to({dtype})"
            )
        static = ev.shape_dynamism == schema.TensorShapeDynamism.STATIC
        if tuple(given.shape) != expected and (
            static or given.dim() != len(expected) or given.numel() > self.full_tensor(idx).numel()
        ):
            raise ValueError(
                f"input {position} has shape {tuple(given.shape)}, the program expects {expected}"
                + ("" if static else " (an upper bound)")
            )
        if ev.allocation_info is None:
            self.values[idx] = given
        else:
            self.store(idx, given.detach())


def _storage_elements(sizes: list[int], strides: list[int]) -> int:
    """How many elements a dense strided tensor spans in its storage."""
    if any(s == 0 for s in sizes):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(sizes, strides, strict=True))
