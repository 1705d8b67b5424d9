"""Op coverage: every case of `arm_tosa_core/op_tables.py`, lowered by us and by upstream, FP and INT.

    uv run python bench/op_coverage.py [--families flip cumsum ...] [--sides ours upstream]
    (also part of `nox -s bench`; `bench/run_bench.py --coverage-only` runs only this)

Each (side, profile) runs in its own interpreter (`python bench/op_coverage.py --worker ...`), so our
backends and upstream's never share a process (see README.md, "Isolation"). A worker appends one
JSON line per case; when a case kills its interpreter (or hangs past the timeout), the driver marks
that case `crashed` and starts a fresh worker at the next case.

A case is `lowered` when no compute node is left outside the delegates (the Q/DQ at the float
boundary of an INT program do not count), `cpu` when some is (for ours, the partition report's
reason is kept), `crashed` when quantizing or lowering raised. For ours, a lowered case also runs on
the TOSA reference model: `wrong` when it is off eager (FP, 1e-4 relative; 1e-3 for float16) or the fake-quant model
(INT, more than 1 LSB of the output scale).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import operator
import re
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
STATES = ("lowered", "cpu", "crashed", "wrong")
_BOUNDARY = ("quantize_per_tensor", "dequantize_per_tensor", "quantize_per_channel", "dequantize_per_channel")


def load_op_tables():
    """`arm_tosa_core/op_tables.py`, loaded by path (it imports only torch; the package is not imported)."""
    spec = importlib.util.find_spec("arm_tosa_core")
    path = Path(spec.origin).with_name("op_tables.py")
    file_spec = importlib.util.spec_from_file_location("_arm_op_tables", path)
    module = importlib.util.module_from_spec(file_spec)
    sys.modules[file_spec.name] = module  # dataclasses look the module up by name
    file_spec.loader.exec_module(module)
    return module


def cpu_compute_nodes(edge: Any) -> list[str]:
    """Names of compute nodes outside any delegate (getitem and boundary Q/DQ not counted)."""
    left = []
    for node in edge.exported_program().graph_module.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        name = str(node.target)
        if "executorch_call_delegate" in name or any(b in name for b in _BOUNDARY):
            continue
        left.append(name)
    return left


# ----------------------------------------------------------------------------- the two sides
def _ours(case, profile: str) -> dict[str, Any]:
    import torch
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    from arm_tosa_core import (
        TosaCompileSpec,
        TOSAPartitioner,
        partition_report,
        run_on_reference_model,
    )

    spec = case.spec(profile)
    module, inputs = case.module(), case.inputs()
    with torch.no_grad():
        expected = module(*inputs)
    if profile == "INT":
        from arm_quantizer import TOSAQuantizer, get_symmetric_quantization_config

        module = _quantize(module, inputs, TOSAQuantizer(TosaCompileSpec(spec)).set_global(
            get_symmetric_quantization_config()))
        with torch.no_grad():
            expected = module(*inputs)
    edge = to_edge_transform_and_lower(torch.export.export(module, inputs),
                                       partitioner=[TOSAPartitioner(TosaCompileSpec(spec))],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    left = cpu_compute_nodes(edge)
    if left:
        reasons = [c.reason for c in partition_report(edge).cpu_nodes if "quantize" not in c.target]
        return {"state": "cpu", "left": left, "reason": reasons[0] if reasons else ""}
    with torch.no_grad():
        got = run_on_reference_model(edge, *inputs)
    err, tol = _error(got, expected, module if profile == "INT" else None)
    return {"state": "lowered" if err <= tol else "wrong", "err": err, "tol": tol}


def _upstream(case, profile: str) -> dict[str, Any]:
    import torch
    from executorch.backends.arm.quantizer import TOSAQuantizer, get_symmetric_quantization_config
    from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec
    from executorch.backends.arm.tosa.partitioner import TOSAPartitioner
    from executorch.exir import to_edge_transform_and_lower

    spec = case.spec(profile)
    module, inputs = case.module(), case.inputs()
    if profile == "INT":
        quantizer = TOSAQuantizer(TosaCompileSpec(spec))
        quantizer.set_global(get_symmetric_quantization_config(is_per_channel=True))
        module = _quantize(module, inputs, quantizer, check_guards=False)
    edge = to_edge_transform_and_lower(torch.export.export(module, inputs),
                                       partitioner=[TOSAPartitioner(TosaCompileSpec(spec))])
    left = cpu_compute_nodes(edge)
    return {"state": "cpu", "left": left} if left else {"state": "lowered"}


def _quantize(module, inputs, quantizer, check_guards: bool = True):
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    # upstream's quantizer passes die on torch 2.13's `_guards_fn` call_module ("call_module is not
    # supported"): its side exports with check_guards=False, as upstream_flows.py does
    graph_module = torch.export.export(module, inputs).module(check_guards=check_guards)
    prepared = prepare_pt2e(graph_module, quantizer)
    prepared(*inputs)
    return convert_pt2e(prepared)


def _error(got, expected, fake_quant) -> tuple[float, float]:
    """(max abs error, tolerance): 1e-4 x max |expected| (FP; 1e-3 for float16 results), or 1 LSB of
    the output scale (INT)."""
    import torch

    a = torch.cat([t.detach().double().flatten() for t in torch.utils._pytree.tree_leaves(got)])
    b = torch.cat([t.detach().double().flatten() for t in torch.utils._pytree.tree_leaves(expected)])
    if a.shape != b.shape:
        return float("inf"), 0.0
    err = (a - b).abs().max().item() if a.numel() else 0.0
    if fake_quant is None:  # float16 outputs: 1e-3 (about one float16 ulp; 1e-4 is below it)
        half = any(t.dtype in (torch.float16, torch.bfloat16) for t in torch.utils._pytree.tree_leaves(expected))
        return err, (1e-3 if half else 1e-4) * max(b.abs().max().item() if b.numel() else 0.0, 1e-6)
    out = [n for n in fake_quant.graph.nodes if n.op == "output"][0]
    scales = []
    for node in torch.utils._pytree.tree_leaves(out.args[0]):
        while node.op == "call_function" and "dequantize" not in str(node.target) and node.args \
                and isinstance(node.args[0], torch.fx.Node):  # cat's first argument is a list
            node = node.args[0]
        scales.append(float(node.args[1]) if "dequantize" in str(node.target) else 0.0)
    return err, 1.0001 * max(scales, default=0.0)


def _worker(side: str, profile: str, families: list[str] | None, start: int, out: Path) -> int:
    tables = load_op_tables()
    run = _ours if side == "ours" else _upstream
    cases = [c for c in tables.all_cases(families) if profile in c.profiles]
    for index in range(start, len(cases)):
        case = cases[index]
        t0 = time.perf_counter()
        try:
            res = run(case, profile)
        except Exception as exc:  # a crash is a result here, not a failure of the benchmark
            res = {"state": "crashed", "error": f"{type(exc).__name__}: {exc}"[:400],
                   "traceback_tail": traceback.format_exc()[-800:]}
        res.update(index=index, case=case.id, family=case.family, seconds=time.perf_counter() - t0)
        with out.open("a") as f:
            f.write(json.dumps(res, default=str) + "\n")
    return 0


# ----------------------------------------------------------------------------- driver and table
def run_side(side: str, profile: str, families: list[str] | None = None, timeout_s: float = 900,
             log_file: Path | None = None) -> list[dict[str, Any]]:
    """All cases of one (side, profile), each worker in a fresh interpreter; see module docstring."""
    cases = [c for c in load_op_tables().all_cases(families) if profile in c.profiles]
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "results.jsonl"
        while len(results) < len(cases):
            cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", side, profile, str(len(results)),
                   str(out), "--families", *(families or [])]
            log = open(log_file, "a") if log_file else subprocess.DEVNULL  # noqa: SIM115
            try:
                subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=BENCH_DIR.parent,
                               timeout=timeout_s, check=False)
                why = "the interpreter died"
            except subprocess.TimeoutExpired:
                why = f"timed out after {timeout_s:.0f} s"
            finally:
                if log_file:
                    log.close()
            lines = out.read_text().splitlines() if out.is_file() else []
            results = [json.loads(line) for line in lines]
            if len(results) < len(cases):  # the case after the last result killed the worker
                case = cases[len(results)]
                with out.open("a") as f:
                    f.write(json.dumps({"state": "crashed", "error": why, "index": len(results),
                                        "case": case.id, "family": case.family}) + "\n")
                results = [json.loads(line) for line in out.read_text().splitlines()]
    for r in results:
        r.update(side=side, profile=profile)
    return results


def summary(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], Counter]:
    """(family, profile, side) -> Counter of states."""
    table: dict[tuple[str, str, str], Counter] = {}
    for r in rows:
        table.setdefault((r["family"], r["profile"], r["side"]), Counter())[r["state"]] += 1
    return table


def coverage_table(rows: list[dict[str, Any]]) -> str:
    """Families x FP/INT, `lowered/cpu/crashed[/wrong]` for ours beside upstream's."""
    table = summary(rows)
    sides = sorted({r["side"] for r in rows}, key=["ours", "upstream"].index)
    families = list(dict.fromkeys(r["family"] for r in rows))
    head = ["family"] + [f"{p} {s}" for p in ("FP", "INT") for s in sides]
    lines, totals = [], {}
    for fam in families:
        cells = [fam]
        for p in ("FP", "INT"):
            for s in sides:
                c = table.get((fam, p, s))
                cells.append(_cell(c) if c else "-")
                totals.setdefault((p, s), Counter()).update(c or {})
        lines.append(cells)
    lines.append(["total"] + [_cell(totals[(p, s)]) for p in ("FP", "INT") for s in sides])
    widths = [max(len(row[i]) for row in [head, *lines]) for i in range(len(head))]
    fmt = "  ".join(f"{{:{w}s}}" for w in widths)
    return "\n".join([fmt.format(*head), *(fmt.format(*row) for row in lines),
                      "cells: lowered/cpu/crashed (+wrong: lowered but off the reference, ours only)"])


def _cell(c: Counter) -> str:
    text = f"{c['lowered']}/{c['cpu']}/{c['crashed']}"
    return text + (f"+{c['wrong']}w" if c["wrong"] else "")


def op_name(text: str) -> str:
    """"aten.abs.default" out of "<EdgeOpOverload: aten.abs.default>: schema = ..." (names pass through)."""
    found = re.search(r"EdgeOpOverload: ([^>]+)>", str(text))
    return found.group(1) if found else str(text)


def markdown_report(rows: list[dict[str, Any]]) -> str:
    """The table, then every case not lowered, per side: ours with the partition report's reason,
    upstream with the ops it left on the CPU or the error it raised."""
    lines = ["```", coverage_table(rows), "```", ""]
    for side in ("ours", "upstream"):
        left = [r for r in rows if r["side"] == side and r["state"] != "lowered"]
        if not left:
            continue
        lines += [f"### {side}: not lowered ({len(left)})", "", "| case | profile | state | why |", "|---|---|---|---|"]
        for r in left:
            if r["state"] == "crashed":
                why = r.get("error", "")
            elif side == "ours":
                why = r.get("reason", "") or f"error {r.get('err')} > {r.get('tol')}"
            else:
                ops = dict.fromkeys(op_name(op) for op in r.get("left", []))
                why = "left on the CPU: " + ", ".join(ops)
            why = why.replace("|", "\\|").replace("\n", " ")[:300]
            lines.append(f"| {r['case']} | {r['profile']} | {r['state']} | {why} |")
        lines.append("")
    return "\n".join(lines)


def run_coverage(sides: list[str], families: list[str] | None = None, log_dir: Path | None = None,
                 echo: bool = True) -> list[dict[str, Any]]:
    """Run every (side, profile) and return all rows."""
    rows = []
    for profile in ("FP", "INT"):
        for side in sides:
            t0 = time.perf_counter()
            log = log_dir / f"coverage-{side}-{profile}.log" if log_dir else None
            part = run_side(side, profile, families, log_file=log)
            rows += part
            if echo:
                counts = Counter(r["state"] for r in part)
                print(f"  coverage {profile:3s} {side:8s} {time.perf_counter() - t0:6.1f} s  {dict(counts)}",
                      flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--worker":
        side, profile, start, out = argv[1], argv[2], int(argv[3]), Path(argv[4])
        families = argv[6:] if len(argv) > 5 else []
        return _worker(side, profile, families or None, start, out)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", nargs="*", default=None)
    ap.add_argument("--sides", nargs="+", default=["ours", "upstream"], choices=["ours", "upstream"])
    ap.add_argument("--json", type=Path, default=None, help="write every row here")
    ap.add_argument("--from-json", type=Path, default=None, help="print the table of rows written by --json")
    ap.add_argument("--markdown", type=Path, default=None, help="write the table and every case not lowered here")
    args = ap.parse_args(argv)
    rows = json.loads(args.from_json.read_text()) if args.from_json else run_coverage(args.sides, args.families)
    print(coverage_table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    if args.markdown:
        args.markdown.write_text(markdown_report(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
