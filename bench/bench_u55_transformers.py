"""Which public transformer models (`arm_tosa_core.public_transformers`, small random-init configs) run on
ethos-u55-128, in how many partitions, and why each op left on the CPU is there (issue 21, item 4's U55
subset). int8 (EthosUQuantizer, calibrated on the example input), lowered with EthosUPartitioner, vela's
default system config for the target.

    uv run python bench/bench_u55_transformers.py                  # every model; JSON + table in results/
    uv run python bench/bench_u55_transformers.py --models bert vit
    uv run python bench/bench_u55_transformers.py --report-only      # the table from the recorded JSON

Each model runs in its own process (a failure is recorded as the model's reason, the others go on).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import traceback
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
TARGET = "ethos-u55-128"
MODELS = ("bert", "distilbert", "gpt2", "llama", "t5_encoder", "vit", "wav2vec2", "whisper_encoder")
BOUNDARY = "at the float boundary of the program"
QDQ = "quantized_decomposed."  # the quantize/dequantize a CPU op takes with it (reason: "it feeds ...")


def measure(name: str) -> dict:
    import time

    import torch
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer, ethosu_report
    from arm_tosa_core import partition_report
    from arm_tosa_core.public_transformers import build_public

    t0 = time.perf_counter()
    model, inputs = build_public(name)
    spec = EthosUCompileSpec(TARGET)
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), EthosUQuantizer(spec))
    with torch.no_grad():
        prepared(*inputs)
    quantized = convert_pt2e(prepared)
    edge = to_edge_transform_and_lower(torch.export.export(quantized, inputs), partitioner=[EthosUPartitioner(spec)],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    report = partition_report(edge)
    cpu = [c for c in report.cpu_nodes if BOUNDARY not in c.reason]
    vela = ethosu_report(edge)
    return {"model": name, "delegates": len(report.delegates), "vela_partitions": len(vela.partitions),
            "vela_cpu_ops": sum(p.cpu_ops for p in vela.partitions),
            "cycles_npu": sum(p.cycles_npu for p in vela.partitions),
            "cpu_ops": dict(Counter(c.target for c in cpu)),
            "cpu_reasons": sorted({f"{c.target}: {c.reason}" for c in cpu}),
            "seconds": round(time.perf_counter() - t0, 1)}


def _child(name: str) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", name], capture_output=True, text=True,
                          timeout=1800, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if not lines:
        return {"model": name, "error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    return json.loads(lines[-1].removeprefix("RESULT "))


def table(rows: list[dict]) -> str:
    lines = ["| model | runs on U55 (one partition, no CPU compute) | partitions | NPU cycles | ops on the CPU (why) |",
             "|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | no (failed) | - | - | {r['error']} |")
            continue
        compute = [why for why in r["cpu_reasons"] if not why.startswith(QDQ)]
        ok = r["delegates"] == 1 and not compute and r["vela_cpu_ops"] == 0
        counts = {op.removeprefix("aten."): n for op, n in r["cpu_ops"].items() if not op.startswith(QDQ)}
        why = "; ".join(f"{n}x {op}" for op, n in counts.items())
        why += "".join(sorted({" (" + w.split(": ", 2)[-1] + ")" for w in compute}))
        why = why or "-"
        lines.append(f"| {r['model']} | {'yes' if ok else 'no'} | {r['delegates']} | {r['cycles_npu']:,} | {why} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    ap.add_argument("--report-only", action="store_true", help="the table from the recorded JSON, measure nothing")
    args = ap.parse_args(argv)
    if args.child:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                result = measure(args.child)
        except Exception as exc:  # noqa: BLE001  (recorded as the model's reason)
            traceback.print_exc()
            result = {"model": args.child, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
        print("RESULT " + json.dumps(result))
        return 0
    out = RESULTS / "u55_transformers.json"
    rows = {r["model"]: r for r in (json.loads(out.read_text()) if out.exists() else [])}
    for name in [] if args.report_only else args.models:
        rows[name] = _child(name)
        print(f"{name}: {rows[name]}", file=sys.stderr)
    ordered = [rows[m] for m in MODELS if m in rows]
    out.write_text(json.dumps(ordered, indent=2))
    text = table(ordered)
    (RESULTS / "u55_transformers.md").write_text(f"# Public transformer models on {TARGET} (int8)\n\n{text}\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
