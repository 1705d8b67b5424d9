"""Benchmark our Arm flows against upstream's (ExecuTorch's own Arm backend): compile time, delegation,
TOSA op counts, accuracy on the TOSA reference model, vela cycles and memory, VGF size and latency.

    uv run python bench/run_bench.py                    # every model, FP / INT / U55 / VGF-FP
    uv run python bench/run_bench.py --quick            # MobileNetV2 224 only: FP, INT, U55
    uv run python bench/run_bench.py --models resnet18 --flows tosa_int ethosu_u85 --input-size 128
    uv run python bench/run_bench.py --no-upstream      # our flows only (no ratios, no targets)

Every flow runs in its own fresh Python process (``bench/flow_worker.py``), ours and upstream's
alike: the two define backends of the same class names, and a fresh process also means no flow
inherits another's imports or caches. The tables go to stdout; every number goes to
bench/results/bench-<timestamp>.json and bench/results/latest.json; each child's console output to
bench/results/logs/. See bench/README.md for what the columns mean.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_report  # noqa: E402
from bench_common import example_models, run_isolated_example  # noqa: E402

RESULTS_DIR = Path(__file__).resolve().parent / "results"

# case -> (flow name in our_flows / upstream_flows FLOWS, kwargs for both sides)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "tosa_fp": ("tosa", {"spec": "TOSA-1.0+FP"}),
    "tosa_int": ("tosa", {"spec": "TOSA-1.0+INT"}),
    "ethosu_u55": ("ethosu", {"target": "ethos-u55-128"}),
    "ethosu_u85": ("ethosu", {"target": "ethos-u85-256"}),
    "vgf_fp": ("vgf", {"precision": "fp"}),
    "vgf_int8": ("vgf", {"precision": "int8"}),
}
DEFAULT_MODELS = ["mobilenet_v2", "resnet18", "deit_tiny_block", "llama_block", "convmixer", "unet_decoder"]
DEFAULT_FLOWS = ["tosa_fp", "tosa_int", "ethosu_u55", "vgf_fp"]
QUICK_MODELS, QUICK_FLOWS = ["mobilenet_v2"], ["tosa_fp", "tosa_int", "ethosu_u55"]
CHILD_TIMEOUT_S = 900.0


def _versions() -> dict[str, str]:
    out = {}
    for dist in ("torch", "executorch", "tosa-tools", "ethos-u-vela", "ai-ml-sdk-model-converter", "torchao"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def _git_commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=RESULTS_DIR.parent, check=False).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True,
                               cwd=RESULTS_DIR.parent, check=False).stdout.strip()
        return f"{head}{'+dirty' if dirty else ''}" if head else "unknown"
    except OSError:
        return "unknown"


def _finite(value: Any) -> Any:
    """JSON has no inf/nan: write them as strings ("inf" is a bit-exact SQNR)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _run(side: str, model: str, case: str, size: int | None, seed: int, log_dir: Path) -> dict[str, Any]:
    flow, kwargs = CASES[case]
    module = "our_flows" if side == "ours" else "upstream_flows"
    log = log_dir / f"{model}-{case}-{side}.log"
    res = run_isolated_example(module, flow, model, seed, size, log_file=log, timeout_s=CHILD_TIMEOUT_S,
                               **kwargs)
    return bench_report.add_derived({"model": model, "case": case, "side": side, **res})


def _time_upstream_vgf(row: dict[str, Any], size: int | None, seed: int, log_dir: Path) -> None:
    """Time upstream's VGF on our Vulkan runner (same runner, same device as ours)."""
    path, tosa = row.pop("vgf_path", None), row.pop("tosa_path", "")
    if not path:
        return
    res = run_isolated_example("our_flows", "time_vgf_file", row["model"], seed, size,
                               log_file=log_dir / f"{row['model']}-{row['case']}-upstream-vk.log",
                               timeout_s=CHILD_TIMEOUT_S, vgf_path=path, tosa_path=tosa)
    if "error" in res or "unavailable" in res:
        row["vulkan_latency_error"] = res.get("error", res.get("unavailable"))
    else:
        row |= {k: v for k, v in res.items() if k.startswith(("vulkan_", "ref_"))}


def _names(ap: argparse.ArgumentParser, option: str, values: list[str] | None, valid: list[str]) -> list[str]:
    """Split "a,b c" into ["a", "b", "c"] and check each against ``valid`` (argparse's ``choices``
    would refuse the comma form)."""
    names = [n for v in values or [] for n in v.split(",") if n]
    bad = [n for n in names if n not in valid]
    if bad:
        ap.error(f"{option}: unknown {', '.join(bad)}; valid: {' '.join(valid)}")
    return names


def _parse(argv: list[str] | None) -> argparse.Namespace:
    models = sorted(example_models())
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--models", nargs="+", default=None, metavar="MODEL",
                    help=f"any of {' '.join(models)}, space- or comma-separated "
                         f"(default: {' '.join(DEFAULT_MODELS)})")
    ap.add_argument("--flows", nargs="+", default=None, metavar="FLOW",
                    help=f"any of {' '.join(sorted(CASES))}, space- or comma-separated "
                         f"(default: {' '.join(DEFAULT_FLOWS)})")
    ap.add_argument("--input-size", type=int, default=224,
                    help="image side for the image models (default 224); the transformer blocks keep "
                         "their own sequence lengths (197 and 32)")
    ap.add_argument("--quick", action="store_true",
                    help=f"{'/'.join(QUICK_MODELS)} at 224 only, flows {' '.join(QUICK_FLOWS)}")
    ap.add_argument("--no-upstream", action="store_true", help="run our flows only")
    ap.add_argument("--seed", type=int, default=0, help="weights and inputs seed (default 0)")
    ap.add_argument("--out", type=Path, default=RESULTS_DIR, help="results folder (default bench/results)")
    args = ap.parse_args(argv)
    if args.quick:
        if args.models or args.flows or args.input_size != 224:
            ap.error("--quick fixes the models, flows and input size; drop --models/--flows/--input-size")
        args.models, args.flows = QUICK_MODELS, QUICK_FLOWS
    args.models = _names(ap, "--models", args.models, models) or DEFAULT_MODELS
    args.flows = _names(ap, "--flows", args.flows, sorted(CASES)) or DEFAULT_FLOWS
    if args.input_size < 32:
        ap.error(f"--input-size {args.input_size} is too small: image models need >= 32")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the chosen flows on the chosen models, print the tables, write the JSON; 0 unless a flow failed."""
    args = _parse(argv)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    log_dir = args.out / "logs" / stamp
    log_dir.mkdir(parents=True, exist_ok=True)
    sides = ["ours"] if args.no_upstream else ["ours", "upstream"]
    catalogue = example_models()
    meta = {"timestamp": stamp, "argv": sys.argv[1:] if argv is None else argv, "models": args.models,
            "flows": args.flows, "input_size": args.input_size, "seed": args.seed, "sides": sides,
            "host": platform.node(), "cpus": os.cpu_count(), "loadavg_at_start": os.getloadavg(),
            "python": platform.python_version(), "versions": _versions(), "commit": _git_commit()}
    print(f"bench {stamp}: models {' '.join(args.models)}; flows {' '.join(args.flows)}; "
          f"sides {' '.join(sides)}; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; logs {log_dir}",
          flush=True)
    rows: list[dict[str, Any]] = []
    t_start = time.perf_counter()
    for model in args.models:
        size = args.input_size if catalogue[model].is_image else None
        for case in args.flows:
            for side in sides:
                t0 = time.perf_counter()
                row = _run(side, model, case, size, args.seed, log_dir)
                if side == "upstream" and case.startswith("vgf"):
                    _time_upstream_vgf(row, size, args.seed, log_dir)
                    bench_report.add_derived(row)  # again: the Vulkan numbers came in after _run
                rows.append(row)
                state = ("not available" if "unavailable" in row else
                         "ERROR " + row.get("root_cause", row.get("error", ""))[:120] if "error" in row else "ok")
                print(f"  {model:15s} {case:10s} {side:8s} {time.perf_counter() - t0:6.1f} s  {state}",
                      flush=True)
    meta["wall_s"] = time.perf_counter() - t_start

    ratio_rows = bench_report.ratios(rows)
    target_rows = bench_report.targets(rows)  # those that need upstream say n/a without it
    print("\nCompile, delegation, TOSA ops, accuracy (times in s; SQNR in dB; deleg = delegated share "
          "without the float boundary's Q/DQ)")
    print(bench_report.compile_table(rows))
    ethosu = bench_report.ethosu_table(rows)
    if ethosu:
        print("\nEthos-U (vela estimates)")
        print(ethosu)
    vgf = bench_report.vgf_table(rows)
    if vgf:
        print("\nVGF (lower includes the model converter; latencies are medians on this host: Vulkan "
              "through the ML SDK emulation layers, and the TOSA reference model on the same graph)")
        print(vgf)
    if ratio_rows:
        print("\nOurs / upstream (lower than 1 is better for times, ops, RESCALEs, cycles; dSQNR = ours - "
              "upstream dB, higher is better)")
        print(bench_report.ratio_table(ratio_rows))
    if target_rows:
        print("\nTargets (time targets judged on wall seconds; the CPU-second verdict is shown for busy "
              "machines)")
        print(bench_report.targets_table(target_rows))

    args.out.mkdir(parents=True, exist_ok=True)
    doc = _finite({"meta": meta, "results": rows, "ratios": ratio_rows, "targets": target_rows})
    path = args.out / f"bench-{stamp}.json"
    path.write_text(json.dumps(doc, indent=1, default=str))
    (args.out / "latest.json").write_text(path.read_text())
    print(f"\nwrote {path} (and latest.json); total {meta['wall_s']:.0f} s")
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
