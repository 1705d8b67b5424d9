"""Measure the upstream (ExecuTorch Arm backend) flows on the bundled example models.

Each flow runs in its own fresh process (``upstream_flows.run_isolated``), so import costs and
caches do not leak between flows and nothing of ours shares a process with upstream's backends.

    .venv/bin/python bench/measure_upstream.py                       # MobileNetV2 224: FP, INT, U55
    .venv/bin/python bench/measure_upstream.py --models mobilenet_v2 resnet18 --flows tosa_fp vgf_fp
    .venv/bin/python bench/measure_upstream.py --json out.json      # also write every number
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import example_models  # noqa: E402
from upstream_flows import run_isolated  # noqa: E402

EXAMPLE_MODELS = example_models()  # loaded by file path: the arm_tosa_core package stays unimported

# name -> (flow, kwargs)
FLOW_CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "tosa_fp": ("tosa", {"spec": "TOSA-1.0+FP"}),
    "tosa_int": ("tosa", {"spec": "TOSA-1.0+INT"}),
    "ethosu_u55": ("ethosu", {"target": "ethos-u55-128"}),
    "ethosu_u85": ("ethosu", {"target": "ethos-u85-256"}),
    "vgf_fp": ("vgf", {"precision": "fp", "keep_vgf": False}),
    "vgf_int8": ("vgf", {"precision": "int8", "keep_vgf": False}),
}
DEFAULT_FLOWS = ["tosa_fp", "tosa_int", "ethosu_u55", "vgf_fp", "vgf_int8"]

_COLUMNS = [
    ("export_s", "export", "{:.2f}"),
    ("quantize_s", "quant", "{:.2f}"),
    ("lower_s", "lower", "{:.2f}"),
    ("lower_cpu_s", "lowerCPU", "{:.2f}"),
    ("total_s", "total", "{:.2f}"),
    ("import_s", "import", "{:.2f}"),
    ("partition_share", "share", "{:.3f}"),
    ("partitions", "parts", "{}"),
    ("tosa_compute_ops", "ops", "{}"),
    ("tosa_ops", "ops+const", "{}"),
    ("tosa_transpose", "TRANSP", "{}"),
    ("tosa_rescale", "RESCALE", "{}"),
    ("tosa_table", "TABLE", "{}"),
    ("vela_s", "vela_s", "{:.2f}"),
    ("vela_npu_cycles", "npu_cyc", "{:.0f}"),
    ("vela_total_cycles", "tot_cyc", "{:.0f}"),
    ("vela_sram_kib", "sramKiB", "{:.1f}"),
    ("vela_flash_kib", "flashKiB", "{:.1f}"),
]


def _row(model: str, case: str, res: dict[str, Any]) -> str:
    if "error" in res:
        return f"{model:16s} {case:11s} ERROR {res.get('root_cause', res['error'])[:160]}"
    cells = [fmt.format(res[k]) if k in res else "-" for k, _, fmt in _COLUMNS]
    return f"{model:16s} {case:11s} " + " ".join(f"{c:>9s}" for c in cells)


def main(argv: list[str] | None = None) -> int:
    """Run the chosen flows on the chosen models, print a table, optionally dump JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["mobilenet_v2"], choices=sorted(EXAMPLE_MODELS))
    ap.add_argument("--flows", nargs="+", default=DEFAULT_FLOWS, choices=sorted(FLOW_CASES))
    ap.add_argument("--input-size", type=int, default=None, help="image side / sequence length")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="write all results to this file")
    args = ap.parse_args(argv)

    print(f"{'model':16s} {'flow':11s} " + " ".join(f"{h:>9s}" for _, h, _ in _COLUMNS))
    results = []
    for model_name in args.models:
        for case in args.flows:
            flow, kwargs = FLOW_CASES[case]
            res = run_isolated(flow, model_name, args.seed, args.input_size, **kwargs)
            results.append({"model": model_name, "case": case, **res})
            print(_row(model_name, case, res), flush=True)
    for r in results:
        if "not_delegated" in r and r["not_delegated"]:
            print(f"not delegated in {r['model']}/{r['case']}: {r['not_delegated']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
        print(f"wrote {args.json}")
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
