"""A thin builder over `tosa_serializer` so lowering rules read like the math.

`b.op(Op.ADD, [x, y], shape, DType.FP32)` adds the operator with its (possibly empty) attribute, creates
the output tensor and records which torch node it came from (for `dump_debug_info`). The graph is
stamped TOSA 1.0, not the serializer's 1.1 draft default.

Control flow (TOSA's controlflow extension) is one mechanism: `b.sub_block("then")` opens a named basic
block (serialized in a region of its own, which is what COND_IF/WHILE_LOOP attributes name), built with
the same methods as the main graph, and `b.control_flow(Op.COND_IF, inputs, [then, else_], outputs)`
emits the operator that runs those blocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from . import transpose_forms
from .errors import LoweringError, MissingToolError

try:
    import tosa_serializer as ts
except ImportError as exc:  # pragma: no cover - exercised only without tosa-tools
    raise MissingToolError(
        "tosa-tools is not installed: the TOSA serializer is needed to build TOSA flatbuffers. "
        "Install it with `uv pip install tosa-tools==2026.8.0` (or `uv sync` in this workspace)."
    ) from exc

DType = ts.DType
Op = ts.Op

from .op_dtypes import illegal_reason, narrow_integer_plan  # noqa: E402  (needs tosa_serializer)

_TORCH_TO_TOSA = {
    torch.float32: DType.FP32,
    torch.float16: DType.FP16,
    torch.bfloat16: DType.BF16,
    torch.int8: DType.INT8,
    torch.int16: DType.INT16,
    torch.int32: DType.INT32,
    torch.int64: DType.INT32,  # narrowed: TOSA 1.0 profiles have no 64-bit integers
    torch.bool: DType.BOOL,
}
_NUMPY_FOR = {
    DType.FP32: np.float32, DType.FP16: np.float16, DType.INT4: np.int8, DType.INT8: np.int8, DType.INT16: np.int16,
    DType.INT32: np.int32, DType.BOOL: np.bool_, DType.INT48: np.int64,
}
# Attribute builder method for each op, found by name: Op.MATMUL -> "MatMulAttribute".
_ATTRIBUTE_FOR = {
    name[: -len("Attribute")].lower(): name
    for name in dir(ts.TosaSerializerAttribute) if name.endswith("Attribute")
}


def tosa_dtype(dtype: torch.dtype) -> DType:
    """The TOSA dtype that carries a torch dtype (int64 narrows to INT32)."""
    try:
        return _TORCH_TO_TOSA[dtype]
    except KeyError:
        raise TypeError(f"dtype {dtype} has no TOSA equivalent; supported: "
                        f"{sorted(str(d) for d in _TORCH_TO_TOSA)}") from None


def numpy_dtype(dtype: DType) -> type:
    return _NUMPY_FOR[dtype]


def scalar_bytes(value: float, dtype: DType) -> list[int]:
    """A scalar as the little-endian bytes TOSA attributes (e.g. CLAMP bounds) expect."""
    if dtype == DType.BF16:
        raw = np.float32(value).tobytes()[2:]
    else:
        raw = np.array(value).astype(_NUMPY_FOR[dtype]).tobytes()
    return list(np.frombuffer(raw, dtype=np.uint8))


@dataclass(frozen=True)
class T:
    """A tensor in the TOSA graph: name, physical shape and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: DType


@dataclass
class OpRecord:
    """One emitted operator and the torch node that caused it (the debug map)."""

    index: int
    op: str
    outputs: list[str]
    node: str | None
    target: str | None
    stack_trace: str | None
    module: str = ""  # PyTorch module path of the node ("features.18.0"; "" for the top level)
    torch_op: str = ""  # the op's short name ("conv2d", "add")


@dataclass
class _PendingOp:
    op: Op
    inputs: list[T]
    outputs: list[T]
    attr_args: tuple
    node: torch.fx.Node | None
    blocks: tuple[TosaGraphBuilder, ...] = ()  # the basic blocks a control-flow operator runs

    @property
    def output(self) -> T:
        return self.outputs[0]


def _is_quantize_op(node: torch.fx.Node) -> bool:
    return "quantize_per" in str(node.target)


def module_path(node: torch.fx.Node | None) -> str:
    """The PyTorch module path of a node, from export's ``nn_module_stack`` (innermost module).

    A quantize/dequantize inserted by PT2E takes the path of the value it converts.
    """
    for _ in range(8):
        if node is None:
            return ""
        stack = node.meta.get("nn_module_stack") or {}
        path = str(list(stack.values())[-1][0]) if stack else ""
        path = path.replace("L['self'].", "").replace("L__self___", "")
        if path or not _is_quantize_op(node):
            return path
        if not (_is_quantize_op(node) and node.args and isinstance(node.args[0], torch.fx.Node)):
            return ""
        node = node.args[0]
    return ""


def torch_op_name(node: torch.fx.Node | None) -> str:
    """Short name of a node's op: ``aten.conv2d.default`` -> ``conv2d``."""
    if node is None:
        return ""
    name = getattr(node.target, "__name__", str(node.target)).replace("::", ".")
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] in ("aten", "quantized_decomposed") else parts[0]


class TosaGraphBuilder:
    """Builds one TOSA 1.0 graph (or one basic block of it, see `sub_block`); see module docstring.

    Operators are recorded and serialized at the end, so that chains of RESHAPE/TRANSPOSE fold into
    one and operators whose results nobody uses are dropped.
    """

    def __init__(self, name: str = "main", parent: TosaGraphBuilder | None = None) -> None:
        self.name = name
        self._root: TosaGraphBuilder = self if parent is None else parent._root
        self.current_node: torch.fx.Node | None = None if parent is None else parent.current_node
        self.inputs: list[T] = []
        self.outputs: list[T] = []
        self.records: list[OpRecord] = []
        self._ops: list[_PendingOp] = []
        self._producer: dict[str, _PendingOp] = {}
        self._consts: dict[str, np.ndarray] = {}
        self._count = 0  # used on the root builder only: names are unique across every block
        self._names: set[str] = set() if parent is None else parent._names  # every name given out
        self.rescales: dict[str, tuple] = {}  # RESCALE outputs -> (input, scales, in_zp, out_zp)
        self.fold_rescales = False if parent is None else parent.fold_rescales
        # an int16 product with constant weights RESCALEs its INT48 accumulator to its output with a 16-bit
        # multiplier (Ethos-U85: ops/matmul.py `int16_output_target` says why)
        self.int16_fc_rescale16 = False if parent is None else parent.int16_fc_rescale16
        # whether EXT-INT16's int16 operator forms may be emitted (set by the context)
        self.int16_extension = True if parent is None else parent.int16_extension
        self.check_dtypes = True if parent is None else parent.check_dtypes  # False: invalid graphs on purpose (validator tests)

    # -- tensors -----------------------------------------------------------------------------
    def input(self, shape: Sequence[int], dtype: DType, name: str) -> T:
        """A graph input named `name` (made unique if a tensor already has that name)."""
        if name in self._names:
            name = self._fresh(name)
        self._names.add(name)
        t = T(name, tuple(int(d) for d in shape), dtype)
        self.inputs.append(t)
        return t

    def const(self, values: np.ndarray | torch.Tensor, dtype: DType) -> T:
        if isinstance(values, torch.Tensor):
            values = values.detach().cpu().numpy()
        # astype(order="C") rather than np.ascontiguousarray, which turns a rank-0 array into shape [1]
        arr = np.asarray(values).astype(_NUMPY_FOR[dtype], order="C")
        t = T(self._fresh("const"), tuple(arr.shape), dtype)
        self._consts[t.name] = (arr, dtype)
        return t

    def shape_const(self, values: Sequence[int]) -> T:
        """A TOSA `shape` value (for RESHAPE, SLICE, PAD, TILE, RESIZE operands)."""
        t = T(self._fresh("shape"), (len(values),), DType.SHAPE)
        self._consts[t.name] = (np.array([int(v) for v in values], dtype=np.int64), DType.SHAPE)
        return t

    def const_value(self, t: T) -> np.ndarray | None:
        """The data of a constant tensor (None for runtime tensors)."""
        entry = self._consts.get(t.name)
        return None if entry is None else entry[0]

    def output(self, t: T) -> None:
        self.outputs.append(t)

    # -- operators ---------------------------------------------------------------------------
    def op(self, op: Op, inputs: Sequence[T], shape: Sequence[int], dtype: DType, *attr_args) -> T:
        """Record `op` with inputs and one output of `shape`/`dtype`; `attr_args` go to its attribute.

        int8/int16 operands of an operator TOSA has on int32 only are widened around it, and an
        operator no TOSA 1.0 profile has for these types raises LoweringError (see op_dtypes.py)."""
        in_dtypes = [t.dtype for t in inputs]
        plan = narrow_integer_plan(op, in_dtypes, dtype) if self.check_dtypes else None
        if plan is not None:
            cast, narrow_result = plan
            inputs = [self.op(Op.CAST, [t], t.shape, DType.INT32) if c else t
                      for t, c in zip(inputs, cast, strict=True)]
            wide = self.op(op, inputs, shape, DType.INT32 if narrow_result else dtype, *attr_args)
            return self.op(Op.CAST, [wide], shape, dtype) if narrow_result else wide
        reason = illegal_reason(op, in_dtypes, dtype, self.int16_extension) if self.check_dtypes else None
        if reason is not None:
            raise LoweringError(reason)
        return self._record(op, inputs, [(shape, dtype)], attr_args)[0]

    def _record(self, op: Op, inputs: Sequence[T], outputs: Sequence[tuple[Sequence[int], DType]],
                attr_args: tuple, blocks: Sequence[TosaGraphBuilder] = ()) -> list[T]:
        outs = [T(self._fresh("t"), tuple(int(d) for d in shape), dtype) for shape, dtype in outputs]
        pending = _PendingOp(op, list(inputs), outs, attr_args, self.current_node, tuple(blocks))
        self._ops.append(pending)
        for out in outs:
            self._producer[out.name] = pending
        return outs

    # -- control flow (TOSA controlflow extension) -------------------------------------------
    def sub_block(self, prefix: str) -> TosaGraphBuilder:
        """A new, empty basic block named after `prefix` (unique in the file) for a control-flow
        operator's branch, loop condition or loop body. Give it inputs, operators and outputs like the
        main graph; it sees no tensor of this block (TOSA blocks are isolated: pass values in)."""
        return TosaGraphBuilder(self._fresh(prefix), parent=self)

    def control_flow(self, op: Op, inputs: Sequence[T], blocks: Sequence[TosaGraphBuilder],
                     outputs: Sequence[tuple[Sequence[int], DType]]) -> list[T]:
        """Emit COND_IF (blocks: then, else) or WHILE_LOOP (blocks: cond, body) over `inputs`.

        The attribute names the blocks in the order given; each block's inputs and outputs must
        match the operator's per the TOSA 1.0 spec (the caller, ops/control_flow.py, ensures it).
        """
        return self._record(op, inputs, outputs, tuple(b.name for b in blocks), blocks)

    def op_multi(self, op: Op, inputs: Sequence[T], results: Sequence[tuple[Sequence[int], DType]],
                 *attr_args) -> list[T]:
        """Record `op` with several outputs (RFFT2D: real, imaginary), one per (shape, dtype) in `results`."""
        return self._record(op, inputs, results, attr_args)

    def producer(self, t: T) -> _PendingOp | None:
        return self._producer.get(t.name)

    # -- common shapes of operators ----------------------------------------------------------
    def transpose(self, x: T, perm: Sequence[int]) -> T:
        perm = tuple(perm)
        if perm == tuple(range(len(perm))):
            return x
        src = self.producer(x)
        if src is not None and src.op == Op.TRANSPOSE:  # fold transpose(transpose(y))
            inner = src.attr_args[0]
            return self.transpose(src.inputs[0], [inner[p] for p in perm])
        return self.op(Op.TRANSPOSE, [x], [x.shape[p] for p in perm], x.dtype, list(perm))

    def reshape(self, x: T, shape: Sequence[int]) -> T:
        shape = [int(d) for d in shape]
        src = self.producer(x)
        if src is not None and src.op == Op.RESHAPE:  # fold reshape(reshape(y))
            x = src.inputs[0]
        if tuple(shape) == x.shape:
            return x
        return self.op(Op.RESHAPE, [x, self.shape_const(shape)], shape, x.dtype)

    def zero_point(self, dtype: DType, value: int = 0) -> T:
        """A one-element zero-point operand (TOSA 1.0 passes zero points as tensors)."""
        return self.const(np.array([value]), dtype)

    def identity(self, x: T) -> T:
        return self.op(Op.IDENTITY, [x], x.shape, x.dtype)

    # -- output ------------------------------------------------------------------------------
    def _live_ops(self) -> list[_PendingOp]:
        needed = {t.name for t in self.outputs}
        live = []
        for pending in reversed(self._ops):
            if any(t.name in needed for t in pending.outputs):
                live.append(pending)
                needed.update(t.name for t in pending.inputs)
        return live[::-1]

    def serialize(self) -> bytes:
        """The TOSA 1.0 flatbuffer of every operator that contributes to an output.

        The main graph is the serializer's first region; each sub-block a live control-flow operator
        runs follows in a region of its own (named like the block, as the operator's attribute says).
        """
        ser = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
        self.records = []
        pending_blocks = self._serialize_block(ser, self.records)
        while pending_blocks:
            block = pending_blocks.pop(0)
            ser.startRegion(block.name)
            ser.addBasicBlock(block.name)
            pending_blocks += block._serialize_block(ser, self.records)
        return bytes(ser.serialize())

    def _serialize_block(self, ser, records: list[OpRecord]) -> list[TosaGraphBuilder]:
        """Add this block's tensors and live operators to the serializer's current basic block;
        returns the sub-blocks its control-flow operators run (serialized next, by the caller)."""
        names: dict[str, str] = {}
        objects: dict[str, object] = {}
        for t in self.inputs:
            obj = ts.TosaSerializerTensor(t.name, list(t.shape), t.dtype)
            ser.addInputTensor(obj)
            names[t.name], objects[t.name] = t.name, obj
        live = self._written_transposes(self._live_ops())
        used = {t.name for p in live for t in p.inputs}
        for name, (arr, dtype) in self._consts.items():
            if name in used:
                vals = arr.reshape(-1).tolist() if dtype == DType.INT48 else arr
                objects[name] = ser.addConst(list(arr.shape), dtype, vals, name=name)
                names[name] = name
        blocks: list[TosaGraphBuilder] = []
        for pending in live:
            outs = []
            for t in pending.outputs:
                out = ser.addIntermediate(list(t.shape), t.dtype)
                names[t.name], objects[t.name] = out.name, out
                outs.append(out.name)
            attr = ts.TosaSerializerAttribute()
            method = _ATTRIBUTE_FOR.get(pending.op.name.replace("_", "").lower())
            if method is not None:
                getattr(attr, method)(*pending.attr_args)
            ser.addOperator(pending.op, [names[t.name] for t in pending.inputs], outs, attr)
            blocks += pending.blocks
            node = pending.node
            records.append(OpRecord(
                index=len(records), op=pending.op.name, outputs=outs,
                node=None if node is None else node.name,
                target=None if node is None else str(node.target),
                stack_trace=None if node is None else node.meta.get("stack_trace"),
                module=module_path(node), torch_op=torch_op_name(node),
            ))
        for t in self.outputs:
            ser.addOutputTensor(objects[t.name])
        return blocks

    def _written_transposes(self, live: list[_PendingOp]) -> list[_PendingOp]:
        """`live` with each TRANSPOSE in the form `transpose_forms.transpose_form` set ("collapsed": RESHAPE,
        TRANSPOSE of the fewest axes, RESHAPE; the same bytes in the same places)."""
        if transpose_forms.current_form() != "collapsed":
            return live
        out: list[_PendingOp] = []
        for pending in live:
            fewer = None
            if pending.op == Op.TRANSPOSE:
                fewer = transpose_forms.collapse_for_vela(pending.inputs[0].shape, pending.attr_args[0])
            if fewer is None:
                out.append(pending)
                continue
            (x,), (y,), (shape, perm) = pending.inputs, pending.outputs, fewer
            if list(perm) == sorted(perm):  # only size-1 axes move: a reshape
                out.append(_PendingOp(Op.RESHAPE, [x, self.shape_const(y.shape)], [y], (), pending.node))
                continue
            flat = T(self._fresh("t"), shape, x.dtype)
            moved = T(self._fresh("t"), tuple(shape[p] for p in perm), x.dtype)
            out += [_PendingOp(Op.RESHAPE, [x, self.shape_const(shape)], [flat], (), pending.node),
                    _PendingOp(Op.TRANSPOSE, [flat], [moved], (list(perm),), pending.node),
                    _PendingOp(Op.RESHAPE, [moved, self.shape_const(y.shape)], [y], (), pending.node)]
        return out

    def op_counts(self) -> dict[str, int]:
        """Operator counts of the serialized graph (call after `serialize`)."""
        counts: dict[str, int] = {}
        for record in self.records:
            counts[record.op] = counts.get(record.op, 0) + 1
        return counts

    def _fresh(self, prefix: str) -> str:
        """A new tensor name; never one already given out (a torch input may be called `t_1`)."""
        root = self._root
        while True:
            root._count += 1
            name = f"{prefix}_{root._count}"
            if name not in self._names:
                self._names.add(name)
                return name
