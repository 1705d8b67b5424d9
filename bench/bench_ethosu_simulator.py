"""The Ethos-U simulator's speed: MobileNetV2 INT8 on ethos-u55-128 through the NPU simulator vs the
TOSA reference model on the same TOSA graph, on this machine.

    uv run python bench/bench_ethosu_simulator.py [--size 224] [--runs 5]

Compiles MobileNetV2 (seed 0) with the host graph kept; then, in this process: the deployable .pte's
median execute time through executorch.runtime (runtime_cpp's EthosUBackend: the command stream on
the simulator), the median of `tosa_reference_model.run` on the partition's TOSA graph with an int8
input, their ratio (goal <= 2), whether the simulated outputs equal the reference model's on the
lowered program bit for bit, and the per-op record's MACs against vela's, in total and per vela
layer (`arm_ethosu.simulate`). Writes bench/results/ethosu_simulator.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results"
TARGET = "ethos-u55-128"


def _compile(size: int):
    """MobileNetV2 (seed 0) quantized and lowered for TARGET with the host graph kept, and its input."""
    import torch
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer
    from arm_tosa_core.example_models import get_example

    model, x = get_example("mobilenet_v2").build(seed=0, input_size=size)
    spec = EthosUCompileSpec(TARGET).include_host_graph()
    prepared = prepare_pt2e(torch.export.export(model, x).module(), EthosUQuantizer(spec))
    with torch.no_grad():
        prepared(*x)
    edge = to_edge_transform_and_lower(torch.export.export(convert_pt2e(prepared), x),
                                       partitioner=[EthosUPartitioner(spec)],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    return edge, x


def _median_time(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def measure(size: int, runs: int) -> dict:
    import numpy as np
    import tosa_reference_model as trm
    from executorch.runtime import Runtime

    import runtime_cpp  # noqa: F401  (registers EthosUBackend in the pip runtime)
    from arm_ethosu import parse_binstream
    from arm_ethosu.deployable import pte_variants
    from arm_ethosu.program_report import ethosu_payloads
    from arm_ethosu.simulate import simulate_pte

    edge, x = _compile(size)
    deployable = pte_variants(edge).deployable
    program = Runtime.get().load_program(deployable)  # a Method needs its Program alive
    method = program.load_method("forward")
    simulated = _median_time(lambda: method.execute(list(x)), runs)

    (payload,) = ethosu_payloads(edge)
    graph = parse_binstream(payload).extra["tosa_graph"]
    q = np.clip(np.round(x[0].numpy() / (1 / 64)), -128, 127).astype(np.int8)  # time does not depend on values
    reference = _median_time(lambda: trm.run(graph, [q]), runs)

    # bit for bit: the deployable .pte on the simulator vs the lowered program on the reference model,
    # and the per-op record per vela layer
    result = simulate_pte(deployable, edge, x)
    return {
        "model": "mobilenet_v2", "target": TARGET, "runs": runs, "machine": platform.machine(),
        "simulator_median_s": simulated, "reference_model_median_s": reference,
        "ratio": simulated / reference, "goal_ratio": 2.0, "bit_exact": result.bit_exact,
        "vela_layers": len(result.layers), "kickoffs": sum(x.kickoffs for x in result.layers),
        "record_macs": result.macs, "vela_macs": result.vela_macs,
        "layers_with_vela_macs": sum(x.macs == x.vela_macs for x in result.layers),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    row = {"size": args.size, **measure(args.size, args.runs)}
    print(f"MobileNetV2 INT8 {args.size}x{args.size} on {TARGET}, median of {args.runs} runs")
    print(f"  simulator (deployable .pte, executorch.runtime): {row['simulator_median_s']:.3f} s")
    print(f"  TOSA reference model (same graph):               {row['reference_model_median_s']:.3f} s")
    print(f"  ratio {row['ratio']:.2f} (goal <= {row['goal_ratio']:g}); bit-exact: {row['bit_exact']}; "
          f"{row['kickoffs']} kick-offs, MACs {row['record_macs']} (vela {row['vela_macs']}; "
          f"{row['layers_with_vela_macs']} of {row['vela_layers']} vela layers equal)")
    (OUT / "ethosu_simulator.json").write_text(json.dumps(row, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
