"""Mixed precision benchmark: SQNR vs float and NPU cycles for all-int8, the --target-sqnr search at
all-int8 + 3 dB, and all-a16w8, on Ethos-U targets; plus the search time.

    uv run python bench/bench_mixed_precision.py --models mobilenet_v2 --targets ethos-u55-128 --input-size 64

Inputs: calibration and (separate) evaluation samples are crops of real photographs
(``calibration_images.py``; tokens from photo patches for the DeiT block), seeded.
Cycles: all-int8 is vela's number. Until int16 compiles for Ethos-U, the extra cycles of an int16
layer are estimated as its int8 cycles (int16 activations move twice the bytes): each unit the
search may move is costed once from vela's per-layer rows (``precision_units.unit_cycles``), and
all-a16w8's extra is every NPU layer's int8 cycles. Both are marked "(est.)".
Goal: the target met at < half of all-a16w8's extra cycles.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from calibration_images import model_samples
from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge_transform_and_lower
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer, ethosu_report
from arm_ethosu.mixed_precision_cli import CYCLES_LABEL, layer_rows, run_target_sqnr
from arm_quantizer import TOSAQuantizer, get_symmetric_a16w8_quantization_config, output_sqnr
from arm_tosa_core import TosaCompileSpec
from arm_tosa_core.example_models import get_example


def _quantize(model, inputs, samples, quantizer):
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    with torch.no_grad():
        for s in samples:
            prepared(*s)
    return convert_pt2e(prepared)


def bench_one(name: str, target: str, size: int, n_calib: int, n_eval: int) -> dict:
    model, inputs = get_example(name).build(seed=0, input_size=size)
    calib = model_samples(name, n_calib, size, 1, inputs)
    evals = model_samples(name, n_eval, size, 2, inputs)
    spec = EthosUCompileSpec(target)
    q8 = _quantize(model, inputs, calib, EthosUQuantizer(spec))
    edge = to_edge_transform_and_lower(torch.export.export(q8, inputs), partitioner=[EthosUPartitioner(spec)],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    report = ethosu_report(edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False)).buffer)
    cycles8 = sum(p.cycles_npu for p in report.partitions)
    sqnr8 = output_sqnr(q8, evals)
    q16 = _quantize(model, inputs, calib, TOSAQuantizer(TosaCompileSpec("TOSA-1.0+INT+int16"))
                    .set_global(get_symmetric_a16w8_quantization_config()))
    sqnr16 = output_sqnr(q16, evals)
    extra16 = sum(c for _, c in layer_rows(report))
    started = time.perf_counter()
    result = run_target_sqnr(model, inputs, calib, report, sqnr8 + 3.0, evals)
    seconds = time.perf_counter() - started
    return {"model": name, "target": target, "input_size": size, "calibration_samples": n_calib,
            "evaluation_samples": n_eval, "inputs": "photo crops (calibration_images.py)",
            "cycles": CYCLES_LABEL,
            "int8": {"sqnr_db": sqnr8, "npu_cycles": cycles8},
            "mixed": {"target_db": sqnr8 + 3.0, "met": result.met, "sqnr_db": result.sqnr_after_db,
                      "search_base_db": result.sqnr_before_db, "moved": result.moved,
                      "kept_int8": result.kept_int8, "units": len(result.ranking),
                      "extra_cycles": result.extra_cycles, "real_quantizations": result.real_quantizations,
                      "search_seconds": seconds},
            "a16w8": {"sqnr_db": sqnr16, "extra_cycles": extra16},
            "extra_share": result.extra_cycles / extra16 if extra16 else None,
            "goal_met": result.met and result.extra_cycles < 0.5 * extra16}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["mobilenet_v2", "deit_tiny_block"])
    p.add_argument("--targets", nargs="+", default=["ethos-u55-128", "ethos-u85-256"])
    p.add_argument("--input-size", type=int, help="image side / tokens (default 64 / 50)")
    p.add_argument("--calibration-samples", type=int, default=8)
    p.add_argument("--samples", type=int, default=4, help="evaluation samples")
    args = p.parse_args()
    rows = []
    for name in args.models:
        for target in args.targets:
            size = args.input_size or (64 if name == "mobilenet_v2" else 50)
            row = bench_one(name, target, size, args.calibration_samples, args.samples)
            rows.append(row)
            m, est = row["mixed"], f" ({row['cycles']})"
            print(f"{name} {target} {size}: int8 {row['int8']['sqnr_db']:.2f} dB {row['int8']['npu_cycles']} cyc | "
                  f"mixed {m['sqnr_db']:.2f} dB (target {m['target_db']:.2f}, met {m['met']}) "
                  f"+{m['extra_cycles']:.0f} cyc{est}, {len(m['moved'])}/{m['units']} units moved, "
                  f"search {m['search_seconds']:.1f} s | a16w8 {row['a16w8']['sqnr_db']:.2f} dB "
                  f"+{row['a16w8']['extra_cycles']:.0f} cyc{est} | extra share "
                  f"{100 * (row['extra_share'] or 0):.1f} % | goal {'met' if row['goal_met'] else 'MISSED'}",
                  flush=True)
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    (out / "mixed_precision.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    sys.exit(main())
