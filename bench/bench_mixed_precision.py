"""Mixed precision benchmark: SQNR vs float and NPU cycles for all-int8, the --target-sqnr search at
all-int8 + 3 dB, and all-a16w8, on Ethos-U targets; plus the search time.

    uv run python bench/bench_mixed_precision.py --models mobilenet_v2 --targets ethos-u55-128 --input-size 64

Cycles: all-int8 is vela's number. The core has no int16 Ethos-U lowering yet, so int16 cycles are
the estimate the search uses (a moved module costs its int8 cycles again); the all-a16w8 extra is
that estimate summed over every movable module. Goal: the target met at < half of all-a16w8's extra.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge_transform_and_lower
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer, ethosu_report
from arm_ethosu.mixed_precision_cli import module_cycles, run_target_sqnr
from arm_quantizer import TOSAQuantizer, get_symmetric_a16w8_quantization_config, output_sqnr
from arm_tosa_core import TosaCompileSpec
from arm_tosa_core.example_models import get_example


def _quantize(model, inputs, samples, quantizer):
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    with torch.no_grad():
        for s in samples:
            prepared(*s)
    return convert_pt2e(prepared)


def bench_one(name: str, target: str, size: int, n_samples: int) -> dict:
    model, inputs = get_example(name).build(seed=0, input_size=size)
    gen = torch.Generator().manual_seed(0)
    samples = [tuple(torch.randn(x.shape, generator=gen) for x in inputs) for _ in range(n_samples)]
    spec = EthosUCompileSpec(target)
    q8 = _quantize(model, inputs, samples, EthosUQuantizer(spec))
    edge = to_edge_transform_and_lower(torch.export.export(q8, inputs), partitioner=[EthosUPartitioner(spec)],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    report = ethosu_report(edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False)).buffer)
    cycles8 = sum(p.cycles_npu for p in report.partitions)
    sqnr8 = output_sqnr(q8, samples)
    q16 = _quantize(model, inputs, samples, TOSAQuantizer(TosaCompileSpec("TOSA-1.0+INT+int16"))
                    .set_global(get_symmetric_a16w8_quantization_config()))
    sqnr16 = output_sqnr(q16, samples)
    started = time.perf_counter()
    result = run_target_sqnr(model, inputs, samples, report, sqnr8 + 3.0)
    seconds = time.perf_counter() - started
    extra16 = sum(module_cycles(report, m) for m, _, _ in result.ranking)
    return {"model": name, "target": target, "input_size": size, "samples": n_samples,
            "int8": {"sqnr_db": sqnr8, "npu_cycles": cycles8},
            "mixed": {"target_db": sqnr8 + 3.0, "met": result.met, "sqnr_db": result.sqnr_after_db,
                      "moved": result.moved, "extra_cycles_est": result.extra_cycles,
                      "search_seconds": seconds},
            "a16w8": {"sqnr_db": sqnr16, "extra_cycles_est": extra16},
            "goal_met": result.met and result.extra_cycles < 0.5 * extra16}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["mobilenet_v2", "deit_tiny_block"])
    p.add_argument("--targets", nargs="+", default=["ethos-u55-128", "ethos-u85-256"])
    p.add_argument("--input-size", type=int, help="image side / tokens (default 96 / 16)")
    p.add_argument("--samples", type=int, default=4)
    args = p.parse_args()
    rows = []
    for name in args.models:
        for target in args.targets:
            size = args.input_size or (96 if name == "mobilenet_v2" else 16)
            row = bench_one(name, target, size, args.samples)
            rows.append(row)
            m = row["mixed"]
            print(f"{name} {target} {size}: int8 {row['int8']['sqnr_db']:.2f} dB {row['int8']['npu_cycles']} cyc | "
                  f"mixed {m['sqnr_db']:.2f} dB (target {m['target_db']:.2f}, met {m['met']}) "
                  f"+{m['extra_cycles_est']:.0f} cyc, {len(m['moved'])} moved, search {m['search_seconds']:.1f} s | "
                  f"a16w8 {row['a16w8']['sqnr_db']:.2f} dB +{row['a16w8']['extra_cycles_est']:.0f} cyc | "
                  f"goal {'met' if row['goal_met'] else 'MISSED'}", flush=True)
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    (out / "mixed_precision.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    sys.exit(main())
