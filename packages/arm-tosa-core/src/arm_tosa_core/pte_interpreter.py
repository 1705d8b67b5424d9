"""Run an ExecuTorch ``.pte`` program on the host, in Python.

The program is read with ExecuTorch's own serializer (``deserialize_pte_binary``, which also folds
delegate, constant and mutable-data segments back into the Program). Its execution plan is then
interpreted instruction by instruction: KernelCalls run the matching torch ops (see
``pte_kernels``), DelegateCalls go to a caller-supplied ``DelegateRunner``, and
JumpFalse/Move/Free calls follow the runtime's semantics. Planned tensors live in byte arenas laid
out as the memory planner decided (see ``pte_values``), so aliasing matches the runtime.

    outputs = run_pte(pte_bytes, [x], delegate_runner=my_runner)
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from executorch.exir import schema
from executorch.exir._serialize._program import PTEFile, deserialize_pte_binary

from arm_tosa_core.pte_kernels import call_kernel
from arm_tosa_core.pte_values import ValueTable, torch_dtype


class CompileSpecLike(Protocol):
    """A delegate compile spec: a key and its raw value (ExecuTorch's ``CompileSpec`` fits)."""

    key: str
    value: bytes


DelegateRunner = Callable[
    [str, bytes, list[CompileSpecLike], list[torch.Tensor]], list[torch.Tensor]
]
"""(backend_id, processed_bytes, compile_specs, input tensors) -> output tensors."""


@dataclass(frozen=True)
class DelegateInfo:
    """One entry of a method's delegate table.

    Attributes:
        backend_id: the backend that lowered it (the BackendDetails class name).
        processed: the bytes its preprocess() returned, wherever the .pte stores them.
        compile_specs: the compile specs it was lowered with.
        index: its position in the method's delegate table (DelegateCall.delegate_index).
    """

    backend_id: str
    processed: bytes
    compile_specs: list[CompileSpecLike]
    index: int


_FILE_IDENTIFIER = re.compile(rb"ET[0-9]{2}")


def _load(pte: bytes | str | os.PathLike) -> PTEFile:
    """Reads and deserializes a .pte, with segments folded back into the Program."""
    if isinstance(pte, (bytes, bytearray, memoryview)):
        data = bytes(pte)
        where = "the given bytes"
    elif isinstance(pte, (str, os.PathLike)):
        data = Path(pte).read_bytes()
        where = str(pte)
    else:
        raise TypeError(f"pte must be bytes or a path, got {type(pte).__name__}")
    # A .pte is a flatbuffer whose file identifier ("ET" + schema version) sits at bytes 4..8.
    if len(data) < 8 or not _FILE_IDENTIFIER.fullmatch(data[4:8]):
        raise ValueError(
            f"{where} is not an ExecuTorch .pte program (no 'ETxx' file identifier at bytes 4..8); "
            "pass the bytes of ExecutorchProgramManager.buffer or the path of a .pte file"
        )
    try:
        return _deserialize(data)
    except Exception as err:  # the flatbuffer reader raises assorted errors on corrupt input
        raise ValueError(f"{where} looks like a .pte but could not be read: {err}") from err


@functools.lru_cache(maxsize=8)
def _deserialize(data: bytes) -> PTEFile:
    # Parsing is pure Python and dominates small runs; nothing here mutates the parsed program.
    return deserialize_pte_binary(data)


def _plan(pte_file: PTEFile, method: str) -> schema.ExecutionPlan:
    plans = pte_file.program.execution_plan
    for plan in plans:
        if plan.name == method:
            return plan
    raise ValueError(
        f"the program has no method '{method}'; it has: {', '.join(p.name for p in plans)}"
    )


def _processed(program: schema.Program, delegate: schema.BackendDelegate) -> bytes:
    ref = delegate.processed
    # deserialize_pte_binary has already moved segment-stored blobs inline.
    if ref.location != schema.DataLocation.INLINE or ref.index >= len(
        program.backend_delegate_data
    ):
        raise ValueError(
            f"malformed .pte: delegate '{delegate.id}' data reference {ref} cannot be resolved"
        )
    return bytes(program.backend_delegate_data[ref.index].data)


def list_delegates(pte: bytes | str | os.PathLike) -> list[DelegateInfo]:
    """The delegates of every method of a .pte, in method order then delegate-table order."""
    pte_file = _load(pte)
    program = pte_file.program
    return [
        DelegateInfo(d.id, _processed(program, d), list(d.compile_specs), i)
        for plan in program.execution_plan
        for i, d in enumerate(plan.delegates)
    ]


def run_pte(
    pte: bytes | str | os.PathLike,
    inputs: Sequence[torch.Tensor],
    delegate_runner: DelegateRunner,
    method: str = "forward",
) -> list[torch.Tensor]:
    """Executes `method` of a .pte on the host and returns its outputs.

    Non-delegated operators run as torch ops; each DelegateCall calls
    ``delegate_runner(backend_id, processed, compile_specs, inputs)``, which must return the
    delegate's outputs (shapes and dtypes as the program declares them).

    Raises:
        ValueError: `pte` is not a readable .pte, the method is missing, or inputs do not fit.
        NotImplementedError: the program names an operator torch does not provide.
    """
    pte_file = _load(pte)
    plan = _plan(pte_file, method)
    if len(inputs) != len(plan.inputs):
        raise ValueError(
            f"method '{method}' takes {len(plan.inputs)} inputs, {len(inputs)} were given"
        )
    run = _MethodRun(pte_file, plan, delegate_runner)
    for position, (idx, given) in enumerate(zip(plan.inputs, inputs, strict=True)):
        run.values.bind_input(position, idx, given)
    run.execute()
    return [_detach_output(run.values.get(idx)) for idx in plan.outputs]


def _detach_output(val: Any) -> Any:
    # Planned outputs are views into this run's arenas: hand back independent tensors.
    return val.clone() if isinstance(val, torch.Tensor) else val


class _MethodRun:
    """One execution of one execution plan."""

    def __init__(
        self, pte_file: PTEFile, plan: schema.ExecutionPlan, runner: DelegateRunner
    ) -> None:
        self.program = pte_file.program
        self.plan = plan
        self.runner = runner
        self.values = ValueTable(pte_file, plan)

    def execute(self) -> None:
        for chain in self.plan.chains:
            refs = _References(self.plan, chain)
            instructions = chain.instructions
            pc = 0
            while pc < len(instructions):
                pc = self._step(pc, instructions[pc].instr_args, refs)

    def _step(self, pc: int, ins: Any, refs: _References) -> int:
        if isinstance(ins, schema.KernelCall):
            op = self.plan.operators[ins.op_index]
            call_kernel(self.values, op.name, op.overload, list(ins.args))
        elif isinstance(ins, schema.DelegateCall):
            self._delegate(pc, ins, refs)
        elif isinstance(ins, schema.MoveCall):
            # The runtime copies the EValue: for tensors that makes move_to an alias of move_from.
            self.values.values[ins.move_to] = self.values.values[ins.move_from]
        elif isinstance(ins, schema.JumpFalseCall):
            cond = self.values.get(ins.cond_value_index)
            truth = bool(cond.all()) if isinstance(cond, torch.Tensor) else bool(cond)
            if not truth:
                return ins.destination_instruction
        elif isinstance(ins, schema.FreeCall):
            freed = self.values.values[ins.value_index]
            if isinstance(freed, torch.Tensor):
                self.values.values[ins.value_index] = torch.empty(0, dtype=freed.dtype)
        else:
            raise NotImplementedError(f"instruction {type(ins).__name__} is not supported")
        return pc + 1

    def _delegate(self, pc: int, call: schema.DelegateCall, refs: _References) -> None:
        delegate = self.plan.delegates[call.delegate_index]
        args = list(call.args)
        n_in = refs.delegate_input_count(pc, args, self.values)
        ins = []
        for idx in args[:n_in]:
            val = self.values.get(idx)
            ins.append(val.clone() if isinstance(val, torch.Tensor) else torch.tensor(val))
        outs = self.runner(
            delegate.id, _processed(self.program, delegate), list(delegate.compile_specs), ins
        )
        out_ids = args[n_in:]
        if len(outs) != len(out_ids):
            raise RuntimeError(
                f"delegate {call.delegate_index} ('{delegate.id}') returned {len(outs)} outputs; "
                f"the program expects {len(out_ids)} (after {n_in} inputs among its {len(args)} "
                "arguments)"
            )
        for k, (idx, got) in enumerate(zip(out_ids, outs, strict=True)):
            got = torch.as_tensor(got)
            want = self.values.values[idx]
            if isinstance(want, torch.Tensor) and got.dtype != want.dtype:
                raise ValueError(
                    f"delegate '{delegate.id}' output {k} has dtype {got.dtype}, the program "
                    f"expects {want.dtype}"
                )
            self.values.store(idx, got)


class _References:
    """Where each value is first and last referenced in a chain, to split DelegateCall args.

    A DelegateCall lists the delegate's inputs then its outputs, and the .pte does not record how
    many of each. The emitter creates the output values when it emits the call, so they are the
    trailing run of consecutive value ids that no earlier instruction references.
    """

    def __init__(self, plan: schema.ExecutionPlan, chain: schema.Chain) -> None:
        self.plan_inputs = set(plan.inputs)
        self.plan_outputs = set(plan.outputs)
        self.first: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self._split: dict[int, int] = {}  # DelegateCall pc -> number of inputs
        for pc, ins in enumerate(chain.instructions):
            for idx in _referenced(plan, ins.instr_args):
                self.first.setdefault(idx, pc)
                self.last[idx] = pc

    def delegate_input_count(self, pc: int, args: list[int], values: ValueTable) -> int:
        if pc not in self._split:
            self._split[pc] = self._input_count(pc, args, values)
        return self._split[pc]

    def _input_count(self, pc: int, args: list[int], values: ValueTable) -> int:
        def fresh(idx: int) -> bool:
            ev = values.evalues[idx].val
            return (
                isinstance(ev, schema.Tensor)
                and not values.is_constant(idx)
                and idx not in self.plan_inputs
                and self.first.get(idx) == pc
            )

        start = len(args)
        while start > 0 and fresh(args[start - 1]):
            if start < len(args) and args[start - 1] + 1 != args[start]:
                break
            start -= 1
        if start == len(args):
            raise NotImplementedError(
                f"cannot tell the outputs of the DelegateCall at instruction {pc} from its inputs "
                f"(arguments {args}): no trailing value is created by the call"
            )
        # A static view the emitter elided (no instruction, storage shared with its base) can be
        # the last input with an id just below the outputs'. Unlike an output, nothing reads it
        # afterwards, and its storage is exactly that of a value written earlier.
        if len(args) - start >= 2 and self._is_elided_view_input(args[start], pc, values):
            start += 1
        return start

    def _is_elided_view_input(self, idx: int, pc: int, values: ValueTable) -> bool:
        if self.last.get(idx) != pc or idx in self.plan_outputs:
            return False
        region = _region(values.evalues[idx].val)
        if region is None:
            return False
        return any(
            _region(values.evalues[other].val) == region
            for other, first in self.first.items()
            if first < pc and other != idx
        ) or any(_region(values.evalues[i].val) == region for i in self.plan_inputs)


def _region(t: Any) -> tuple[int, int, int] | None:
    """(memory id, byte offset, bytes) of a planned tensor."""
    if not isinstance(t, schema.Tensor) or t.allocation_info is None:
        return None
    numel = 1
    for s in t.sizes:
        numel *= s
    itemsize = torch.empty(0, dtype=_dtype_or_byte(t.scalar_type)).element_size()
    return (t.allocation_info.memory_id, t.allocation_info.memory_offset, numel * itemsize)


def _dtype_or_byte(scalar_type: int) -> torch.dtype:
    try:
        return torch_dtype(scalar_type)
    except NotImplementedError:
        return torch.uint8


def _referenced(plan: schema.ExecutionPlan, ins: Any) -> list[int]:
    """Value ids an instruction touches, including the members of list values it passes."""
    if isinstance(ins, (schema.KernelCall, schema.DelegateCall)):
        direct = list(ins.args)
    elif isinstance(ins, schema.MoveCall):
        direct = [ins.move_from, ins.move_to]
    elif isinstance(ins, schema.JumpFalseCall):
        direct = [ins.cond_value_index]
    elif isinstance(ins, schema.FreeCall):
        direct = [ins.value_index]
    else:
        direct = []
    out = list(direct)
    for idx in direct:
        val = plan.values[idx].val if 0 <= idx < len(plan.values) else None
        if isinstance(val, (schema.TensorList, schema.OptionalTensorList, schema.IntList)):
            out.extend(i for i in val.items if i >= 0)
    return out
