"""extract_vgf: write every VGF delegate of a .pte as a .vgf file with a JSON sidecar.

Sidecar (`<stem>_<index>.json`, beside `<stem>_<index>.vgf`): what `describe_vgf` reports
(vgf_version, inputs, outputs, modules, segments, constants) plus where the VGF came from
(pte, method, delegate_index, compile_spec). Each input/output lists index, name, binding,
descriptor_set, shape, dtype, vk_format, scale and zero_point; scale/zero_point are filled when
the program quantizes that boundary tensor on the CPU (a quantize_per_tensor writing a delegate
input, a dequantize_per_tensor reading a delegate output) and null for float boundaries.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from executorch.exir import schema
from executorch.exir._serialize._program import deserialize_pte_binary

from arm_tosa_core import TosaCompileSpec
from arm_tosa_core.pte_delegates import list_delegates

from .backend import BACKEND_ID
from .vgf_file import describe_vgf

_QUANTIZE = "quantized_decomposed::quantize_per_tensor"
_DEQUANTIZE = "quantized_decomposed::dequantize_per_tensor"


def _scalar(plan: schema.ExecutionPlan, idx: int) -> float | int | None:
    val = plan.values[idx].val if 0 <= idx < len(plan.values) else None
    if isinstance(val, schema.Double):
        return float(val.double_val)
    if isinstance(val, schema.Int):
        return int(val.int_val)
    return None  # e.g. the .tensor overloads, whose scale is a tensor: not described


def _boundary_qparams(plan: schema.ExecutionPlan) -> tuple[dict, dict, dict]:
    """(delegate index -> call args, value -> qparams of the quantize writing it,
    value -> qparams of the dequantize reading it)."""
    calls: dict[int, list[int]] = {}
    written: dict[int, dict] = {}
    read: dict[int, dict] = {}
    for chain in plan.chains:
        for ins in chain.instructions:
            args = ins.instr_args
            if isinstance(args, schema.DelegateCall):
                calls.setdefault(args.delegate_index, list(args.args))
            elif isinstance(args, schema.KernelCall):
                name = plan.operators[args.op_index].name
                if name in (_QUANTIZE, _DEQUANTIZE) and len(args.args) >= 3:
                    q = {"scale": _scalar(plan, args.args[1]), "zero_point": _scalar(plan, args.args[2])}
                    # out variants: (input, scale, zero_point, quant_min, quant_max, dtype, out)
                    (written if name == _QUANTIZE else read)[args.args[-1 if name == _QUANTIZE else 0]] = q
    return calls, written, read


def _fill_qparams(info: dict, call_args: list[int] | None, written: dict, read: dict) -> None:
    n_in, n_out = len(info["inputs"]), len(info["outputs"])
    if call_args is None or len(call_args) != n_in + n_out:
        return  # cannot tell which value feeds which VGF tensor: leave them null
    for entry, value in zip(info["inputs"], call_args[:n_in], strict=True):
        entry.update(written.get(value, {}))
    for entry, value in zip(info["outputs"], call_args[n_in:], strict=True):
        entry.update(read.get(value, {}))


def _decode_settings(compile_specs: list) -> dict[str, Any] | None:
    try:
        return TosaCompileSpec.settings_from_list(compile_specs)
    except ValueError:
        return None


def extract_vgf(pte_path: str | os.PathLike | bytes, out_dir: str | os.PathLike) -> list[Path]:
    """Write each VGF delegate of a .pte as `<out_dir>/<stem>_<index>.vgf` plus a `.json` sidecar.

    `stem` is the .pte file's stem ("program" when bytes are given); `index` counts the VGF
    delegates in method order, then delegate-table order. Returns the .vgf paths.
    Raises ValueError when the file is not a .pte or holds no VgfBackend delegate.
    """
    if isinstance(pte_path, (bytes, bytearray, memoryview)):
        data, stem, where, pte_name = bytes(pte_path), "program", "the given .pte bytes", None
    else:
        path = Path(pte_path)
        if not path.is_file():
            raise FileNotFoundError(f"no .pte file at {path}")
        data, stem, where, pte_name = path.read_bytes(), path.stem, str(path), path.name
    delegates = list_delegates(data)  # validates the file and resolves segment-stored payloads
    if not any(d.backend_id == BACKEND_ID for d in delegates):
        found = sorted({d.backend_id for d in delegates}) or ["none"]
        raise ValueError(f"{where} holds no {BACKEND_ID} delegate (delegates: {', '.join(found)}); "
                         "lower the model with VgfPartitioner(VgfCompileSpec()) to get VGF payloads")
    plans = deserialize_pte_binary(data).program.execution_plan
    owners = [(plan, i) for plan in plans for i in range(len(plan.delegates))]  # list_delegates order
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written_paths: list[Path] = []
    boundaries: dict[str, tuple] = {}
    for delegate, (plan, index) in zip(delegates, owners, strict=True):
        if delegate.backend_id != BACKEND_ID:
            continue
        if plan.name not in boundaries:
            boundaries[plan.name] = _boundary_qparams(plan)
        calls, q_written, q_read = boundaries[plan.name]
        info = describe_vgf(delegate.processed)
        _fill_qparams(info, calls.get(index), q_written, q_read)
        vgf_path = out / f"{stem}_{len(written_paths)}.vgf"
        sidecar = {"pte": pte_name, "method": plan.name, "delegate_index": index, "vgf_file": vgf_path.name,
                   "compile_spec": _decode_settings(delegate.compile_specs), **info}
        vgf_path.write_bytes(delegate.processed)
        vgf_path.with_suffix(".json").write_text(json.dumps(sidecar, indent=1) + "\n")
        written_paths.append(vgf_path)
    return written_paths
