"""Decoder benchmark on ethos-u85-256 (vela estimates): ours vs the competitor's Arm backend for the same
static-KV-cache decoder (`arm_tosa_core.kv_cache_models.StaticCacheDecoder`), a8w8, a8w4 and a16w8.

    uv run python bench/bench_decoder.py            # both sides, every config; table + JSON in bench/results/decoder
    uv run python bench/bench_decoder.py --no-upstream
    uv run python bench/bench_decoder.py --configs a8w4 --sides ours   # re-measure one cell
    uv run python bench/bench_decoder.py --report-only                 # table from the recorded cells

Per side and config: NPU cycles of one decoded token (`decode`, 1 token) and of a prefill of 32 tokens
(`prefill`), the SRAM peak and flash bytes (vela's summary: SRAM used, off-chip flash used), the number of
delegated partitions per method, and the SQNR of the last-step logits vs the float model (fake-quant
modules, 32 prompt tokens then 8 greedy steps). Ours stores the KV cache int8/int16 in the program with
fixed calibrated scales (`quantize_methods(..., cache_qparams=...)`). Each side runs in its own process
(the two define backends of the same class names); the competitor is imported only there. A side that
fails on a config records the exception as its reason.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib.util
import io
import json
import math
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CELLS = RESULTS / "decoder"  # one JSON per (side, config), so a cell can be re-measured on its own
MODELS_FILE = HERE.parent / "packages" / "arm-tosa-core" / "src" / "arm_tosa_core" / "kv_cache_models.py"
TARGET = "ethos-u85-256"
CONFIGS = ("a8w8", "a8w4", "a16w8")
SIDES = ("ours", "ours-functional", "upstream")
# One memory configuration on both sides: our default for U85, the competitor's spec told the same (its own
# default is Sram_Only, where vela places the weights in SRAM too; a decoder's weights do not fit a real U85's
# SRAM, so they stream from DRAM: Dedicated_Sram_384KB, the 384 KB holding the arena, the KV cache and the
# weight buffers).
MEMORY = {"system_config": "Ethos_U85_SYS_DRAM_Mid", "memory_mode": "Dedicated_Sram_384KB"}
# A small Llama-shaped decoder that fits that config (see MODEL_WHY): 2 blocks of width 256, 4 heads of 64,
# a byte-level-sized vocabulary, 48 cache positions (a 32-token prompt and 8 steps, with room).
MODEL = {"vocab": 128, "dim": 256, "heads": 4, "layers": 2, "max_len": 48}
MODEL_WHY = ("the smallest Llama-shaped config whose weights dominate the stream the way a real decoder's do: at "
             "width 64 (the earlier config) the int8 embedding tables, per-channel bias/scale words and LUTs were "
             "a third of it, so a8w4/a8w8 could not pass 0.63 whatever was packed; at width 256 the linears are "
             "~90 %. Its SRAM peak stays far under the 384 KB, and each side's compile fits the bench's time.")
PROMPT_LEN, STEPS = 32, 8
CHILD_TIMEOUT_S = 5400


def _models():
    """kv_cache_models loaded from its file, so the competitor's process never imports arm_tosa_core."""
    spec = importlib.util.spec_from_file_location("kv_cache_models_standalone", MODELS_FILE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # torch.export resolves the model's classes by module name
    spec.loader.exec_module(module)
    return module


def sqnr_db(signal: torch.Tensor, approx: torch.Tensor) -> float:
    noise = float(((signal - approx) ** 2).sum())
    return math.inf if noise == 0.0 else 10.0 * math.log10(float((signal**2).sum()) / noise)


def _prompt() -> torch.Tensor:
    return torch.randint(0, MODEL["vocab"], (PROMPT_LEN,), generator=torch.Generator().manual_seed(0))


def _share(modules: dict) -> None:
    first, *rest = modules.values()
    for name, buf in first.named_buffers():
        if name.endswith("_cache"):
            for module in rest:
                *path, leaf = name.split(".")
                module.get_submodule(".".join(path)).register_buffer(leaf, buf)


def _zero(modules: dict) -> None:
    for module in modules.values():
        for name, buf in module.named_buffers():
            if name.endswith("_cache"):
                buf.zero_()


def _run(modules: dict):
    def run(method, inputs):
        with torch.no_grad():
            return modules[method](*inputs)
    return run


def _float_reference(km, model) -> tuple[list[int], torch.Tensor]:
    tokens, logits = km.greedy_decode(km.eager_runner(model), _prompt(), STEPS, MODEL["max_len"])
    model.reset_cache()
    return tokens, logits[-1]


def _accuracy(km, converted: dict, float_tokens: list[int], float_last: torch.Tensor) -> dict:
    _zero(converted)
    tokens, logits = km.greedy_decode(_run(converted), _prompt(), STEPS, MODEL["max_len"])
    _zero(converted)
    return {"sqnr_db": sqnr_db(float_last, logits[-1]),
            "token_agreement": sum(a == b for a, b in zip(tokens, float_tokens, strict=True)) / STEPS}


def _reexport(km, converted: dict) -> dict:
    examples = {"prefill": km.step_inputs(0, torch.zeros(PROMPT_LEN, dtype=torch.int64), MODEL["max_len"]),
                "decode": km.step_inputs(PROMPT_LEN, torch.zeros(1, dtype=torch.int64), MODEL["max_len"])}
    programs = {m: torch.export.export(converted[m], examples[m], strict=True) for m in converted}
    _zero(converted)
    return programs


def _vela_csv(folder: Path) -> dict:
    """vela's numbers from a folder of its outputs (either side's dumped artifacts). `weight_bytes` is the
    whole constant stream vela emits (the npz's `weight_data`: weights, bias/scale words, LUTs, constant
    tensors), the same measure as ours' `PartitionReport.weight_bytes`; `encoded_weight_bytes` is the summary's
    `total_npu_encoded_weights` (vela's count of encoded weight volumes only)."""
    rows = [next(csv.DictReader(p.open())) for p in sorted(folder.rglob("*_summary_*.csv"))]
    if not rows:
        return {}
    out = {"partitions": len(rows), "cycles_npu": sum(float(r["cycles_npu"]) for r in rows),
           "sram_bytes": max(float(r["sram_memory_used"]) for r in rows) * 1024,
           "flash_bytes": sum(float(r["off_chip_flash_memory_used"]) for r in rows) * 1024,
           "encoded_weight_bytes": sum(float(r.get("total_npu_encoded_weights") or 0) for r in rows)}
    npz = sorted(folder.rglob("*.npz"))
    if npz:
        import numpy as np

        out["weight_bytes"] = sum(int(np.load(f)["weight_data"].nbytes) for f in npz)  # one bytes scalar
    return out


# -- our side ---------------------------------------------------------------------------------------
def ours(config: str) -> dict:
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer, ethosu_report
    from arm_quantizer import (
        get_symmetric_a8w4_quantization_config,
        get_symmetric_a16w8_quantization_config,
        get_symmetric_quantization_config,
    )
    from arm_quantizer.int16_fallback import KEPT_INT8_META
    from arm_quantizer.kv_cache import calibrate_cache_qparams, quantize_methods
    from arm_tosa_core import kv_cache_models as km
    from arm_tosa_core import partition_report

    qconfig = {"a8w8": get_symmetric_quantization_config, "a16w8": get_symmetric_a16w8_quantization_config,
               "a8w4": lambda: get_symmetric_a8w4_quantization_config(is_per_channel=True)}[config]()
    model = km.StaticCacheDecoder(**MODEL).eval()
    float_tokens, float_last = _float_reference(km, model)
    spec = EthosUCompileSpec(TARGET, **MEMORY)

    def calibrate(run):
        return km.greedy_decode(run, _prompt(), STEPS, MODEL["max_len"])

    t0 = time.perf_counter()
    cache_dtype = torch.int16 if config == "a16w8" else torch.int8
    converted = quantize_methods(km.export_methods(model, PROMPT_LEN, MODEL["max_len"]),
                                 lambda: EthosUQuantizer(spec).set_global(qconfig), calibrate,
                                 cache_qparams=calibrate_cache_qparams(model, calibrate, cache_dtype),
                                 partitioner=EthosUPartitioner(spec))  # a16w8: int16 only where it lowers
    kept = sorted({node for m in converted.values() for node in m.meta.get(KEPT_INT8_META, {})})
    out = {"config": config, "cache": str(cache_dtype).removeprefix("torch."), "kept_int8": kept} | _accuracy(
        km, converted, float_tokens, float_last)
    edge = to_edge_transform_and_lower(_reexport(km, converted), partitioner=[EthosUPartitioner(spec)],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    out["compile_s"] = time.perf_counter() - t0
    for method in ("prefill", "decode"):
        ep = edge.exported_program(method)
        parts = ethosu_report(ep).partitions
        out[method] = {"partitions": len(parts), "cpu_nodes": len(partition_report(ep).cpu_nodes),
                       "cycles_npu": sum(p.cycles_npu for p in parts),
                       "sram_bytes": max(p.sram_memory_used_bytes for p in parts),
                       "flash_bytes": sum(p.off_chip_flash_memory_used_bytes for p in parts),
                       "weight_bytes": sum(p.weight_bytes for p in parts),
                       "memory_config": f"{parts[0].system_config} / {parts[0].memory_mode}"}
    return out


def ours_mixed(goal_db: float) -> dict:
    """Mixed precision (`arm_quantizer.decoder_precision`): a8w4 / a8w8 / a16w8 per projection chosen to
    reach `goal_db` (SQNR of every step's logits, teacher-forced) with the fewest weight bytes."""
    from arm_ethosu.decoder_precision_cli import compile_methods, decoder_case, search
    from arm_tosa_core import kv_cache_models as km

    t0 = time.perf_counter()
    case = decoder_case("static-cache", MODEL["dim"], MODEL["layers"], PROMPT_LEN, STEPS, MODEL["vocab"],
                        MODEL["max_len"])
    float_tokens, float_last = _float_reference(km, case.model)
    result = search(case, TARGET, goal_db)
    out = {"config": f"mixed@{goal_db:g}", "target_db": goal_db, "met": result.met, "rest": result.rest,
           "choice": result.choice, "search_sqnr_db": result.sqnr_db, "search_s": result.search_seconds,
           "real_quantizations": len(result.tried)} | _accuracy(km, result.converted, float_tokens, float_last)
    out |= compile_methods(case, result.converted, TARGET)
    out["compile_s"] = time.perf_counter() - t0
    return out


# -- the functional form (caches as inputs and outputs): the form the competitor lowers ------------------
def functional(side: str, config: str) -> dict:
    """`side` ("upstream" or "ours") on the same model in the functional form of `decoder_competitor_forms`
    (the competitor cannot lower the cache as a mutable buffer: "Invalid partition, found dependency cycles"
    in exir's fuser, recorded in results/decoder/competitor_forms.json). The competitor is imported only in
    its own process."""
    import decoder_competitor_forms as forms

    keep = os.environ.get("BENCH_DECODER_KEEP")  # a folder: keep each method's TOSA and vela outputs there
    return forms.functional_row("competitor" if side == "upstream" else "ours", config,
                                Path(keep) if keep else None)


# -- the quantized cache's own accuracy cost ---------------------------------------------------------
def cache_cost(steps: int = 32) -> list[dict]:
    """The float decoder with its cache stored int8 / int16 (every write rounded to the fixed calibrated
    scale, as the program stores it) vs the same decoder with a float cache: SQNR of the last-step logits
    and token agreement over `steps` greedy steps. Isolates the cache from the other quantized ops."""
    from arm_quantizer.kv_cache import calibrate_cache_qparams
    from arm_tosa_core import kv_cache_models as km

    model = km.StaticCacheDecoder(**(MODEL | {"max_len": PROMPT_LEN + steps})).eval()
    prompt = _prompt()

    def calibrate(run):
        return km.greedy_decode(run, prompt, STEPS, model.max_len)

    ref_tokens, ref_logits = km.greedy_decode(km.eager_runner(model), prompt, steps, model.max_len)
    rows = []
    for dtype in (torch.int8, torch.int16):
        qparams = calibrate_cache_qparams(model, calibrate, dtype)
        info = torch.iinfo(dtype)
        originals = {}
        for name, module in model.named_modules():
            if hasattr(module, "k_cache"):
                scales = {buf: qparams[f"{name}.{buf}"][0] for buf in ("k_cache", "v_cache")}
                originals[module] = module._write

                def write(cache, pos, new, _orig=module._write, _module=module, _scales=scales, _info=info):
                    scale = _scales["k_cache" if cache is _module.k_cache else "v_cache"]
                    _orig(cache, pos, torch.clamp(torch.round(new / scale), _info.min, _info.max) * scale)

                module._write = write
        tokens, logits = km.greedy_decode(km.eager_runner(model), prompt, steps, model.max_len)
        for module, original in originals.items():
            module._write = original
        rows.append({"cache": str(dtype).removeprefix("torch."), "steps": steps,
                     "sqnr_db": sqnr_db(ref_logits[-1], logits[-1]),
                     "token_agreement": sum(a == b for a, b in zip(tokens, ref_tokens, strict=True)) / steps})
    return rows


# -- driver -----------------------------------------------------------------------------------------
def _child(side: str, config: str) -> dict:
    cmd = [sys.executable, __file__, "--child", side, config, "--dim", str(MODEL["dim"])]
    try:  # the competitor's cell takes 20-40 minutes on a loaded 2-core machine at the bench's size
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return {"config": config, "error": f"no result within {CHILD_TIMEOUT_S} s (the cell's process was stopped)"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        return {"config": config, "error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    return json.loads(lines[-1].removeprefix("RESULT "))


def _provenance() -> dict:
    """When, at what load and on which commit a cell is measured (the table's notes print it)."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=HERE.parent, capture_output=True, text=True, check=False).stdout.strip()
        except OSError:
            return ""

    commit = git("rev-parse", "--short", "HEAD")
    if commit and git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench/results"):
        commit += "+local changes"  # code differs from the commit (the results files written meanwhile do not count)
    return {"epoch": time.time(), "utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            "load_start": round(os.getloadavg()[0], 1), "commit": commit or "unknown"}


def goals_note(rows: list[dict]) -> list[str]:
    """The issue's goals per config: ours / the competitor's NPU cycles (decode, prefill) for each of our
    forms, and whether each row is one partition per method."""
    def cycles(r, m):
        return r.get(m, {}).get("cycles_npu")

    theirs = {r["config"]: r for r in rows if r["side"] == "upstream" and cycles(r, "decode")}
    ratios = [f"{r['config']} {r.get('form', 'buffer')} {cycles(r, 'decode') / cycles(t, 'decode'):.3f} / "
              f"{cycles(r, 'prefill') / cycles(t, 'prefill'):.3f}"
              for r in rows if r["side"].startswith("ours") and (t := theirs.get(r["config"]))
              and cycles(r, "decode") and cycles(r, "prefill")]
    split = [f"{r['side']} {r['config']}" for r in rows
             if any(r.get(m, {}).get("partitions", r.get(m, {}).get("delegates")) not in (1, None)
                    for m in ("prefill", "decode"))]
    return ([f"Ours / the competitor's NPU cycles (decode / prefill), same config: {'; '.join(ratios)}."]
            if ratios else []) + [f"More than one partition per method: {', '.join(split) or 'none'}."]


def measured_note(rows: list[dict]) -> list[str]:
    """One line: each cell's date, machine load (1-minute average at its start and end) and commit."""
    cells = [f"{r['side']} {r['config']} {m['utc']} UTC, {m['minutes']:g} min at load {m['load_start']:g}-"
             f"{m['load_end']:g}, commit {m['commit']}" for r in rows if (m := r.get("measured"))]
    older = [f"{r['side']} {r['config']}" for r in rows if not r.get("measured")]
    lines = [f"Measured: {'; '.join(cells)}."] if cells else []
    if older:
        lines.append(f"Recorded in earlier sessions (before cells carried their date, load and commit): "
                     f"{', '.join(older)}.")
    return lines


def _fmt(v, spec: str = ",.0f") -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    return format(v, spec)


def _flash(method: dict) -> float | None:
    """What the method keeps in flash: vela's weight stream (weights, biases, scales). In the default
    Dedicated_Sram memory mode vela reports 0 off-chip flash (it places the weights in DRAM), so the
    weight bytes are the number to compare."""
    return method.get("weight_bytes") or method.get("flash_bytes")


def table(rows: list[dict]) -> str:
    head = ("side", "form", "config", "KV cache", "decode cycles/token", "prefill-32 cycles", "SRAM peak B",
            "weights (flash) B", "partitions p/d", "CPU nodes p/d", "SQNR dB", "tokens =float")
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        p, d = r.get("prefill", {}), r.get("decode", {})
        err = r.get("error") or p.get("error") or d.get("error")
        parts = f"{p.get('partitions', p.get('delegates', '-'))}/{d.get('partitions', d.get('delegates', '-'))}"
        cpu = f"{p.get('cpu_nodes', '-')}/{d.get('cpu_nodes', '-')}"
        sram = max(p.get("sram_bytes", 0), d.get("sram_bytes", 0)) or None
        form = r.get("form", "buffer")
        cache = f"{r['cache']} in the program" if r.get("cache") else "float in/out" if form == "functional" else "-"
        lines.append(" | ".join([r["side"].removesuffix("-functional"), form, r["config"], cache,
                                 _fmt(d.get("cycles_npu")), _fmt(p.get("cycles_npu")), _fmt(sram), _fmt(_flash(d)),
                                 parts, cpu, _fmt(r.get("sqnr_db"), ".1f"), _fmt(r.get("token_agreement"), ".2f")])
                     + (f"  (failed: {err})" if err else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=2, metavar=("SIDE", "CONFIG"), help=argparse.SUPPRESS)
    ap.add_argument("--no-upstream", action="store_true")
    ap.add_argument("--sides", nargs="+", default=list(SIDES), choices=SIDES,
                    help="ours: the buffer form (the cache stored in the program); ours-functional and upstream: "
                         "the functional form (caches as inputs/outputs), the one the competitor lowers")
    ap.add_argument("--configs", nargs="*", default=list(CONFIGS), choices=CONFIGS)
    ap.add_argument("--report-only", action="store_true", help="print the recorded cells, measure nothing")
    ap.add_argument("--mixed", type=float, nargs="*", default=[], metavar="DB",
                    help="also a mixed-precision row per target SQNR (dB): a8w4 / a8w8 / a16w8 per projection")
    ap.add_argument("--dim", type=int, default=MODEL["dim"],
                    help="model width; other than the default, the cells go to results/decoder/dim<N> (how the "
                         "a8w4/a8w8 weight ratio scales: 4-bit weights grow with dim^2, the int8 embedding "
                         "tables and per-channel bias/scale words with dim)")
    args = ap.parse_args(argv)
    global CELLS
    if args.dim != MODEL["dim"]:
        MODEL["dim"], CELLS = args.dim, CELLS / f"dim{args.dim}"
    if args.child:
        side, config = args.child
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                if side == "ours-mixed":
                    result = ours_mixed(float(config))
                elif side == "ours":
                    result = ours(config)
                else:  # "upstream" and "ours-functional": the functional form
                    result = functional(side.removesuffix("-functional"), config)
        except Exception as exc:  # noqa: BLE001  (recorded as the side's reason)
            traceback.print_exc()
            result = {"config": config, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
        print("RESULT " + json.dumps(result, default=str))
        return 0
    CELLS.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        if CELLS.name == "decoder":
            (CELLS / "cache_cost.json").write_text(json.dumps(cache_cost(), indent=2))
        sides = [s for s in args.sides if not (args.no_upstream and s == "upstream")]
        for config in args.configs:
            for side in sides:
                started = _provenance()
                cell = {"side": side} | _child(side, config)
                cell["measured"] = started | {"minutes": round((time.time() - started["epoch"]) / 60, 1),
                                              "load_end": round(os.getloadavg()[0], 1)}
                (CELLS / f"{side}-{config}.json").write_text(json.dumps(cell, indent=2, default=str))
                print(f"{side} {config}: done", file=sys.stderr)
        for goal in args.mixed:
            cell = {"side": "ours"} | _child("ours-mixed", f"{goal:g}")
            (CELLS / f"ours-mixed{goal:g}.json").write_text(json.dumps(cell, indent=2, default=str))
            print(f"ours mixed@{goal:g}: done", file=sys.stderr)
    cost = json.loads((CELLS / "cache_cost.json").read_text()) if (CELLS / "cache_cost.json").exists() else []
    rows = [json.loads(p.read_text()) for config in CONFIGS for side in SIDES
            if (p := CELLS / f"{side}-{config}.json").exists()]
    rows += [json.loads(p.read_text()) for p in sorted(CELLS.glob("ours-mixed*.json"))]
    ours_flash = {r["config"]: _flash(r.get("decode", {})) for r in rows if r["side"] == "ours"}
    ratio = (ours_flash["a8w4"] / ours_flash["a8w8"]) if ours_flash.get("a8w4") and ours_flash.get("a8w8") else None
    summary = {"target": TARGET, "model": MODEL, "memory": MEMORY, "prompt_len": PROMPT_LEN, "steps": STEPS,
               "a8w4_over_a8w8_flash": ratio, "rows": rows,
               "cache_cost_vs_float_cache": cost}
    (CELLS / "decoder.json").write_text(json.dumps(summary, indent=2, default=str))
    text = table(rows) + "\n\n" + "\n".join(notes(rows, cost, ratio)) + "\n"
    (CELLS / "table.md").write_text(text)
    print(text)
    return 0


VELA_CHANNEL_WORD_BYTES = 10  # vela's per-output-channel bias (40 bits) + scale (32) + shift (6): padded to 10 B


def flash_parts(model) -> dict[str, int]:
    """The weight stream's parts by what the model holds (bytes at 8 bits): linear weights, embedding tables,
    RMSNorm weights, and vela's bias/scale words (one per linear output channel, at any weight width)."""
    parts = dict.fromkeys(("linear", "embedding", "norm", "channel_words"), 0)
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            parts["linear"] += module.weight.numel()
            parts["channel_words"] += module.out_features * VELA_CHANNEL_WORD_BYTES
        elif isinstance(module, torch.nn.Embedding):
            parts["embedding"] += module.weight.numel()
        elif type(module).__name__ == "RMSNorm":
            parts["norm"] += module.weight.numel()
    return parts


def flash_parts_note(rows: list[dict]) -> list[str]:
    """Where a8w8's and a8w4's weight bytes go at this config, and the a8w4 ratio with the embedding tables
    at 4 bits too (the most an int4 GATHER could give)."""
    flash = {r["config"]: _flash(r.get("decode", {})) for r in rows if r["side"] == "ours"}
    if not flash.get("a8w8") or not flash.get("a8w4"):
        return []
    p = flash_parts(_models().StaticCacheDecoder(**MODEL))
    known8 = sum(p.values())
    rest8 = flash["a8w8"] - known8  # the int8 TABLEs' 256-byte LUTs (rsqrt, exp, reciprocal, silu), padding
    rest4 = flash["a8w4"] - (known8 - p["linear"] // 2)
    floor4 = p["linear"] // 2 + p["embedding"] // 2 + p["norm"] + p["channel_words"] + rest4
    return [f"Weight bytes by part at this config (decode): linear weights {p['linear']:,} at 8 bits "
            f"({p['linear'] // 2:,} at 4), embedding tables {p['embedding']:,}, RMSNorm weights {p['norm']:,}, "
            f"bias/scale words {p['channel_words']:,} ({VELA_CHANNEL_WORD_BYTES} B per linear output channel, at "
            f"either width), rest {rest8:,} (a8w8) / {rest4:,} (a8w4): the int8 TABLEs' 256-entry LUTs and padding. "
            f"With the embedding tables at 4 bits too, a8w4 would be {floor4:,} B, {floor4 / flash['a8w8']:.3f} of "
            "a8w8 (the bias/scale words and LUTs do not shrink with the weights)."]


def notes(rows: list[dict], cost: list[dict], ratio: float | None) -> list[str]:
    """What the table's numbers are measured on, what of a8w4 stays 8-bit, and the int cache's own cost."""
    memories = sorted({r[m]["memory_config"] for r in rows for m in ("prefill", "decode")
                       if "memory_config" in r.get(m, {})})
    lines = [f"Model: StaticCacheDecoder {MODEL}, prefill {PROMPT_LEN} tokens, SQNR of the last-step logits vs "
             f"float after {STEPS} greedy steps; {TARGET}. Why this size: {MODEL_WHY}",
             f"Memory: every cell compiled in {' and '.join(memories) or '-'} (vela system config / memory mode; "
             "the competitor's spec is given the same, its own U85 default being Sram_Only).",
             "Forms: `buffer` is the bench's model (the KV cache a mutable buffer written by index_copy_, stored "
             "int8/int16 in the program); `functional` the same model and weights with the caches as inputs and "
             "the updated caches as outputs (`decoder_competitor_forms.py`), the only form the competitor lowers: "
             "its partitioner fails on both buffer forms with \"Invalid partition, found dependency cycles\" "
             "(results/decoder/competitor_forms.json). CPU nodes: compute nodes outside the delegate (the "
             "functional form's boundary quantize/dequantize of the cache inputs and outputs, casts).",
             f"a8w4/a8w8 weight stream: {_fmt(ratio, '.3f')} (goal <= 0.55). Every linear (q/k/v/o, gate/up/down, "
             "LM head) is 4-bit; what stays 8-bit: the token and position embedding tables (TOSA GATHER takes "
             "int8/int16/int32 values, no int4), the RMSNorm weights (operands of an elementwise MUL: no int4 "
             "either) and vela's per-output-channel bias/scale words (the same size at 4 and 8 bits); these "
             "grow with dim, the 4-bit weights with dim^2, so the ratio falls "
             "with the model width (`--dim`, results in decoder/dim<N>)."]
    lines += flash_parts_note(rows)
    lines += goals_note(rows) + measured_note(rows)
    lines += [f"{r['side']} {r['config']}: {r['partial']}." for r in rows if r.get("partial")]
    lines += [f"{r['side']} {r['config']}: int16 but for {', '.join(r['kept_int8'])}, set back to int8 inside "
              "the partition (their int16 TABLE would be more than 1 LSB off for the calibrated ranges, which would "
              "leave them on the CPU)." for r in rows if r["side"].startswith("ours") and r.get("kept_int8")]
    lines += [f"ours {r['config']}: target {r['target_db']:g} dB {'met' if r['met'] else 'NOT met'} "
              f"({r['search_sqnr_db']:.1f} dB over every step's logits, teacher-forced; the table's SQNR is the "
              f"last step's, greedy), rest {r['rest']}, projections " + ", ".join(
                  f"{u} {p}" for u, p in r["choice"].items()) + f"; {r['real_quantizations']} real quantizations, "
              f"search {r['search_s']:.0f} s." for r in rows if r.get("config", "").startswith("mixed@")
              and "choice" in r]
    lines += [f"KV cache stored {c['cache']}: its own cost (float decoder, cache rounded to the fixed scale vs a "
              f"float cache, {c['steps']} greedy steps): last-step logits SQNR {c['sqnr_db']:.1f} dB, tokens equal "
              f"{c['token_agreement']:.2f}." for c in cost]
    return lines


if __name__ == "__main__":
    sys.exit(main())
