"""Ethos-U on public architectures: ours (plain and --tune) vs the competitor's Arm backend, with the same vela.

    uv run python bench/bench_ethosu_public.py                                  # the issue's 8 torchvision models
    uv run python bench/bench_ethosu_public.py --models all --targets ethos-u55-128 ethos-u85-256
    uv run python bench/bench_ethosu_public.py --models tv:mobilenet_v2 --input-size 224 --no-upstream
    uv run python bench/bench_ethosu_public.py --models all --reuse      # measure only what the JSON lacks

Models are `public_models` names (torchvision / timm architectures and the small transformers configs at
seeded random init, int8 PTQ calibrated on the one seeded input). Each (model, target, side) compiles in its own fresh interpreter
(`flow_worker.py`): `our_flows.our_ethosu` (plain, then with `tune=True`) and `upstream_flows.upstream_ethosu`,
in the same vela memory mode (the competitor's default where ours differs: Sram_Only on U85, see
`SAME_MEMORY_MODE`).
Columns: vela's NPU and total cycles (summed over partitions), SRAM peak (the largest partition's
`sram_memory_used`), flash (weights, KiB), CPU ops (edge-program call_function nodes left outside the
delegates, the float-boundary quantize/dequantize included, counted the same on both sides), compile
time (export + quantize + lower, seconds), MAC utilization (MACs / (NPU cycles x MACs per cycle)), and
ours/competitor NPU-cycle ratios. Writes bench/results/ethosu_public.json (every number, versions, and
each row's commit) and ethosu_public.md (the table). With --reuse, rows already in the JSON for the same
(model, target, side, input size) are kept as they are (with the commit that measured them) and only the
missing ones run: a long list can be measured in pieces on a loaded machine. A model that fails on either
side keeps its row, with the reason (and the innermost exception, `root_cause`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import run_isolated_example  # noqa: E402
from public_models import ALL, TORCHVISION_ISSUE  # noqa: E402
from run_bench import _git_commit, _versions  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
NOTES_MARKER = "<!-- notes: hand-written, kept by re-runs -->"
#: vela's NPU cycles depend on where tensors live, so our side compiles in the competitor's default memory mode
#: where the defaults differ: on U85 it uses Sram_Only (everything in SRAM), ours Dedicated_Sram_384KB.
SAME_MEMORY_MODE = {"ethos-u85": "Sram_Only"}
SIDES = {  # side -> (flow module, extra kwargs)
    "ours": ("our_flows", {}),
    "ours_tune": ("our_flows", {"tune": True}),
    "competitor": ("upstream_flows", {}),
}


def _cpu_ops(res: dict) -> int | None:
    rest = res.get("not_delegated")
    return None if rest is None else int(sum(rest.values()))


def _row(model: str, target: str, side: str, res: dict) -> dict:
    per_cycle = int(target.rsplit("-", 1)[1])
    npu, macs = res.get("vela_npu_cycles"), res.get("vela_macs")
    util = res.get("vela_mac_util")
    if util is None and npu and macs:
        util = macs / (npu * per_cycle)
    error = res.get("error") or res.get("unavailable")
    return {"model": model, "target": target, "side": side, "error": error,
            # the innermost exception: a pass-manager error names only the passes that ran before it
            "root_cause": res.get("root_cause") if error else None,
            "npu_cycles": npu, "total_cycles": res.get("vela_total_cycles"),
            "sram_peak_kib": res.get("vela_sram_peak_kib"), "flash_kib": res.get("vela_flash_kib"),
            "cpu_ops": _cpu_ops(res), "partitions": res.get("partitions"),
            # which ops stayed on the CPU and why (ours only: the competitor's flow reports no reasons)
            "not_delegated": res.get("not_delegated"), "cpu_reasons": res.get("cpu_reasons"),
            "compile_s": res.get("total_s"), "vela_s": res.get("vela_s"),
            # the child's whole wall time (imports, the competitor's second, timed vela run): what a cap is read against
            "process_s": res.get("process_wall_s") or res.get("failed_after_s"),
            "mac_util": util, "tune_chosen": res.get("tune_chosen"), "vela_flags": res.get("vela_flags"),
            "channels_last_io": res.get("channels_last_io"),
            # where vela's cycles go (per operator, and the costliest layers): to compare the two sides' graph forms
            "cycles_by_op": res.get("vela_cycles_by_op"), "top_layers": res.get("vela_top_layers")}


def _fmt(v, spec: str = "") -> str:
    if v is None:
        return "-"
    return format(v, spec) if spec else str(v)


def _npu(row: dict) -> str:
    """NPU cycles, or why there are none: "not measured" (no row) or "failed" (the reason is under errors)."""
    if not row:
        return "not measured"
    return "failed" if row.get("error") else _fmt(row.get("npu_cycles"), ",.0f")


def _why(row: dict) -> str:
    """A failed row's error, and its root cause where that says more (a long error is cut to its start)."""
    error, root = row["error"], row.get("root_cause")
    if not root or root in error:
        return error
    return f"{error[:240]}{'...' if len(error) > 240 else ''} (root cause: {root[:400]})"


def table(rows: list[dict]) -> str:
    by = {(r["model"], r["target"], r["side"]): r for r in rows}
    head = ("model", "target", "ours NPU", "tune NPU", "comp. NPU", "ratio", "ratio tune", "ours total",
            "tune total", "comp. total", "SRAM KiB o/c", "flash KiB o/c", "CPU ops o/c", "compile s o/t/c",
            "MAC util o/t", "tune chose", "commit o/t/c")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    ratios: dict[str, list[float]] = {}
    for model, target in dict.fromkeys((r["model"], r["target"]) for r in rows):
        o, t, c = (by.get((model, target, s), {}) for s in SIDES)
        cells = [model, target, _npu(o), _npu(t), _npu(c)]
        for side, r in (("ours", o), ("tune", t)):
            if r.get("npu_cycles") and c.get("npu_cycles"):
                ratio = r["npu_cycles"] / c["npu_cycles"]
                ratios.setdefault(f"{target} {side}", []).append(ratio)
                cells.append(f"{ratio:.3f}")
            else:
                cells.append("-")
        cells += [_fmt(o.get("total_cycles"), ",.0f"), _fmt(t.get("total_cycles"), ",.0f"),
                  _fmt(c.get("total_cycles"), ",.0f"),
                  f"{_fmt(o.get('sram_peak_kib'), '.0f')}/{_fmt(c.get('sram_peak_kib'), '.0f')}",
                  f"{_fmt(o.get('flash_kib'), '.0f')}/{_fmt(c.get('flash_kib'), '.0f')}",
                  f"{_fmt(o.get('cpu_ops'))}/{_fmt(c.get('cpu_ops'))}",
                  f"{_fmt(o.get('compile_s'), '.1f')}/{_fmt(t.get('compile_s'), '.1f')}/"
                  f"{_fmt(c.get('compile_s'), '.1f')}",
                  f"{_fmt(o.get('mac_util') and 100 * o['mac_util'], '.1f')}/"
                  f"{_fmt(t.get('mac_util') and 100 * t['mac_util'], '.1f')} %",
                  ",".join(t.get("tune_chosen") or []) or "-",
                  "/".join(r.get("commit") or "-" for r in (o, t, c))]
        lines.append("| " + " | ".join(cells) + " |")
    for key, values in ratios.items():
        geo = math.exp(sum(math.log(v) for v in values) / len(values))
        lines.append(f"\ngeomean NPU-cycle ratio ours/competitor, {key}: {geo:.3f} over {len(values)} models "
                     "(rows with both sides measured here)")
    errors = [f"- {r['model']} {r['target']} {r['side']}: {_why(r)}" for r in rows if r["error"]]
    return "\n".join(lines + (["\nerrors:"] + errors if errors else []))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=list(TORCHVISION_ISSUE),
                   help="public_models names, or 'all' (default: the issue's 8 torchvision models)")
    p.add_argument("--targets", nargs="+", default=["ethos-u55-128", "ethos-u85-256"])
    p.add_argument("--input-size", type=int, default=128)
    p.add_argument("--sides", nargs="+", default=list(SIDES), choices=list(SIDES))
    p.add_argument("--no-upstream", action="store_true", help="ours only")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=RESULTS / "ethosu_public.json")
    p.add_argument("--reuse", action="store_true", help="keep the rows --out already has; run the others")
    p.add_argument("--redo", nargs="+", default=[], help="with --reuse: measure these models again")
    p.add_argument("--channels-last-io", action="store_true",
                   help="our sides export with channels-last image inputs (arm-compile --channels-last-io)")
    p.add_argument("--timeout-s", type=float, default=1800.0, help="per compile (one model, target, side)")
    p.add_argument("--competitor-timeout-s", type=float, default=None,
                   help="per compile of the competitor side (default: --timeout-s); its process also runs vela a "
                        "second time to time it")
    args = p.parse_args(argv)
    models = list(ALL) if args.models == ["all"] else args.models
    sides = [s for s in args.sides if not (args.no_upstream and s == "competitor")]
    logs = RESULTS / "logs" / f"ethosu_public-{datetime.now(UTC):%Y%m%dT%H%M%S}"
    logs.mkdir(parents=True, exist_ok=True)
    rows, started = [], time.perf_counter()
    meta = {"commit": _git_commit(), "versions": _versions(), "host": platform.node(), "input_size": args.input_size,
            "seed": args.seed, "note": "vela cycle estimates; int8 PTQ on one seeded random input; random init"}
    cached = _cached_rows(args.out, args.input_size) if args.reuse else {}
    for model in models:
        for target in args.targets:
            for side in sides:
                module, kwargs = SIDES[side]
                mode = next((m for family, m in SAME_MEMORY_MODE.items() if target.startswith(family)), None)
                if module == "our_flows" and mode:
                    kwargs = {**kwargs, "memory_mode": mode}
                if module == "our_flows" and args.channels_last_io:
                    kwargs = {**kwargs, "channels_last_io": True}
                row = None if model in args.redo else cached.get((model, target, side))
                if row and (module != "our_flows" or not mode or (row.get("vela_flags") or "").endswith(mode)):
                    rows.append(row)  # (a row of ours compiled in another memory mode is measured again)
                    continue
                log = logs / f"{model.replace(':', '_')}-{target}-{side}.log"
                load = os.getloadavg()[0]  # the machine's load when the compile started
                cap = args.competitor_timeout_s if side == "competitor" and args.competitor_timeout_s else args.timeout_s
                res = run_isolated_example(module, "ethosu", model, args.seed, args.input_size, log, cap,
                                           target=target, **kwargs)
                rows.append({**_row(model, target, side, res), "commit": meta["commit"], "loadavg_1m": load})
                r = rows[-1]
                print(f"[{time.perf_counter() - started:6.0f} s] {model} {target} {side}: NPU {r['npu_cycles']} "
                      f"compile {_fmt(r['compile_s'], '.1f')} s {r['error'] or ''}", file=sys.stderr, flush=True)
                # after every row: a long run cut short keeps what it measured (and the cached rows it
                # has not reached yet)
                done = {(r["model"], r["target"], r["side"]) for r in rows}
                _write(args, meta, rows + [r for key, r in cached.items() if key not in done])
    print(table(rows))
    return 1 if any(r["error"] for r in rows) else 0


def _cached_rows(path: Path, input_size: int) -> dict[tuple[str, str, str], dict]:
    """The rows of an earlier run's JSON at the same input size, by (model, target, side)."""
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    if data.get("input_size") != input_size:
        return {}
    return {(r["model"], r["target"], r["side"]): r for r in data["rows"]}


def _write(args: argparse.Namespace, meta: dict, rows: list[dict]) -> None:
    meta = {**meta, "date": datetime.now(UTC).isoformat(timespec="seconds")}
    text = table(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**meta, "rows": rows}, indent=1))
    md = args.out.with_suffix(".md")
    # hand-written analysis below NOTES_MARKER survives a re-run
    notes = md.read_text().partition(NOTES_MARKER)[2] if md.exists() else ""
    md.write_text(
        f"# Ethos-U public models ({meta['date']}, input {args.input_size})\n\n"
        f"vela {meta['versions'].get('ethos-u-vela')}, the same for both sides; o = ours, t = ours --tune, "
        f"c = competitor (executorch.backends.arm, its own process, measured here). Rows measured at commits "
        f"{', '.join(sorted({r['commit'] for r in rows}))} (each row's commit is in the last column and the "
        f"JSON).\n\n{text}\n" + (f"\n{NOTES_MARKER}{notes}" if notes else ""))


if __name__ == "__main__":
    raise SystemExit(main())
