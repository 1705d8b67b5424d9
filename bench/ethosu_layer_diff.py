"""Where ours loses NPU cycles to the competitor, per operator kind, from `bench_ethosu_public.py`'s JSON.

    uv run python bench/ethosu_layer_diff.py                       # every row above 1.0x
    uv run python bench/ethosu_layer_diff.py --min-ratio 0.95 --top 6

For each (model, target) with both sides measured and ours/competitor NPU cycles above `--min-ratio`:
vela's cycles per operator kind on each side (`cycles_by_op`, summed over layers) and the difference, then
each side's costliest layers (`top_layers`). On U85 regor's per-layer cycles overlap and do not add up to
the NPU total, so read the differences between the sides, not the sums. Rows measured before the JSON kept
per-layer numbers say so.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def account(ours: dict, comp: dict, top: int) -> list[str]:
    lines = [f"## {ours['model']} {ours['target']}: ours {ours['npu_cycles']:,.0f} / competitor "
             f"{comp['npu_cycles']:,.0f} = {ours['npu_cycles'] / comp['npu_cycles']:.3f} "
             f"(commits {ours.get('commit')} / {comp.get('commit')})"]
    o_ops, c_ops = ours.get("cycles_by_op"), comp.get("cycles_by_op")
    if not o_ops or not c_ops:
        missing = " and ".join(s for s, r in (("ours", o_ops), ("competitor", c_ops)) if not r)
        return lines + [f"no per-layer numbers for {missing} (row measured before they were kept)"]
    lines += ["| op | ours | competitor | ours - comp. |", "|---|---|---|---|"]
    for op in sorted(set(o_ops) | set(c_ops), key=lambda k: -abs(o_ops.get(k, 0) - c_ops.get(k, 0))):
        o, c = o_ops.get(op, 0.0), c_ops.get(op, 0.0)
        lines.append(f"| {op} | {o:,.0f} | {c:,.0f} | {o - c:+,.0f} |")
    lines += ["", "| # | ours layer | op | cycles | competitor layer | op | cycles |", "|---|---|---|---|---|---|---|"]
    o_top, c_top = ours.get("top_layers") or [], comp.get("top_layers") or []
    for i in range(min(top, max(len(o_top), len(c_top)))):
        cells = [str(i + 1)]
        for layers in (o_top, c_top):
            layer = layers[i] if i < len(layers) else {}
            cells += [layer.get("name", "-"), layer.get("op", "-"), f"{layer.get('cycles', 0):,.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=RESULTS / "ethosu_public.json")
    ap.add_argument("--min-ratio", type=float, default=1.0)
    ap.add_argument("--top", type=int, default=5)
    args = ap.parse_args(argv)
    rows = json.loads(args.json.read_text())["rows"]
    by = {(r["model"], r["target"], r["side"]): r for r in rows if r.get("npu_cycles") and not r.get("error")}
    out = []
    for (model, target, side), ours in by.items():
        comp = by.get((model, target, "competitor"))
        if side == "ours" and comp and ours["npu_cycles"] / comp["npu_cycles"] > args.min_ratio:
            out += account(ours, comp, args.top) + [""]
    print("\n".join(out) or f"no row above {args.min_ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
