"""Tables, ours/upstream ratios and PASS/MISS targets for ``run_bench.py``'s results.

A result row is ``{"model", "case", "side": "ours"|"upstream", **flow dict}`` (see ``our_flows`` and
``upstream_flows`` for the keys). Nothing here measures: it only reads those rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

Row = dict[str, Any]

# (key, header, format): the compile table, one line per model / case / side.
COMPILE_COLUMNS = [
    ("export_s", "export", "{:.2f}"),
    ("quantize_s", "quant", "{:.2f}"),
    ("lower_s", "lower", "{:.2f}"),
    ("lower_cpu_s", "lowerCPU", "{:.2f}"),
    ("total_s", "q+lower", "{:.2f}"),
    ("total_cpu_s", "q+lCPU", "{:.2f}"),
    ("serialize_s", "serial", "{:.2f}"),
    ("compute_share", "deleg", "{:.3f}"),
    ("partitions", "parts", "{}"),
    ("tosa_compute_ops", "ops", "{}"),
    ("tosa_transpose", "TRANSP", "{}"),
    ("tosa_rescale", "RESCALE", "{}"),
    ("fold_tosa_rescale", "RESCfold", "{}"),
    ("tosa_table", "TABLE", "{}"),
    ("ref_rel_err", "maxErr", "{:.2e}"),
    ("ref_sqnr_float_db", "SQNRfl", "{:.1f}"),
    ("ref_sqnr_fq_db", "SQNRfq", "{:.1f}"),
    ("fold_sqnr_float_db", "fold.fl", "{:.1f}"),
]

# Ethos-U columns (vela estimates).
ETHOSU_COLUMNS = [
    ("vela_s", "vela_s", "{:.2f}"),
    ("vela_npu_cycles", "npu_cyc", "{:.0f}"),
    ("vela_total_cycles", "tot_cyc", "{:.0f}"),
    ("vela_sram_kib", "SRAMKiB", "{:.1f}"),
    ("vela_flash_kib", "flashKiB", "{:.1f}"),
]

# VGF columns: compile cost, size, and the VGF run on this host's Vulkan device against the TOSA
# reference model on the graph it was converted from.
VGF_COLUMNS = [
    ("lower_s", "lower", "{:.2f}"),
    ("convert_s", "convert", "{:.2f}"),
    ("vgf_bytes", "VGFKiB", "{:.0f}"),
    ("vulkan_latency_s", "vk ms", "{:.1f}"),
    ("vulkan_latency_repeats", "vk n", "{}"),
    ("ref_latency_s", "ref ms", "{:.1f}"),
    ("vk_over_ref", "vk/ref", "{:.2f}"),
    ("vk_vs_ref", "vk=ref", "{}"),
    ("vulkan_rel_err", "vk err", "{:.2e}"),
    ("vulkan_sqnr_fq_db", "vkSQNRfq", "{:.1f}"),
]

_SCALE = {"vgf_bytes": 1 / 1024, "vulkan_latency_s": 1e3, "ref_latency_s": 1e3}
_BOUNDARY_QDQ = ("quantize_per_tensor", "dequantize_per_tensor")


def add_derived(row: Row) -> Row:
    """Add ``compute_share``: delegated share not counting the float boundary's quantize/dequantize;
    for VGF rows ``vk_over_ref`` (Vulkan latency / reference-model latency) and ``vk_vs_ref``
    ("exact", or the relative error of the Vulkan outputs against the reference model's).

    PT2E leaves one quantize at each float input and one dequantize at each float output; both
    toolkits keep them on the CPU by design, so they are not what "100 % delegation" is about.
    """
    if row.get("vulkan_latency_s") and row.get("ref_latency_s"):
        row["vk_over_ref"] = row["vulkan_latency_s"] / row["ref_latency_s"]
    if "vulkan_vs_ref_bit_exact" in row:  # Vulkan against the reference model, same graph and inputs
        exact = row["vulkan_vs_ref_bit_exact"]
        row["vk_vs_ref"] = "exact" if exact else f"{row['vulkan_vs_ref_rel_err']:.1e}"
    if "delegated_nodes" in row:
        boundary = sum(v for k, v in row.get("not_delegated", {}).items() if any(q in k for q in _BOUNDARY_QDQ))
        counted = row["total_nodes"] - boundary
        row["compute_share"] = row["delegated_nodes"] / counted if counted else 1.0
    return row


def _cell(row: Row, key: str, fmt: str) -> str:
    value = row.get(key)
    if value is None:
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if isinstance(value, str):
        return value
    return fmt.format(value * _SCALE.get(key, 1))


def _table(rows: list[Row], columns: list[tuple[str, str, str]], keep: Callable[[Row], bool]) -> list[str]:
    head = f"{'model':15s} {'case':10s} {'side':8s} " + " ".join(f"{h:>8s}" for _, h, _ in columns)
    lines = [head, "-" * len(head)]
    for r in rows:
        if not keep(r):
            continue
        lead = f"{r['model']:15s} {r['case']:10s} {r['side']:8s} "
        if "unavailable" in r:
            lines.append(lead + f"not available: {r['unavailable'][:150]}")
        elif "error" in r:
            lines.append(lead + f"ERROR {r.get('root_cause', r['error'])[:150].splitlines()[0]}")
        else:
            lines.append(lead + " ".join(f"{_cell(r, k, f):>8s}" for k, _, f in columns))
    return lines


def compile_table(rows: list[Row]) -> str:
    """Compile time, delegation, TOSA op counts and reference-model accuracy, per row."""
    return "\n".join(_table(rows, COMPILE_COLUMNS, lambda r: True))


def ethosu_table(rows: list[Row]) -> str:
    """vela numbers, for the Ethos-U rows only ("" when there are none)."""
    lines = _table(rows, ETHOSU_COLUMNS, lambda r: r["case"].startswith("ethosu"))
    return "\n".join(lines) if len(lines) > 2 else ""


def vgf_table(rows: list[Row]) -> str:
    """VGF compile cost, size and host latency, for the VGF rows only ("" when there are none)."""
    lines = _table(rows, VGF_COLUMNS, lambda r: r["case"].startswith("vgf"))
    return "\n".join(lines) if len(lines) > 2 else ""


# ----------------------------------------------------------------------------- ratios and targets


def _pairs(rows: list[Row]) -> list[tuple[Row, Row]]:
    """(ours, upstream) rows of the same model and case, both without error."""
    ups = {(r["model"], r["case"]): r for r in rows if r["side"] == "upstream"}
    return [(r, ups[(r["model"], r["case"])]) for r in rows
            if r["side"] == "ours" and (r["model"], r["case"]) in ups
            and not {"error", "unavailable"} & (r.keys() | ups[(r["model"], r["case"])].keys())]  # fmt: skip


def _ratio(a: Any, b: Any) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return float(a) / float(b)


RATIO_KEYS = [  # (key, label): ours / upstream
    ("lower_s", "lower"),
    ("lower_cpu_s", "lowerCPU"),
    ("total_s", "q+lower"),
    ("total_cpu_s", "q+lCPU"),
    ("tosa_compute_ops", "ops"),
    ("tosa_rescale", "RESCALE"),
    ("vela_npu_cycles", "npu_cyc"),
    ("vela_total_cycles", "tot_cyc"),
    ("convert_s", "convert"),
    ("vgf_bytes", "VGFsize"),
    ("vulkan_latency_s", "vk lat"),
]


def ratios(rows: list[Row]) -> list[Row]:
    """Ours / upstream for each model and case; SQNR as a difference in dB (ours - upstream)."""
    out = []
    for ours, up in _pairs(rows):
        entry: Row = {"model": ours["model"], "case": ours["case"]}
        for key, _ in RATIO_KEYS:
            entry[key] = _ratio(ours.get(key), up.get(key))
        for key in ("ref_sqnr_float_db", "ref_sqnr_fq_db"):
            a, b = ours.get(key), up.get(key)
            both_exact = a is not None and b is not None and math.isinf(a) and math.isinf(b)
            entry[f"{key}_delta"] = None if a is None or b is None else 0.0 if both_exact else a - b
            entry[f"{key}_ratio"] = _ratio(a, b) if a is not None and math.isfinite(a) else None
        out.append(entry)
    return out


def ratio_table(entries: list[Row]) -> str:
    """One line per model and case: the ratios, and the SQNR differences."""
    cols = [*RATIO_KEYS, ("ref_sqnr_float_db_delta", "dSQNRfl"), ("ref_sqnr_fq_db_delta", "dSQNRfq")]
    head = f"{'model':15s} {'case':10s} " + " ".join(f"{h:>8s}" for _, h in cols)
    lines = [head, "-" * len(head)]
    for e in entries:
        cells = ["-" if e.get(k) is None else ("inf" if math.isinf(e[k]) else f"{e[k]:.2f}") for k, _ in cols]
        lines.append(f"{e['model']:15s} {e['case']:10s} " + " ".join(f"{c:>8s}" for c in cells))
    return "\n".join(lines)


def _same_share(ours: Row, up: Row) -> bool:
    return abs(ours.get("compute_share", 0) - up.get("compute_share", 0)) < 1e-9


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "MISS")


def _time_target(name: str, pair: tuple[Row, Row] | None, key: str, cpu_key: str, limit: float) -> Row:
    """A time target judged on wall seconds (as stated) and, for a busy machine, on CPU seconds."""
    if pair is None:
        return {"target": name, "verdict": "n/a", "detail": "needs both sides"}
    ours, up = pair
    wall, cpu = _ratio(ours.get(key), up.get(key)), _ratio(ours.get(cpu_key), up.get(cpu_key))
    detail = (f"wall {ours.get(key, 0):.1f}/{up.get(key, 0):.1f} s = {wall:.2f}; cpu "
              f"{ours.get(cpu_key, 0):.1f}/{up.get(cpu_key, 0):.1f} s = "
              + ("-" if cpu is None else f"{cpu:.2f} ({_verdict(cpu <= limit)})"))
    return {"target": name, "verdict": _verdict(None if wall is None else wall <= limit),
            "wall_ratio": wall, "cpu_ratio": cpu, "limit": limit, "detail": detail}


def targets(rows: list[Row]) -> list[Row]:
    """The project's targets, each with a verdict (PASS / MISS / n/a) and the numbers behind it."""
    pairs = {(o["model"], o["case"]): (o, u) for o, u in _pairs(rows)}
    ours = [r for r in rows if r["side"] == "ours" and not {"error", "unavailable"} & r.keys()]
    out = [_time_target("MobileNetV2 FP lowering <= 1/4 of upstream", pairs.get(("mobilenet_v2", "tosa_fp")),
                        "lower_s", "lower_cpu_s", 0.25)]
    short = [f"{r['model']}/{r['case']} {r['compute_share']:.3f}" for r in ours
             if r.get("compute_share", 1.0) < 1.0]
    out.append({"target": "100 % delegation (boundary Q/DQ not counted)",
                "verdict": _verdict(None if not ours else not short),
                "detail": "all delegated" if not short else "short: " + ", ".join(short)})
    # Op counts compare only where both sides delegated the same share of the model.
    same = {k: (o, u) for k, (o, u) in pairs.items() if _same_share(o, u)}
    worse = [f"{m}/{c} {o['tosa_compute_ops']}>{u['tosa_compute_ops']}" for (m, c), (o, u) in same.items()
             if o.get("tosa_compute_ops", 0) > u.get("tosa_compute_ops", 0)]
    skipped = [f"{m}/{c}" for m, c in pairs if (m, c) not in same]
    detail = ("no comparable pair" if not same else "every pair" if not worse else "more: " + ", ".join(worse)) + (
        f"; not comparable (delegated shares differ): {', '.join(skipped)}" if skipped else "")
    out.append({"target": "compute ops <= upstream", "verdict": _verdict(None if not same else not worse),
                "detail": detail})
    out.append(_time_target("MobileNetV2 INT8 quantize+lower <= 1/5 of upstream",
                            pairs.get(("mobilenet_v2", "tosa_int")), "total_s", "total_cpu_s", 0.2))
    sq = [(m, o.get("ref_sqnr_float_db"), u.get("ref_sqnr_float_db")) for (m, c), (o, u) in pairs.items()
          if c == "tosa_int" and o.get("ref_sqnr_float_db") is not None and u.get("ref_sqnr_float_db") is not None]
    out.append({"target": "INT8 SQNR vs float >= upstream",
                "verdict": _verdict(None if not sq else all(a >= b for _, a, b in sq)),
                "detail": ", ".join(f"{m} {a:.2f} vs {b:.2f} dB" for m, a, b in sq) or "needs tosa_int on both"})
    mnv2 = next((r for r in ours if r["model"] == "mobilenet_v2" and r["case"] == "tosa_int"), None)
    if mnv2 is None:
        out.append({"target": "MobileNetV2 RESCALE < 83 (default and fold)", "verdict": "n/a",
                    "detail": "needs our mobilenet_v2 tosa_int"})
    else:
        default, folded = mnv2.get("tosa_rescale"), mnv2.get("fold_tosa_rescale")
        ok = default is not None and folded is not None and default < 83 and folded < 83
        out.append({"target": "MobileNetV2 RESCALE < 83 (default and fold)", "verdict": _verdict(ok),
                    "detail": f"default {default} ({_verdict(default is not None and default < 83)}), "
                              f"fold_rescales {folded} ({_verdict(folded is not None and folded < 83)})"})
    for (m, c), pair in sorted(pairs.items()):
        if c != "ethosu_u55":
            continue
        out.append(_time_target(f"{m} Ethos-U55-128 total compile <= 1/5 of upstream", pair,
                                "total_s", "total_cpu_s", 0.2))
        o, u = pair
        r = _ratio(o.get("vela_npu_cycles"), u.get("vela_npu_cycles"))
        detail = f"{o.get('vela_npu_cycles', 0):.0f} / {u.get('vela_npu_cycles', 0):.0f}" + (
            "" if r is None else f" = {r:.3f}")
        # vela counts only what runs on the NPU: with less delegated, fewer cycles mean nothing.
        same_share = _same_share(o, u)
        if not same_share:
            detail += (f"; not comparable: delegated {o.get('compute_share', 0):.3f} (ours) vs "
                       f"{u.get('compute_share', 0):.3f}, the rest runs on the CPU and is not counted")
        out.append({"target": f"{m} Ethos-U55-128 NPU cycles <= 0.9 x upstream",
                    "verdict": _verdict(None if r is None or not same_share else r <= 0.9), "ratio": r,
                    "detail": detail})
    return out


def targets_table(entries: list[Row]) -> str:
    """One line per target: verdict, name, and the numbers behind it."""
    width = max(len(e["target"]) for e in entries)
    return "\n".join(f"{e['verdict']:5s} {e['target']:{width}s}  {e['detail']}" for e in entries)
