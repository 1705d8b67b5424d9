"""Mixed precision benchmark: SQNR vs float and NPU cycles for all-int8, the --target-sqnr search at
all-int8 + 3 dB, and all-a16w8, on Ethos-U targets; plus the search time.

    uv run python bench/bench_mixed_precision.py --models mobilenet_v2 --targets ethos-u55-128 --input-size 64

Inputs: calibration and (separate) evaluation samples are crops of real photographs
(``calibration_images.py``; tokens from photo patches for the DeiT block), seeded.
Cycles: vela's NPU cycles (``cycles_npu``; the JSON also keeps ``cycles_total``, memory time
included); the search costs units in the same per-layer NPU column. Where int16 compiles for Ethos-U (``EthosUQuantizer`` takes a16w8), all-a16w8 and
the chosen mixed configuration are compiled and their extra is vela's total minus all-int8's
("vela"); the search's per-unit costs come from the all-a16w8 compile's rows. Otherwise the extra
cycles of an int16 layer are estimated as its int8 cycles (int16 activations move twice the bytes),
each unit costed once from vela's per-layer rows, all-a16w8's extra = every NPU layer's int8
cycles; marked "(est.)".
The search also charges each int8 <-> int16 boundary of a mix (vela runs its RESCALE as a pass of
its own) at the rate vela gives a probe; the JSON keeps its own estimate as `extra_cycles_by_unit`.
Goal: the target met at < half of all-a16w8's extra cycles; n/a where all-a16w8 or the mix leaves
more on the CPU than all-int8 (int16 ops the NPU does not take: vela then counts different work).
Results: bench/results/mixed_precision.json (the recorded run and its table, mixed_precision.md,
are committed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from calibration_images import model_samples

from arm_ethosu import EthosUCompileSpec, EthosUQuantizer
from arm_ethosu.mixed_precision_cli import (
    compile_report,
    ethosu_quantize,
    int16_compiles,
    layer_rows,
    quantize_model,
    run_target_sqnr,
)
from arm_quantizer import TOSAQuantizer, get_symmetric_a16w8_quantization_config, output_sqnr
from arm_quantizer.int16_fallback import KEPT_INT8_META
from arm_tosa_core import TosaCompileSpec
from arm_tosa_core.example_models import get_example


def _log(msg: str, started: float) -> None:
    print(f"  [{time.perf_counter() - started:7.1f} s] {msg}", file=sys.stderr, flush=True)


def bench_one(name: str, target: str, size: int, n_calib: int, n_eval: int) -> dict:
    t0 = time.perf_counter()
    model, inputs = get_example(name).build(seed=0, input_size=size)
    calib = model_samples(name, n_calib, size, 1, inputs)
    evals = model_samples(name, n_eval, size, 2, inputs)
    spec = EthosUCompileSpec(target)
    real = int16_compiles(spec)
    q8 = quantize_model(model, inputs, calib, EthosUQuantizer(spec))
    c8 = compile_report(q8, inputs, spec)
    report8, cycles8 = c8.report, c8.npu_cycles
    sqnr8 = output_sqnr(q8, evals)
    _log(f"all-int8: {sqnr8:.2f} dB, {cycles8} cycles", t0)
    a16w8 = get_symmetric_a16w8_quantization_config()
    if real:  # int16 only where it lowers: ops whose int16 form stays on the CPU keep int8
        q16 = ethosu_quantize(model, inputs, calib, spec)({"": a16w8})
    else:
        q16 = quantize_model(model, inputs, calib,
                             TOSAQuantizer(TosaCompileSpec("TOSA-1.0+INT+int16")).set_global(a16w8))
    sqnr16 = output_sqnr(q16, evals)
    c16 = compile_report(q16, inputs, spec) if real else c8
    report16 = c16.report if real else None
    extra16 = c16.npu_cycles - cycles8 if real else sum(row[-1] for row in layer_rows(report8))
    _log(f"all-a16w8: {sqnr16:.2f} dB, +{extra16:.0f} cycles", t0)
    started = time.perf_counter()
    result = run_target_sqnr(model, inputs, calib, report8, sqnr8 + 3.0, evals, spec, report16,
                             log=lambda m: _log(m, t0), int8_ops=q16.meta.get(KEPT_INT8_META, {}))
    seconds = time.perf_counter() - started
    _log(result.summary(), t0)
    mixed_extra, cpu_mixed, cm = result.extra_cycles, c8.cpu_nodes, None
    if real:  # the chosen configuration compiled: vela's number for the whole mixed model
        cm = compile_report(result.quantized, inputs, spec)
        mixed_extra, cpu_mixed = cm.npu_cycles - cycles8, cm.cpu_nodes
    cpu16 = c16.cpu_nodes
    # NPU cycles compare only when int16 kept the same work on the NPU (ops whose int16 form the NPU
    # does not take are kept int8, so it should); compute ops only: a mix whose input feeds an int16
    # and an int8 layer quantizes it twice on the CPU, which changes no NPU work
    comparable = c16.cpu_ops == c8.cpu_ops and (cm.cpu_ops if cm else c8.cpu_ops) == c8.cpu_ops
    return {"model": name, "target": target, "input_size": size, "calibration_samples": n_calib,
            "evaluation_samples": n_eval, "inputs": "photo crops (calibration_images.py)",
            "cycles": result.cycles_note,
            "int8": {"sqnr_db": sqnr8, "npu_cycles": cycles8, "total_cycles": c8.total_cycles,
                     "cpu_nodes": c8.cpu_nodes, "cpu_ops": c8.cpu_ops,
                     "partitions": len(report8.partitions)},
            "mixed": {"target_db": sqnr8 + 3.0, "met": result.met, "sqnr_db": result.sqnr_after_db,
                      "search_base_db": result.sqnr_before_db, "moved": result.moved,
                      "kept_int8": result.kept_int8, "int8_nodes": result.int8_nodes,
                      "units": result.unit_count, "candidate_sets": len(result.ranking),
                      "extra_cycles": mixed_extra, "extra_cycles_by_unit": result.extra_cycles,
                      "total_cycles": cm.total_cycles if cm else None,
                      "cpu_nodes": cpu_mixed, "cpu_ops": cm.cpu_ops if cm else None,
                      "partitions": len(cm.report.partitions) if cm else None,
                      "real_quantizations": result.real_quantizations, "search_seconds": seconds,
                      "ranking": [{"unit": o, "gain_db": g, "cost": c} for o, g, c in result.ranking]},
            "a16w8": {"sqnr_db": sqnr16, "extra_cycles": extra16, "cpu_nodes": cpu16,
                      "int8_nodes": dict(q16.meta.get(KEPT_INT8_META, {})),
                      "total_cycles": c16.total_cycles if real else None,
                      "cpu_ops": c16.cpu_ops if real else None,
                      "partitions": len(report16.partitions) if real else None},
            "cycles_comparable": comparable,
            "extra_share": mixed_extra / extra16 if extra16 > 0 and comparable else None,
            "goal_met": (result.met and mixed_extra < 0.5 * extra16) if comparable else None}


def _machine(load_at_start: float) -> dict:
    """Where and when a row was measured (search seconds depend on how busy the cores were)."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parent).stdout.strip()
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.machine()) if Path("/proc/cpuinfo").exists() \
        else platform.machine()
    return {"cpu": model, "cores": os.cpu_count(),
            "loadavg_1m_at_start": load_at_start, "loadavg_1m_at_end": os.getloadavg()[0],
            "finished_utc": datetime.now(UTC).isoformat(timespec="seconds"), "git_commit": commit}


def _share(share: float | None) -> str:
    return "n/a" if share is None else f"{100 * share:.1f} %"


def _verdict(goal: bool | None) -> str:
    return "n/a (int16 moved work to the CPU)" if goal is None else ("met" if goal else "MISSED")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["mobilenet_v2", "deit_tiny_block"])
    p.add_argument("--targets", nargs="+", default=["ethos-u55-128", "ethos-u85-256"])
    p.add_argument("--input-size", type=int, help="image side / tokens (default 64 / 50)")
    p.add_argument("--calibration-samples", type=int, default=8)
    p.add_argument("--samples", type=int, default=4, help="evaluation samples")
    args = p.parse_args()
    rows = []
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    for name in args.models:
        for target in args.targets:
            size = args.input_size or (64 if name == "mobilenet_v2" else 50)
            load = os.getloadavg()[0]
            row = bench_one(name, target, size, args.calibration_samples, args.samples)
            row["machine"] = _machine(load)
            rows.append(row)
            (out / "mixed_precision.json").write_text(json.dumps(rows, indent=2))  # each row as it comes
            m, est = row["mixed"], f" ({row['cycles']})"
            print(f"{name} {target} {size}: int8 {row['int8']['sqnr_db']:.2f} dB {row['int8']['npu_cycles']} cyc | "
                  f"mixed {m['sqnr_db']:.2f} dB (target {m['target_db']:.2f}, met {m['met']}) "
                  f"+{m['extra_cycles']:.0f} cyc{est}, {len(m['moved'])}/{m['units']} units moved, "
                  f"search {m['search_seconds']:.1f} s | a16w8 {row['a16w8']['sqnr_db']:.2f} dB "
                  f"+{row['a16w8']['extra_cycles']:.0f} cyc{est} | CPU nodes int8/mixed/a16w8 "
                  f"{row['int8']['cpu_nodes']}/{m['cpu_nodes']}/{row['a16w8']['cpu_nodes']} | extra share "
                  f"{_share(row['extra_share'])} | goal {_verdict(row['goal_met'])}",
                  flush=True)


if __name__ == "__main__":
    sys.exit(main())
