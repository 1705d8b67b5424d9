"""Our flows (arm_tosa_core, arm_quantizer, arm_ethosu, arm_vgf), timed and measured like upstream's.

Run them through ``bench_common.run_isolated_example("our_flows", flow, model)``: one flow per fresh
process, never in a process that imported ``executorch.backends.arm`` (both define backends named
``TOSABackend`` / ``EthosUBackend``, and ExecuTorch looks backends up by class name).

Each flow takes ``(module, example_inputs)`` and returns a flat dict with the keys of
``upstream_flows`` (export_s, quantize_s, lower_s, lower_cpu_s, total_s, serialize_s, pte_bytes,
partition_share, tosa_* counts, vela_*) plus accuracy: ``ref_rel_err`` / ``ref_sqnr_float_db``
(reference-model output against the float model), ``ref_sqnr_fq_db`` (against the fake-quant model
that convert_pt2e returns), and for INT the ``fold_*`` numbers of a second lowering with
``fold_rescales = True``. A flow whose package is not importable returns ``{"unavailable": why}``.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import vgf_device
from bench_common import (
    cpu_seconds,
    guard,
    layer_summary,
    partition_stats,
    rel_max_error,
    sqnr_db,
    tosa_stats_of_dir,
    unique_files,
)


def _import_core() -> float:
    if any(name.startswith("executorch.backends.arm") for name in sys.modules):
        raise RuntimeError("upstream's executorch.backends.arm is imported in this process; its "
                           "backends share our class names: run our flows through run_isolated_example")
    t0 = time.perf_counter()
    from executorch.exir import to_edge_transform_and_lower  # noqa: F401

    import arm_quantizer  # noqa: F401
    import arm_tosa_core  # noqa: F401

    return time.perf_counter() - t0


def _export(module: torch.nn.Module, inputs: tuple) -> tuple[Any, float]:
    t0 = time.perf_counter()
    ep = torch.export.export(module, inputs)
    return ep, time.perf_counter() - t0


def _quantize(module: torch.nn.Module, inputs: tuple, quantizer: Any) -> tuple[Any, Any, float, float]:
    """PT2E PTQ calibrated on the example inputs: (exported program, fake-quant module, export_s, quantize_s)."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from arm_quantizer import get_symmetric_quantization_config

    t0 = time.perf_counter()
    graph_module = torch.export.export(module, inputs).module()
    t1 = time.perf_counter()
    quantizer.set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(graph_module, quantizer)
    prepared(*inputs)
    quantized = convert_pt2e(prepared)
    t2 = time.perf_counter()
    ep = torch.export.export(quantized, inputs)
    t3 = time.perf_counter()
    return ep, quantized, (t1 - t0) + (t3 - t2), t2 - t1


def _lower(ep: Any, partitioner: Any) -> tuple[dict[str, Any], Any]:
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    t0, c0 = time.perf_counter(), cpu_seconds()
    edge = to_edge_transform_and_lower(ep, partitioner=[partitioner],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    out = {"lower_s": time.perf_counter() - t0, "lower_cpu_s": cpu_seconds() - c0}
    return out | partition_stats(edge), edge


def _serialize(edge: Any) -> dict[str, Any]:
    """to_executorch plus the flatbuffer bytes (the .pte a user would write).

    A failure here is recorded (``serialize_error``) rather than ending the flow, so the lowering
    numbers survive it.
    """
    # A quantized program keeps its boundary quantize/dequantize on the CPU; to_executorch needs
    # their out variants, which only this import registers (arm_ethosu's backend imports it too).
    import executorch.kernels.quantized  # noqa: F401

    t0 = time.perf_counter()
    try:
        pte = edge.to_executorch().buffer
    except Exception as exc:  # noqa: BLE001 - a measurement, reported in the table
        return {"serialize_error": f"{type(exc).__name__}: {exc}"[:500]}
    return {"serialize_s": time.perf_counter() - t0, "pte_bytes": len(pte)}


def _report_share(edge: Any) -> dict[str, Any]:
    from arm_tosa_core import partition_report

    report = partition_report(edge)
    cpu = {c.target: sum(1 for d in report.cpu_nodes if d.target == c.target) for c in report.cpu_nodes}
    return {"report_share": report.delegated_share, "cpu_nodes": cpu,
            "cpu_reasons": sorted({f"{c.target}: {c.reason}" for c in report.cpu_nodes})[:10]}


def _accuracy(edge: Any, inputs: tuple, float_out: Any, fq_out: Any | None, prefix: str = "ref") -> dict:
    from arm_tosa_core import run_on_reference_model

    t0 = time.perf_counter()
    got = run_on_reference_model(edge, *inputs)
    res = {f"{prefix}_run_s": time.perf_counter() - t0,
           f"{prefix}_rel_err": rel_max_error(float_out, got),
           f"{prefix}_sqnr_float_db": sqnr_db(float_out, got)}
    if fq_out is not None:
        res[f"{prefix}_rel_err_fq"] = rel_max_error(fq_out, got)
        res[f"{prefix}_sqnr_fq_db"] = sqnr_db(fq_out, got)
    return res


@guard
def our_tosa(module: torch.nn.Module, inputs: tuple, spec: str = "TOSA-1.0+FP",
             accuracy: bool = True, fold_variant: bool = True) -> dict[str, Any]:
    """TOSA flow: export, (INT: TOSAQuantizer PTQ), TOSAPartitioner, serialize, reference model."""
    import_s = _import_core()
    from arm_quantizer import TOSAQuantizer
    from arm_tosa_core import TosaCompileSpec, TOSAPartitioner

    is_int = "+INT" in spec and "+FP" not in spec
    with torch.no_grad():
        float_out = module(*inputs)
    c0 = cpu_seconds()
    with tempfile.TemporaryDirectory() as tmp:
        compile_spec = TosaCompileSpec(spec).dump_intermediate_artifacts_to(tmp)
        fq_out = quantized = None
        if is_int:
            ep, quantized, export_s, quantize_s = _quantize(module, inputs, TOSAQuantizer(compile_spec))
            c_fq = cpu_seconds()
            fq_out = quantized(*inputs)
            c0 += cpu_seconds() - c_fq  # the fake-quant reference run is not part of the flow
        else:
            (ep, export_s), quantize_s = _export(module, inputs), 0.0
        res, edge = _lower(ep, TOSAPartitioner(compile_spec))
        res["total_cpu_s"] = cpu_seconds() - c0
        res |= _report_share(edge) | _serialize(edge) | tosa_stats_of_dir(Path(tmp))
        if accuracy:
            res |= _accuracy(edge, inputs, float_out, fq_out)
    if is_int and fold_variant:  # not timed: only its RESCALE count and accuracy are reported
        with tempfile.TemporaryDirectory() as tmp:
            folded = TosaCompileSpec(spec).dump_intermediate_artifacts_to(tmp)
            folded.fold_rescales = True
            fold_res, fold_edge = _lower(torch.export.export(quantized, inputs), TOSAPartitioner(folded))
            stats = tosa_stats_of_dir(Path(tmp))
            res |= {"fold_lower_s": fold_res["lower_s"], "fold_tosa_rescale": stats["tosa_rescale"],
                    "fold_tosa_compute_ops": stats["tosa_compute_ops"]}
            if accuracy:
                res |= _accuracy(fold_edge, inputs, float_out, fq_out, prefix="fold")
    total = export_s + quantize_s + res["lower_s"]
    return {"flow": f"our_tosa[{spec}]", "import_s": import_s, "export_s": export_s,
            "quantize_s": quantize_s, "total_s": total} | res  # fmt: skip


def _ethosu_api() -> Any:
    import arm_ethosu

    missing = [n for n in ("EthosUCompileSpec", "EthosUPartitioner", "EthosUQuantizer", "ethosu_report")
               if not hasattr(arm_ethosu, n)]
    if missing:
        raise ImportError(f"arm_ethosu does not expose {', '.join(missing)} yet")
    return arm_ethosu


@guard
def our_ethosu(module: torch.nn.Module, inputs: tuple, target: str = "ethos-u55-128",
               tune: bool = False, memory_mode: str | None = None, channels_last_io: bool = False
               ) -> dict[str, Any]:
    """Ethos-U flow: EthosUQuantizer PTQ, EthosUPartitioner (TOSA INT + vela in process), serialize.
    With `tune`, the spec's `enable_tune()` (arm-compile --tune); `memory_mode`: vela's (default: ours);
    `channels_last_io`: export with channels-last image inputs (arm-compile --channels-last-io)."""
    import_s = _import_core()
    if channels_last_io:
        import arm_tosa_core

        inputs = arm_tosa_core.channels_last_io(inputs)
    try:
        ethosu = _ethosu_api()
        import arm_ethosu.backend as ethosu_backend
    except ImportError as exc:
        return {"unavailable": f"arm_ethosu not available: {exc}"}

    # Time vela's share of lowering by wrapping the function the backend calls (bench only).
    vela_times: list[float] = []
    compile_with_vela = ethosu_backend.compile_with_vela

    def timed_vela(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return compile_with_vela(*args, **kwargs)
        finally:
            vela_times.append(time.perf_counter() - t0)

    ethosu_backend.compile_with_vela = timed_vela
    c0 = cpu_seconds()
    with tempfile.TemporaryDirectory() as tmp:
        spec = ethosu.EthosUCompileSpec(target, memory_mode=memory_mode).dump_intermediate_artifacts_to(tmp)
        if tune:
            spec.enable_tune()
        ep, _, export_s, quantize_s = _quantize(module, inputs, ethosu.EthosUQuantizer(spec))
        res, edge = _lower(ep, ethosu.EthosUPartitioner(spec))
        res["total_cpu_s"] = cpu_seconds() - c0
        res |= _report_share(edge) | _serialize(edge) | tosa_stats_of_dir(Path(tmp))
        report = ethosu.ethosu_report(edge)
    parts = report.partitions
    res |= {
        "vela_s": sum(vela_times),
        "vela_flags": f"{spec.target} {spec.system_config} {spec.memory_mode}",
        "channels_last_io": channels_last_io,
        "vela_npu_cycles": float(sum(p.cycles_npu for p in parts)),
        "vela_total_cycles": float(sum(p.cycles_total for p in parts)),
        "vela_inference_time_s": sum(p.inference_time for p in parts),
        "vela_sram_kib": sum(p.sram_memory_used_bytes for p in parts) / 1024,
        "vela_flash_kib": sum(p.off_chip_flash_memory_used_bytes for p in parts) / 1024,
        "vela_dram_kib": sum(p.dram_memory_used_bytes for p in parts) / 1024,
        "vela_macs": sum(p.nn_macs for p in parts),
        "vela_cpu_ops": sum(p.cpu_ops for p in parts),
        "vela_sram_peak_kib": max((p.sram_memory_used_bytes for p in parts), default=0) / 1024,
        "vela_mac_util": report.mac_utilization if hasattr(report, "mac_utilization") else None,
        "tune_chosen": [p.tune["chosen"] for p in parts if getattr(p, "tune", None)],
    } | layer_summary([{"name": str(row.get("Name")), "op": str(row.get("NNG Operator")),
                        "cycles": float(row.get("Op Cycles", 0) or 0)} for p in parts for row in p.layers])
    total = export_s + quantize_s + res["lower_s"]
    return {"flow": f"our_ethosu[{target}{',tune' if tune else ''}]", "import_s": import_s, "export_s": export_s,
            "quantize_s": quantize_s, "total_s": total} | res  # fmt: skip


def _vgf_api() -> Any:
    import arm_vgf

    missing = [n for n in ("VgfCompileSpec", "VgfPartitioner", "VgfQuantizer", "run_vgf_on_vulkan", "run_vgf",
                           "time_vgf", "read_vgf")
               if not hasattr(arm_vgf, n)]
    if missing:
        raise ImportError(f"arm_vgf does not expose {', '.join(missing)} yet")
    return arm_vgf


@guard
def our_vgf(module: torch.nn.Module, inputs: tuple, precision: str = "fp", latency_repeats: int = 20,
            ref_repeats: int = 3) -> dict[str, Any]:
    """VGF flow: (int8: VgfQuantizer PTQ), VgfPartitioner (TOSA + model-converter), serialize,
    then the VGF on Vulkan (lavapipe on a CPU host): accuracy and median latency of ``latency_repeats``
    dispatches, against the TOSA reference model's latency on the same graph."""
    if precision not in ("fp", "int8"):
        raise ValueError(f"precision must be 'fp' or 'int8', got {precision!r}")
    import_s = _import_core()
    try:
        vgf = _vgf_api()
        import arm_vgf.backend as vgf_backend
    except ImportError as exc:
        return {"unavailable": f"arm_vgf not available: {exc}"}

    # Time the model converter's share of lowering by wrapping the function the backend calls.
    convert_times: list[float] = []
    convert = vgf_backend.convert_tosa_to_vgf

    def timed_convert(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return convert(*args, **kwargs)
        finally:
            convert_times.append(time.perf_counter() - t0)

    vgf_backend.convert_tosa_to_vgf = timed_convert
    with torch.no_grad():
        float_out = module(*inputs)
    c0 = cpu_seconds()
    with tempfile.TemporaryDirectory() as tmp:
        spec = vgf.VgfCompileSpec("TOSA-1.0+FP" if precision == "fp" else "TOSA-1.0+INT")
        spec.dump_intermediate_artifacts_to(tmp)
        fq_out = None
        if precision == "int8":
            ep, quantized, export_s, quantize_s = _quantize(module, inputs, vgf.VgfQuantizer(spec))
            c_fq = cpu_seconds()
            with torch.no_grad():
                fq_out = quantized(*inputs)
            c0 += cpu_seconds() - c_fq  # the fake-quant reference run is not part of the flow
        else:
            (ep, export_s), quantize_s = _export(module, inputs), 0.0
        res, edge = _lower(ep, vgf.VgfPartitioner(spec))
        res["total_cpu_s"] = cpu_seconds() - c0
        res["convert_s"] = sum(convert_times)
        res |= _report_share(edge) | _serialize(edge) | tosa_stats_of_dir(Path(tmp))
        vgf_files, tosa_files = unique_files(Path(tmp), ".vgf"), unique_files(Path(tmp), ".tosa")
        res["vgf_files"] = len(vgf_files)
        res["vgf_bytes"] = sum(f.stat().st_size for f in vgf_files)
        t0 = time.perf_counter()
        got = vgf.run_vgf_on_vulkan(edge, *inputs)
        res |= {"vulkan_run_s": time.perf_counter() - t0, "vulkan_rel_err": rel_max_error(float_out, got),
                "vulkan_sqnr_float_db": sqnr_db(float_out, got)}
        if fq_out is not None:
            res |= {"vulkan_rel_err_fq": rel_max_error(fq_out, got), "vulkan_sqnr_fq_db": sqnr_db(fq_out, got)}
        if len(vgf_files) == 1 and len(tosa_files) == 1:  # latency of the one delegated graph
            res |= vgf_device.device_numbers(vgf, vgf_files[0], tosa_files[0], latency_repeats, ref_repeats)
        else:
            res["latency_skipped"] = f"{len(vgf_files)} VGF files: latency is measured for one only"
    total = export_s + quantize_s + res["lower_s"]
    return {"flow": f"our_vgf[{precision}]", "import_s": import_s, "export_s": export_s,
            "quantize_s": quantize_s, "total_s": total} | res  # fmt: skip


@guard
def time_vgf_file(module: torch.nn.Module, inputs: tuple, vgf_path: str = "", tosa_path: str = "",
                  latency_repeats: int = 20, ref_repeats: int = 3) -> dict[str, Any]:
    """Latency of someone else's VGF file (upstream's) on our Vulkan runner, and of the TOSA graph it
    was converted from (``tosa_path``, optional) on the reference model; ``module`` is unused."""
    del module, inputs
    try:
        vgf = _vgf_api()
    except ImportError as exc:
        return {"unavailable": f"arm_vgf not available: {exc}"}
    try:
        tosa = Path(tosa_path) if tosa_path else None
        return vgf_device.device_numbers(vgf, Path(vgf_path), tosa, latency_repeats, ref_repeats)
    finally:
        shutil.rmtree(Path(vgf_path).parent, ignore_errors=True)  # the copies upstream_vgf kept for us


FLOWS = {"tosa": our_tosa, "ethosu": our_ethosu, "vgf": our_vgf, "time_vgf_file": time_vgf_file}
