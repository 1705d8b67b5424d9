"""The competitor's flows (ExecuTorch's own Arm backend), timed and measured for comparison.

This is the only place in the project that imports ``executorch.backends.arm``. Its class names
(``EthosUBackend``, ``TOSABackend`` ...) collide with ours in ExecuTorch's backend registry, so never
import our backends in the same process: call these flows through ``run_isolated``, which runs one
flow in a fresh spawned interpreter and returns its result dict.

Each flow takes ``(module, example_inputs)`` and returns a flat dict:
  timings (seconds): import_s (first import of the upstream backend in this process, 0 after),
    export_s (torch.export, twice for INT: before and after quantization), quantize_s
    (prepare_pt2e + calibration on the example inputs + convert_pt2e), lower_s
    (to_edge_transform_and_lower, which for Ethos-U includes upstream's own vela run), total_s
    (export + quantize + lower), to_executorch_s (serializing the .pte, reported apart);
    lower_cpu_s, flow_cpu_s (process CPU seconds: less sensitive to a busy machine than wall time);
  TOSA graph: tosa_files, tosa_ops (CONST ops included), tosa_compute_ops (without CONST and
    CONST_SHAPE), tosa_transpose, tosa_rescale, tosa_table, tosa_op_counts (counted in the distinct
    .tosa files upstream dumps with ``dump_intermediate_artifacts_to``);
  partition: delegated_nodes, total_nodes, partition_share, partitions, not_delegated (op -> count),
    counted on the edge program after lowering (call_function nodes, getitem not counted);
  Ethos-U: vela_* numbers read from the summary CSV of upstream's own vela run, and vela_s, the wall
    time of a second, quiet vela run on the dumped TOSA with upstream's flags (vela's share of
    lower_s);
  error / root_cause / traceback_tail: set instead of the numbers when the flow raised.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import operator
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from arm_tosa_core.tosa_inspect import tosa_op_counts

_FIRST_IMPORT = True


def _import_upstream() -> float:
    """Import the upstream backend once, returning how long the first import took."""
    global _FIRST_IMPORT
    t0 = time.perf_counter()
    import executorch.backends.arm.ethosu  # noqa: F401
    import executorch.backends.arm.quantizer  # noqa: F401
    import executorch.backends.arm.tosa.partitioner  # noqa: F401
    import executorch.backends.arm.vgf  # noqa: F401

    took, _FIRST_IMPORT = (time.perf_counter() - t0 if _FIRST_IMPORT else 0.0), False
    return took


def _quantize(module: torch.nn.Module, inputs: tuple, quantizer: Any) -> tuple[Any, float, float]:
    """PT2E post-training quantization; returns (exported quantized program, export_s, quantize_s)."""
    from executorch.backends.arm.quantizer import get_symmetric_quantization_config
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    t0 = time.perf_counter()
    # With torch 2.13, .module() inserts a `_guards_fn` call_module node by default, and upstream's
    # quantizer passes die on it ("call_module is not supported"); check_guards=False avoids it.
    graph_module = torch.export.export(module, inputs).module(check_guards=False)
    t1 = time.perf_counter()
    quantizer.set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(graph_module, quantizer)
    prepared(*inputs)  # calibration on the example inputs
    quantized = convert_pt2e(prepared)
    t2 = time.perf_counter()
    ep = torch.export.export(quantized, inputs)
    t3 = time.perf_counter()
    return ep, (t1 - t0) + (t3 - t2), t2 - t1


def _partition_stats(edge: Any) -> dict[str, Any]:
    """Share of call_function nodes that went into delegates (getitem bookkeeping not counted)."""
    gm = edge.exported_program().graph_module
    delegated, partitions, rest = 0, 0, Counter()
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        if "executorch_call_delegate" in str(node.target):
            partitions += 1
            lowered = getattr(gm, node.args[0].target)
            delegated += sum(
                1
                for n in lowered.original_module.graph.nodes
                if n.op == "call_function" and n.target is not operator.getitem
            )
        else:
            rest[str(getattr(node.target, "__name__", node.target))] += 1
    total = delegated + sum(rest.values())
    return {
        "delegated_nodes": delegated,
        "total_nodes": total,
        "partition_share": delegated / total if total else 0.0,
        "partitions": partitions,
        "not_delegated": dict(rest),
    }


def _unique_tosa_files(dump_dir: Path) -> list[Path]:
    """The dumped .tosa files, one per distinct content.

    The Ethos-U flow writes each delegate twice (``output_tag<N>_<spec>.tosa`` and vela's input
    ``out.tosa``), so identical files are counted once.
    """
    seen: dict[str, Path] = {}
    for f in sorted(dump_dir.rglob("*.tosa")):
        seen.setdefault(hashlib.sha256(f.read_bytes()).hexdigest(), f)
    return sorted(seen.values())


def _tosa_stats(dump_dir: Path) -> dict[str, Any]:
    files = _unique_tosa_files(dump_dir)
    counts: Counter[str] = Counter()
    for f in files:
        counts += tosa_op_counts(f.read_bytes())
    return {
        "tosa_files": len(files),
        "tosa_ops": sum(counts.values()),
        # CONST / CONST_SHAPE are operators in TOSA 1.0 flatbuffers; compute ops leave them out.
        "tosa_compute_ops": sum(v for k, v in counts.items() if k not in ("CONST", "CONST_SHAPE")),
        "tosa_transpose": counts["TRANSPOSE"],
        "tosa_rescale": counts["RESCALE"],
        "tosa_table": counts["TABLE"],
        "tosa_op_counts": dict(counts.most_common()),
    }


def _lower(
    ep: Any, partitioner: Any, dump_dir: Path, serialize: bool = True
) -> tuple[dict[str, Any], Any]:
    from executorch.exir import to_edge_transform_and_lower

    t0, c0 = time.perf_counter(), time.process_time()
    edge = to_edge_transform_and_lower(ep, partitioner=[partitioner])
    t1 = time.perf_counter()
    # CPU seconds of this process too: wall time on a shared 2-core machine is noisy.
    out: dict[str, Any] = {"lower_s": t1 - t0, "lower_cpu_s": time.process_time() - c0}
    out |= _partition_stats(edge)  # before to_executorch, which adds memory-planning nodes
    if serialize:
        pte = edge.to_executorch()
        out["pte_bytes"] = len(pte.buffer)
        out["to_executorch_s"] = time.perf_counter() - t1
    out |= _tosa_stats(dump_dir)
    return out, edge


def _guard(flow: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """Record an exception as ``error`` (with the traceback tail) instead of raising."""

    def wrapped(*args: Any, **kwargs: Any) -> dict[str, Any]:
        t0, c0, load = time.perf_counter(), time.process_time(), os.getloadavg()[0]
        try:
            res = flow(*args, **kwargs)
            res |= {"flow_wall_s": time.perf_counter() - t0, "flow_cpu_s": time.process_time() - c0}
            return res | {"loadavg_1m_at_start": load, "torch_threads": torch.get_num_threads()}
        except Exception as exc:  # noqa: BLE001 - a failing upstream flow is a measurement too
            tb = traceback.format_exc().strip().splitlines()
            root = exc
            while root.__cause__ is not None or root.__context__ is not None:
                root = root.__cause__ or root.__context__
            return {
                "error": f"{type(exc).__name__}: {exc}"[:2000],
                "root_cause": f"{type(root).__name__}: {root}"[:2000],
                "traceback_tail": "\n".join(tb[-12:]),
                "failed_after_s": time.perf_counter() - t0,
            }

    wrapped.__name__ = flow.__name__
    wrapped.__doc__ = flow.__doc__
    wrapped.__wrapped__ = flow  # type: ignore[attr-defined]
    return wrapped


@_guard
def upstream_tosa(
    module: torch.nn.Module, inputs: tuple, spec: str = "TOSA-1.0+FP", workdir: str | None = None
) -> dict[str, Any]:
    """Upstream TOSA flow: export, (INT: TOSAQuantizer PTQ), TOSAPartitioner lowering."""
    import_s = _import_upstream()
    from executorch.backends.arm.quantizer import TOSAQuantizer
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from executorch.backends.arm.tosa.partitioner import TOSAPartitioner

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        compile_spec = TosaCompileSpec(spec)
        compile_spec.dump_intermediate_artifacts_to(tmp)
        if "+INT" in spec and "+FP" not in spec:
            ep, export_s, quantize_s = _quantize(module, inputs, TOSAQuantizer(compile_spec))
        else:
            t0 = time.perf_counter()
            ep, quantize_s = torch.export.export(module, inputs), 0.0
            export_s = time.perf_counter() - t0
        res, _ = _lower(ep, TOSAPartitioner(compile_spec), Path(tmp))
    total = export_s + quantize_s + res["lower_s"]
    return {"flow": f"upstream_tosa[{spec}]", "import_s": import_s, "export_s": export_s,
            "quantize_s": quantize_s, "total_s": total} | res  # fmt: skip


_VELA_SUMMARY_FIELDS = {
    "cycles_npu": "vela_npu_cycles",
    "cycles_total": "vela_total_cycles",
    "inference_time": "vela_inference_time_s",
    "sram_memory_used": "vela_sram_kib",
    "off_chip_flash_memory_used": "vela_flash_kib",
    "on_chip_flash_memory_used": "vela_on_chip_flash_kib",
    "dram_memory_used": "vela_dram_kib",
}


def _read_vela_summary(csv_path: Path) -> dict[str, float]:
    with csv_path.open() as fh:
        row = next(csv.DictReader(fh))
    return {
        dst: float(row[src])
        for src, dst in _VELA_SUMMARY_FIELDS.items()
        if row.get(src) not in ("", None)
    }


def _time_vela(tosa_file: Path, flags: list[str], out_dir: Path) -> float:
    """Re-run vela on a dumped TOSA file with upstream's flags (quietly); return its wall time."""
    from ethosu.vela import vela

    args = [str(tosa_file), f"--output-dir={out_dir}", *flags]
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        rc = vela.main(args)
    if rc != 0:
        raise RuntimeError(f"vela failed with exit code {rc} on {tosa_file.name}")
    return time.perf_counter() - t0


@_guard
def upstream_ethosu(
    module: torch.nn.Module,
    inputs: tuple,
    target: str = "ethos-u55-128",
    workdir: str | None = None,
) -> dict[str, Any]:
    """Upstream Ethos-U flow: EthosUQuantizer PTQ, EthosUPartitioner lowering (runs vela inside)."""
    import_s = _import_upstream()
    from executorch.backends.arm.ethosu import EthosUCompileSpec, EthosUPartitioner
    from executorch.backends.arm.quantizer import EthosUQuantizer

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        tmp_path = Path(tmp)
        compile_spec = EthosUCompileSpec(target)
        compile_spec.dump_intermediate_artifacts_to(str(tmp_path / "upstream"))
        ep, export_s, quantize_s = _quantize(module, inputs, EthosUQuantizer(compile_spec))
        res, _ = _lower(ep, EthosUPartitioner(compile_spec), tmp_path / "upstream")
        # Upstream's own vela run leaves one summary CSV per delegate; several delegates add up.
        vela: dict[str, Any] = {"vela_flags": " ".join(compile_spec.compiler_flags)}
        for summary in sorted((tmp_path / "upstream").rglob("*_summary_*.csv")):
            for k, v in _read_vela_summary(summary).items():
                vela[k] = vela.get(k, 0.0) + v
        vela["vela_s"] = 0.0
        for i, tosa_file in enumerate(_unique_tosa_files(tmp_path / "upstream")):
            out_dir = tmp_path / f"vela{i}"
            out_dir.mkdir()
            vela["vela_s"] += _time_vela(tosa_file, list(compile_spec.compiler_flags), out_dir)
    total = export_s + quantize_s + res["lower_s"]
    return {"flow": f"upstream_ethosu[{target}]", "import_s": import_s, "export_s": export_s,
            "quantize_s": quantize_s, "total_s": total} | res | vela  # fmt: skip


@_guard
def upstream_vgf(
    module: torch.nn.Module, inputs: tuple, precision: str = "fp", workdir: str | None = None
) -> dict[str, Any]:
    """Upstream VGF flow: ``precision`` "fp" (TOSA-1.0+FP) or "int8" (VgfQuantizer PTQ, +INT)."""
    if precision not in ("fp", "int8"):
        raise ValueError(f"precision must be 'fp' or 'int8', got {precision!r}")
    # The ML SDK wheel installs `model-converter` next to this interpreter; `uv run` puts that
    # folder on PATH, a bare `.venv/bin/python` does not, and upstream looks the tool up on PATH.
    if shutil.which("model-converter") is None:
        os.environ["PATH"] = (
            f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        )
    import_s = _import_upstream()
    from executorch.backends.arm.quantizer import VgfQuantizer
    from executorch.backends.arm.vgf import VgfCompileSpec, VgfPartitioner

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        compile_spec = VgfCompileSpec("TOSA-1.0+FP" if precision == "fp" else "TOSA-1.0+INT")
        compile_spec.dump_intermediate_artifacts_to(tmp)
        if precision == "int8":
            ep, export_s, quantize_s = _quantize(module, inputs, VgfQuantizer(compile_spec))
        else:
            t0 = time.perf_counter()
            ep, quantize_s = torch.export.export(module, inputs), 0.0
            export_s = time.perf_counter() - t0
        res, _ = _lower(ep, VgfPartitioner(compile_spec), Path(tmp))
        res["vgf_files"] = len(list(Path(tmp).rglob("*.vgf")))
    total = export_s + quantize_s + res["lower_s"]
    return {"flow": f"upstream_vgf[{precision}]", "import_s": import_s, "export_s": export_s,
            "quantize_s": quantize_s, "total_s": total} | res  # fmt: skip


FLOWS: dict[str, Callable[..., dict[str, Any]]] = {
    "tosa": upstream_tosa,
    "ethosu": upstream_ethosu,
    "vgf": upstream_vgf,
}


def _call_flow(flow: str, module: torch.nn.Module, inputs: tuple, kwargs: dict) -> dict[str, Any]:
    # Upstream's vela call prints its network summary; keep the parent's output a table.
    with contextlib.redirect_stdout(io.StringIO()):
        return FLOWS[flow](module, inputs, **kwargs)


def run_isolated(
    flow: str, module: torch.nn.Module, inputs: tuple, **kwargs: Any
) -> dict[str, Any]:
    """Run one upstream flow in a fresh spawned Python process and return its result dict.

    The module and inputs are pickled to the child, so the module's class must be importable there
    (the bundled example models are). Upstream's backends are then never loaded in this process.
    """
    if flow not in FLOWS:
        raise ValueError(f"unknown flow {flow!r}; valid flows: {', '.join(FLOWS)}")
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn")) as pool:
        return pool.submit(_call_flow, flow, module, inputs, kwargs).result()
