"""The competitor's flows (ExecuTorch's own Arm backend), timed and measured for comparison.

This is the only place in the project that imports ``executorch.backends.arm``. Its class names
(``EthosUBackend``, ``TOSABackend`` ...) collide with ours in ExecuTorch's backend registry, so never
import our backends in the same process: call these flows through ``run_isolated``, which runs one
flow in a fresh interpreter (``bench/flow_worker.py``) and returns its result dict. Nothing here
imports the ``arm_tosa_core`` package either: ``bench_common`` loads the two plain files of it that
this side needs (the TOSA op counter and the example models) by file path.

Each flow takes ``(module, example_inputs)`` and returns a flat dict:
  timings (seconds): import_s (first import of the upstream backend in this process, 0 after),
    export_s (torch.export, twice for INT: before and after quantization), quantize_s
    (prepare_pt2e + calibration on the example inputs + convert_pt2e), lower_s
    (to_edge_transform_and_lower, which for Ethos-U includes upstream's own vela run), total_s
    (export + quantize + lower), to_executorch_s (serializing the .pte, reported apart);
    lower_cpu_s, total_cpu_s, flow_cpu_s (CPU seconds of the process and its children, such as
    the VGF model converter: less sensitive to a busy machine than wall time);
  TOSA graph: tosa_files, tosa_ops (CONST ops included), tosa_compute_ops (without CONST and
    CONST_SHAPE), tosa_transpose, tosa_rescale, tosa_table, tosa_op_counts (counted in the distinct
    .tosa files upstream dumps with ``dump_intermediate_artifacts_to``);
  partition: delegated_nodes, total_nodes, partition_share, partitions, not_delegated (op -> count),
    counted on the edge program after lowering (call_function nodes, getitem not counted);
  Ethos-U: vela_* numbers read from the summary CSV of upstream's own vela run, and vela_s, the wall
    time of a second, quiet vela run on the dumped TOSA with upstream's flags (vela's share of
    lower_s);
  accuracy (TOSA flows): ref_rel_err / ref_sqnr_float_db (upstream's TOSA graph on the TOSA
    reference model against the float model), ref_sqnr_fq_db (against the fake-quant model);
  VGF: vgf_bytes; convert_s (a second, timed model-converter run on the dumped TOSA with upstream's
    flags; convert_same_vgf: it wrote upstream's VGF byte for byte); vgf_path / tosa_path (kept
    copies, when there is one VGF) for ``our_flows.time_vgf_file``;
  error / root_cause / traceback_tail: set instead of the numbers when the flow raised.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import (  # noqa: E402
    cpu_seconds,
    guard,
    layer_summary,
    partition_stats,
    rel_max_error,
    run_isolated_example,
    run_with_tosa_delegates,
    sqnr_db,
    tosa_stats_of_dir,
    unique_files,
)
from vgf_device import time_converter  # noqa: E402

_FIRST_IMPORT = True


def _import_upstream() -> float:
    """Import the upstream backend once, returning how long the first import took."""
    global _FIRST_IMPORT
    if "arm_tosa_core" in sys.modules:  # its TOSABackend would shadow upstream's (same class name)
        raise RuntimeError("arm_tosa_core is imported in this process; run upstream flows through "
                           "run_isolated so that only upstream's backends are registered")
    t0 = time.perf_counter()
    import executorch.backends.arm.ethosu  # noqa: F401
    import executorch.backends.arm.quantizer  # noqa: F401
    import executorch.backends.arm.tosa.partitioner  # noqa: F401
    import executorch.backends.arm.vgf  # noqa: F401

    took, _FIRST_IMPORT = (time.perf_counter() - t0 if _FIRST_IMPORT else 0.0), False
    return took


def _quantize(module: torch.nn.Module, inputs: tuple, quantizer: Any) -> tuple[Any, Any, float, float]:
    """PT2E PTQ: (exported quantized program, fake-quant module, export_s, quantize_s)."""
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
    return ep, quantized, (t1 - t0) + (t3 - t2), t2 - t1


def _lower(ep: Any, partitioner: Any, dump_dir: Path, serialize: bool = True) -> tuple[dict[str, Any], Any]:
    from executorch.exir import to_edge_transform_and_lower

    t0, c0 = time.perf_counter(), cpu_seconds()
    edge = to_edge_transform_and_lower(ep, partitioner=[partitioner])
    t1 = time.perf_counter()
    # CPU seconds too: wall time on a shared 2-core machine is noisy.
    out: dict[str, Any] = {"lower_s": t1 - t0, "lower_cpu_s": cpu_seconds() - c0}
    out |= partition_stats(edge)  # before to_executorch, which adds memory-planning nodes
    if serialize:
        c1 = cpu_seconds()
        pte = edge.to_executorch()
        out["pte_bytes"] = len(pte.buffer)
        out["serialize_s"] = time.perf_counter() - t1
        out["serialize_cpu_s"] = cpu_seconds() - c1
    out |= tosa_stats_of_dir(dump_dir)
    return out, edge


def _tosa_payload(lowered: Any) -> bytes:
    """Upstream's TOSABackend payload is the TOSA flatbuffer itself (file identifier at bytes 4..8)."""
    data = bytes(lowered.processed_bytes)
    if data[4:8] != b"TOSA":
        raise ValueError(f"{lowered.backend_id} payload is not a TOSA flatbuffer")
    return data


def _accuracy(edge: Any, inputs: tuple, float_out: Any, fq_out: Any | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    got = run_with_tosa_delegates(edge, inputs, _tosa_payload)
    res = {"ref_run_s": time.perf_counter() - t0, "ref_rel_err": rel_max_error(float_out, got),
           "ref_sqnr_float_db": sqnr_db(float_out, got)}
    if fq_out is not None:
        res |= {"ref_rel_err_fq": rel_max_error(fq_out, got), "ref_sqnr_fq_db": sqnr_db(fq_out, got)}
    return res


@guard
def upstream_tosa(module: torch.nn.Module, inputs: tuple, spec: str = "TOSA-1.0+FP",
                  accuracy: bool = True, workdir: str | None = None) -> dict[str, Any]:
    """Upstream TOSA flow: export, (INT: TOSAQuantizer PTQ), TOSAPartitioner lowering, reference model."""
    import_s = _import_upstream()
    from executorch.backends.arm.quantizer import TOSAQuantizer
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from executorch.backends.arm.tosa.partitioner import TOSAPartitioner

    with torch.no_grad():
        float_out = module(*inputs)
    c0 = cpu_seconds()
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        compile_spec = TosaCompileSpec(spec)
        compile_spec.dump_intermediate_artifacts_to(tmp)
        fq_out = None
        if "+INT" in spec and "+FP" not in spec:
            ep, quantized, export_s, quantize_s = _quantize(module, inputs, TOSAQuantizer(compile_spec))
            c_fq = cpu_seconds()
            fq_out = quantized(*inputs)
            c0 += cpu_seconds() - c_fq  # the fake-quant reference run is not part of the flow
        else:
            t0 = time.perf_counter()
            ep, quantize_s = torch.export.export(module, inputs), 0.0
            export_s = time.perf_counter() - t0
        res, edge = _lower(ep, TOSAPartitioner(compile_spec), Path(tmp))
        res["total_cpu_s"] = cpu_seconds() - c0 - res["serialize_cpu_s"]
        if accuracy:
            res |= _accuracy(edge, inputs, float_out, fq_out)
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
    "nn_macs": "vela_macs",
}


def _read_vela_summary(csv_path: Path) -> dict[str, float]:
    with csv_path.open() as fh:
        row = next(csv.DictReader(fh))
    return {
        dst: float(row[src])
        for src, dst in _VELA_SUMMARY_FIELDS.items()
        if row.get(src) not in ("", None)
    }


def vela_layers(per_layer_csv: Path) -> list[dict[str, Any]]:
    """The layers of a vela per-layer CSV: name, operator, estimated cycles."""
    with per_layer_csv.open() as fh:
        rows = [{k.strip(): v for k, v in row.items() if k} for row in csv.DictReader(fh)]
    return [{"name": r.get("Name", "?").strip(), "op": r.get("NNG Operator", "?").strip(),
             "cycles": float(r.get("Op Cycles") or 0)} for r in rows]  # fmt: skip


def _time_vela(tosa_file: Path, flags: list[str], out_dir: Path) -> float:
    """Re-run vela on a dumped TOSA file with upstream's flags (quietly); return its wall time.

    ``--verbose-performance`` is added so the re-run also leaves vela's per-layer CSV.
    """
    from ethosu.vela import vela

    args = [str(tosa_file), f"--output-dir={out_dir}", *flags, "--verbose-performance"]
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        rc = vela.main(args)
    if rc != 0:
        raise RuntimeError(f"vela failed with exit code {rc} on {tosa_file.name}")
    return time.perf_counter() - t0


@guard
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

    c0 = cpu_seconds()
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        tmp_path = Path(tmp)
        compile_spec = EthosUCompileSpec(target)
        compile_spec.dump_intermediate_artifacts_to(str(tmp_path / "upstream"))
        ep, _, export_s, quantize_s = _quantize(module, inputs, EthosUQuantizer(compile_spec))
        res, _ = _lower(ep, EthosUPartitioner(compile_spec), tmp_path / "upstream")
        res["total_cpu_s"] = cpu_seconds() - c0 - res["serialize_cpu_s"]
        # Upstream's own vela run leaves one summary CSV per delegate; several delegates add up.
        vela: dict[str, Any] = {"vela_flags": " ".join(compile_spec.compiler_flags)}
        for summary in sorted((tmp_path / "upstream").rglob("*_summary_*.csv")):
            numbers = _read_vela_summary(summary)
            for k, v in numbers.items():
                vela[k] = vela.get(k, 0.0) + v
            # partitions run one at a time: the SRAM peak is the largest one's
            vela["vela_sram_peak_kib"] = max(vela.get("vela_sram_peak_kib", 0.0), numbers.get("vela_sram_kib", 0.0))
        vela["vela_s"], layers = 0.0, []
        for i, tosa_file in enumerate(unique_files(tmp_path / "upstream", ".tosa")):
            out_dir = tmp_path / f"vela{i}"
            out_dir.mkdir()
            vela["vela_s"] += _time_vela(tosa_file, list(compile_spec.compiler_flags), out_dir)
            for per_layer in out_dir.glob("*_per-layer.csv"):
                layers.extend(vela_layers(per_layer))
        vela |= layer_summary(layers)
    total = export_s + quantize_s + res["lower_s"]
    return {"flow": f"upstream_ethosu[{target}]", "import_s": import_s, "export_s": export_s,
            "quantize_s": quantize_s, "total_s": total} | res | vela  # fmt: skip


@guard
def upstream_vgf(module: torch.nn.Module, inputs: tuple, precision: str = "fp",
                 workdir: str | None = None, keep_vgf: bool = True) -> dict[str, Any]:
    """Upstream VGF flow: ``precision`` "fp" (TOSA-1.0+FP) or "int8" (VgfQuantizer PTQ, +INT).

    With ``keep_vgf`` and a single VGF, a copy of it (``vgf_path``) and of the TOSA graph it was
    converted from (``tosa_path``) stay in a fresh temporary folder: the caller times them on Vulkan
    and on the reference model with ``our_flows.time_vgf_file``, which removes the folder.
    """
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

    c0 = cpu_seconds()
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        compile_spec = VgfCompileSpec("TOSA-1.0+FP" if precision == "fp" else "TOSA-1.0+INT")
        compile_spec.dump_intermediate_artifacts_to(tmp)
        if precision == "int8":
            ep, _, export_s, quantize_s = _quantize(module, inputs, VgfQuantizer(compile_spec))
        else:
            t0 = time.perf_counter()
            ep, quantize_s = torch.export.export(module, inputs), 0.0
            export_s = time.perf_counter() - t0
        res, _ = _lower(ep, VgfPartitioner(compile_spec), Path(tmp))
        res["total_cpu_s"] = cpu_seconds() - c0 - res["serialize_cpu_s"]
        vgf_files, tosa_files = unique_files(Path(tmp), ".vgf"), unique_files(Path(tmp), ".tosa")
        res["vgf_files"] = len(vgf_files)
        res["vgf_bytes"] = sum(f.stat().st_size for f in vgf_files)
        if len(vgf_files) == 1 and len(tosa_files) == 1:
            # The converter runs inside upstream's lowering; time a second run of it on the dumped
            # TOSA with upstream's flags (convert_same_vgf says whether it wrote the same VGF).
            res |= time_converter(tosa_files[0], list(compile_spec.compiler_flags), vgf_files[0])
        if keep_vgf and len(vgf_files) == 1:
            keep_dir = Path(tempfile.mkdtemp(prefix="bench_upstream_vgf_"))
            res["vgf_path"] = str(keep_dir / vgf_files[0].name)
            shutil.copyfile(vgf_files[0], res["vgf_path"])
            if len(tosa_files) == 1:
                res["tosa_path"] = str(keep_dir / tosa_files[0].name)
                shutil.copyfile(tosa_files[0], res["tosa_path"])
    total = export_s + quantize_s + res["lower_s"]
    return {"flow": f"upstream_vgf[{precision}]", "import_s": import_s, "export_s": export_s,
            "quantize_s": quantize_s, "total_s": total} | res  # fmt: skip


FLOWS: dict[str, Callable[..., dict[str, Any]]] = {
    "tosa": upstream_tosa,
    "ethosu": upstream_ethosu,
    "vgf": upstream_vgf,
}


def run_isolated(flow: str, model: str, seed: int = 0, input_size: int | None = None,
                 log_file: Path | None = None, **kwargs: Any) -> dict[str, Any]:
    """Run one upstream flow on a bundled example model in a fresh Python process; return its dict.

    The child builds the model by name and seed (``bench_common.build_example``), so upstream's
    backends are never loaded in this process and ours never in that one.
    """
    if flow not in FLOWS:
        raise ValueError(f"unknown flow {flow!r}; valid flows: {', '.join(FLOWS)}")
    return run_isolated_example("upstream_flows", flow, model, seed, input_size, log_file, **kwargs)
