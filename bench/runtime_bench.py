"""MobileNetV2 INT8 (224) on the host through executorch.runtime, per backend (runtime-cpp).

    uv run python bench/runtime_bench.py [--size 224] [--runs 20]

For TOSABackend (TOSA-1.0+INT) and EthosUBackend (ethos-u55-128, --host-graph form): load time,
median latency of N runs and peak RSS, each measured in a fresh process; the float model through
XNNPACK in the pip runtime (bench/ may import
executorch.backends.*, product code never does). "where the time goes": the reference model alone
(tosa_reference_model.run on the same graph) vs our execute, so our own overhead is the difference.
Writes bench/results/runtime_bench.json and prints a table. (The old Python .pte interpreter row is
gone: that interpreter was retired once every backend ran in runtime_cpp, so executorch.runtime is the
one way a .pte runs.)
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results"


def _compile(size: int, work: Path) -> dict[str, Path]:
    import torch
    from executorch.exir import (
        EdgeCompileConfig,
        ExecutorchBackendConfig,
        to_edge_transform_and_lower,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer
    from arm_ethosu.deployable import pte_variants
    from arm_quantizer import TOSAQuantizer, get_symmetric_quantization_config
    from arm_tosa_core import TosaCompileSpec, TOSAPartitioner
    from arm_tosa_core.example_models import get_example

    model, x = get_example("mobilenet_v2").build(seed=0, input_size=size)
    torch.save(x[0], work / "input.pt")
    paths = {}
    cfg = EdgeCompileConfig(_check_ir_validity=False)
    for name, spec, quantizer, partitioner in (
        ("ethosu", EthosUCompileSpec("ethos-u55-128").include_host_graph(), None, EthosUPartitioner),
        ("tosa", TosaCompileSpec("TOSA-1.0+INT"), "tosa", TOSAPartitioner),
    ):
        q = EthosUQuantizer(spec) if quantizer is None else TOSAQuantizer(spec).set_global(
            get_symmetric_quantization_config())
        prepared = prepare_pt2e(torch.export.export(model, x).module(), q)
        with torch.no_grad():
            prepared(*x)
        edge = to_edge_transform_and_lower(torch.export.export(convert_pt2e(prepared), x),
                                           partitioner=[partitioner(spec)], compile_config=cfg)
        pte = pte_variants(edge).host if name == "ethosu" else edge.to_executorch(
            ExecutorchBackendConfig(extract_delegate_segments=False)).buffer
        paths[name] = work / f"mv2_{name}.pte"
        paths[name].write_bytes(pte)
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    edge = to_edge_transform_and_lower(torch.export.export(model, x), partitioner=[XnnpackPartitioner()])
    paths["xnnpack_fp32"] = work / "mv2_xnnpack.pte"
    paths["xnnpack_fp32"].write_bytes(edge.to_executorch().buffer)
    return paths


def _measure(pte: Path, runs: int, mode: str) -> dict:
    """In this (fresh) process: load, run `runs` times, report."""
    import torch

    x = torch.load(pte.parent / "input.pt")
    if mode == "runtime_cpp":
        import runtime_cpp  # noqa: F401
    from executorch.runtime import Runtime

    started = time.perf_counter()
    program = Runtime.get().load_program(pte)
    method = program.load_method("forward")
    load = time.perf_counter() - started
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        method.execute([x])
        times.append(time.perf_counter() - t)
    return {"load_s": load, "median_s": statistics.median(times),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _reference_model_only(pte: Path, runs: int) -> float:
    """Median of tosa_reference_model.run on the .pte's TOSA graph alone (the compute we wrap)."""
    import numpy as np
    import torch
    import tosa_reference_model as trm

    from arm_ethosu import parse_binstream
    from arm_tosa_core.pte_delegates import list_delegates

    x = torch.load(pte.parent / "input.pt")
    (d,) = list_delegates(pte.read_bytes())
    graph = parse_binstream(d.processed).extra["tosa_graph"] if d.backend_id == "EthosUBackend" else d.processed
    scale = 1 / 64  # any int8 input: the reference model's time does not depend on values
    q = np.clip(np.round(x.numpy() / scale), -128, 127).astype(np.int8)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        trm.run(graph, [q])
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--measure", nargs=3, metavar=("PTE", "RUNS", "MODE"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.measure:
        pte, runs, mode = args.measure
        print(json.dumps(_measure(Path(pte), int(runs), mode)))
        return 0
    work = OUT / "runtime_bench"
    work.mkdir(parents=True, exist_ok=True)
    paths = _compile(args.size, work)
    rows = {}
    for name, pte, mode, runs in (("TOSABackend (runtime_cpp)", paths["tosa"], "runtime_cpp", args.runs),
                                  ("EthosUBackend (runtime_cpp)", paths["ethosu"], "runtime_cpp", args.runs),
                                  ("XNNPACK fp32 (pip runtime)", paths["xnnpack_fp32"], "plain", args.runs)):
        done = subprocess.run([sys.executable, __file__, "--measure", str(pte), str(runs), mode],
                              capture_output=True, text=True, check=True)
        rows[name] = json.loads(done.stdout.strip().splitlines()[-1])
    for key, name in (("tosa", "TOSABackend (runtime_cpp)"), ("ethosu", "EthosUBackend (runtime_cpp)")):
        ref = _reference_model_only(paths[key], max(3, args.runs // 4))
        rows[name]["reference_model_only_s"] = ref
        rows[name]["our_overhead_pct"] = 100 * (rows[name]["median_s"] - ref) / rows[name]["median_s"]
    base = rows["EthosUBackend (runtime_cpp)"]["median_s"]
    print(f"MobileNetV2 INT8 {args.size}x{args.size}, host, median of {args.runs} runs")
    print(f"{'path':40} {'load s':>8} {'median s':>9} {'x EthosU':>9} {'RSS MB':>8} {'overhead %':>10}")
    for name, r in rows.items():
        over = r.get("our_overhead_pct")
        print(f"{name:40} {r['load_s']:8.3f} {r['median_s']:9.4f} {r['median_s'] / base:9.2f} "
              f"{r['peak_rss_mb']:8.0f} {'' if over is None else f'{over:10.1f}'}")
    (OUT / "runtime_bench.json").write_text(json.dumps({"size": args.size, "runs": args.runs, "rows": rows},
                                                        indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
