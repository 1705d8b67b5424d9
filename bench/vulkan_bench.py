"""Vulkan delegate benchmark (issue 12): this host's Vulkan device vs XNNPACK, and the recorded GPU table.

    uv run python bench/vulkan_bench.py [--models mobilenet_v2_224 llama_block_8] [--runs 10] [--budget-s 30]
                                        [--no-ncnn] [--gpu-only]

Here (lavapipe on a machine without GPU): MobileNetV2 1x3x224x224 and the Llama-style block (8 and 128
tokens), FP32, through our delegate (`VulkanPartitioner`, executorch.runtime) vs XNNPACK in the pip
runtime (bench/ may import executorch.backends.*, product code never does), and ncnn's Vulkan backend on
the same device (`bench/ncnn_peer.py`; its pinned pnnx/ncnn wheels go to bench/results/ncnn-tools, not
into the project; `--no-ncnn` skips it). Each (model, engine) runs in a fresh process: one warm-up call,
then up to `--runs` calls or `--budget-s` seconds (at least 3 calls); median ms per call, input and
output included; max|y-ref|/max|ref| against eager fp32. Writes bench/results/vulkan_bench.json.

Then it prints the GPU tables recorded on the lent H100 (the newest bench/results/gpu/*.jsonl and the
newest *_speed_*.jsonl of the kernel-speed run, the newest *_zoo_*.jsonl of the zoo run with ET-VK
and torch.compile beside ours, the newest *_decode_*.jsonl of the 4-bit decoder's decode run; how they were taken: bench/results/gpu/README.md), since
the GPU machine cannot be reached from here.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "results"
GPU = OUT / "gpu"
sys.path.insert(0, str(HERE))
import ncnn_peer  # noqa: E402

STEMS = [f"{name}_{size}" for name, size in ncnn_peer.CASES]


def _case(stem: str) -> tuple[str, int]:
    name, size = stem.rsplit("_", 1)
    return name, int(size)


def _lower(stem: str, engine: str, path: Path) -> None:
    """Write the fp32 .pte of one model for our delegate ("vkdg") or XNNPACK."""
    import torch
    from executorch.exir import to_edge_transform_and_lower

    from arm_tosa_core.example_models import get_example

    name, size = _case(stem)
    model, x = get_example(name).build(input_size=size)
    if engine == "vkdg":
        from vulkan_delegate import VulkanPartitioner

        partitioner = VulkanPartitioner()
    else:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        partitioner = XnnpackPartitioner()
    edge = to_edge_transform_and_lower(torch.export.export(model, x), partitioner=[partitioner])
    path.write_bytes(edge.to_executorch().buffer)


def _measure(pte: Path, stem: str, engine: str, runs: int, budget_s: float) -> dict:
    """In this (fresh) process: load the .pte, one warm-up, then time up to ``runs`` calls."""
    import torch

    from arm_tosa_core.example_models import get_example

    name, size = _case(stem)
    model, (x,) = get_example(name).build(input_size=size)
    with torch.no_grad():
        ref = model(x)
    row: dict = {}
    if engine == "vkdg":
        from vulkan_delegate.runtime import device_name, load_runtime

        load_runtime()
        row["device"] = device_name()
    from executorch.runtime import Runtime

    t0 = time.perf_counter()
    method = Runtime.get().load_program(pte).load_method("forward")
    row["load_s"] = time.perf_counter() - t0
    y = method.execute([x])[0]
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < runs and (len(times) < 3 or time.perf_counter() - start < budget_s):
        t = time.perf_counter()
        y = method.execute([x])[0]
        times.append((time.perf_counter() - t) * 1000)
    err = float((y - ref).abs().max() / ref.abs().max())
    return {**row, "runs": len(times), "median_ms": statistics.median(times), "min_ms": min(times),
            "max_rel_err": err}


def _ncnn_rows(stems: list[str], runs: int, work: Path) -> dict[str, dict]:
    """ncnn-Vulkan fp32 on this host's Vulkan device, one JSON row per model (or an error row)."""
    try:
        env = ncnn_peer.tools_env()
        if not (work / "ncnn" / "models.json").exists():
            subprocess.run([sys.executable, str(HERE / "ncnn_peer.py"), "export", str(work / "ncnn")], env=env,
                           check=True, capture_output=True, text=True)
        done = subprocess.run([sys.executable, str(HERE / "ncnn_peer.py"), "time", str(work / "ncnn"),
                               "--precision", "fp32", "--runs", str(runs), "--warmup", "1", "--models", *stems],
                              env=env, check=True, capture_output=True, text=True)
    except (subprocess.CalledProcessError, OSError) as e:
        tail = getattr(e, "stderr", None) or str(e)
        return {s: {"error": f"ncnn not measured: {tail.strip().splitlines()[-1][:200]}"} for s in stems}
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {r["model"].removesuffix("_fp32"): r for r in rows}


def _fmt(v: float | None, spec: str = "9.2f") -> str:
    return format(v, spec) if isinstance(v, float) else format("-", ">" + spec.split(".")[0])


def gpu_summary(path: Path) -> dict[tuple[str, str], dict]:
    """(model with precision, engine) -> median over rounds of the per-round medians, and the last error."""
    per: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for line in path.read_text().splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            per[(r["model"], r["engine"])].append(r)
    return {k: {"median_ms": statistics.median(r["median_ms"] for r in rs), "rounds": len(rs),
                "max_rel_err": rs[-1].get("max_rel_err")} for k, rs in per.items()}


def print_gpu_table(folder: Path = GPU) -> dict | None:
    """Print the newest recorded GPU run; returns its summary (None when nothing is recorded)."""
    # speed runs: print_speed_table; zoo runs: print_zoo_table; decode runs: print_decode_table
    files = [f for f in sorted(folder.glob("*.jsonl")) if not any(k in f.name for k in ("_speed_", "_zoo_", "_decode_"))]
    if not files:
        print(f"\nno recorded GPU run in {folder}")
        return None
    summary = gpu_summary(files[-1])
    print(f"\nRecorded on the lent GPU ({files[-1].name}; see {(folder / 'README.md').relative_to(HERE.parent)}): ms per call, "
          "median of rounds, upload + readback included")
    engines = [("vkdg", "ours"), ("ncnn-vulkan", "ncnn-Vk"), ("eager-cuda", "eager"), ("cuda-graph", "CUDAgraph")]
    engines = [(e, lbl) for e, lbl in engines if any(k[1] == e for k in summary)]
    print(f"{'model':22} {'prec':>4} " + " ".join(f"{lbl:>9}" for _, lbl in engines) + f" {'eager/ours':>10}")
    for stem in STEMS:
        for prec in ("fp32", "fp16"):
            cells = [summary.get((f"{stem}_{prec}", e), {}).get("median_ms") for e, _ in engines]
            ours, eager = (summary.get((f"{stem}_{prec}", e), {}).get("median_ms") for e in ("vkdg", "eager-cuda"))
            print(f"{stem:22} {prec:>4} " + " ".join(_fmt(c, "9.3f") for c in cells)
                  + f" {_fmt(eager / ours if ours and eager else None, '10.1f')}")
    return {f"{m}|{e}": v for (m, e), v in summary.items()}


# the last: fp16 cases rerun with VKDG_COOPMAT=0 (generic tiles, no tensor cores), for the A/B
SPEED_ENGINES = [("vkdg", "ours"), ("eager-cuda", "eager"), ("cuda-graph", "CUDAgraph"),
                 ("vkdg VKDG_COOPMAT=0", "no coop")]


def print_speed_table(folder: Path = GPU) -> dict | None:
    """Print the newest kernel-speed run (issue 19: *_speed_*.jsonl of bench/vulkan_gpu/run_speed.sh)."""
    files = sorted(folder.glob("*_speed_*.jsonl"))
    if not files:
        print(f"\nno recorded kernel-speed run in {folder}")
        return None
    rows = [json.loads(line) for line in files[-1].read_text().splitlines() if line.startswith("{")]
    by = {(r["model"], r["engine"]): r for r in rows}
    models = list(dict.fromkeys(r["model"] for r in rows))
    print(f"\nKernel-speed run on the lent GPU ({files[-1].name}; see {(folder / 'README.md').relative_to(HERE.parent)}): "
          "ms per call, upload + readback included; GEMM also kernel-only TFLOP/s")
    print(f"{'case':22} " + " ".join(f"{lbl:>9}" for _, lbl in SPEED_ENGINES)
          + f" {'ours/graph':>10} {'rel err':>8} {'changed':>7}")
    for m in models:
        cells = [by.get((m, e), {}).get("median_ms") for e, _ in SPEED_ENGINES]
        ours = by.get((m, "vkdg"), {})
        ratio = cells[0] / cells[2] if cells[0] and cells[2] else None
        print(f"{m:22} " + " ".join(_fmt(c, "9.3f") for c in cells) + f" {_fmt(ratio, '10.2f')} "
              f"{_fmt(ours.get('max_rel_err'), '8.1e')} {str(ours.get('changed_input_changes_output', '-')):>7}")
        if (m, "vkdg kernel") in by or (m, "torch.matmul kernel") in by:
            ours_t, torch_t = (by.get((m, e), {}).get("tflops") for e in ("vkdg kernel", "torch.matmul kernel"))
            print(f"{'':22} kernel TFLOP/s: ours {_fmt(ours_t, '6.1f')}, torch.matmul {_fmt(torch_t, '6.1f')}")
    return {f"{m}|{e}": r for (m, e), r in by.items()}


ZOO_ENGINES = [("vkdg", "ours"), ("etvk", "ET-VK"), ("eager-cuda", "eager"), ("cuda-graph", "CUDAgraph"),
               ("torch-compile", "compiled")]


def print_zoo_table(folder: Path = GPU) -> dict | None:
    """Print the newest zoo run (*_zoo_*.jsonl of bench/vulkan_gpu/run_zoo.sh, with its _cases.json)."""
    # newest by the run's date (the GPU prefix differs: h100_zoo_... sorts before an older h200_zoo_...)
    files = sorted(folder.glob("*_zoo_*.jsonl"), key=lambda f: f.name.split("_zoo_", 1)[1])
    if not files:
        print(f"\nno recorded zoo run in {folder}")
        return None
    rows = [json.loads(line) for line in files[-1].read_text().splitlines() if line.startswith("{")]
    by = {(r["model"], r["engine"]): r for r in rows}
    cases_file = files[-1].with_name(files[-1].stem + "_cases.json")
    cases = {c["stem"]: c for c in json.loads(cases_file.read_text())} if cases_file.exists() else {}
    print(f"\nZoo on the lent GPU ({files[-1].name}; see {(folder / 'README.md').relative_to(HERE.parent)}): ms per "
          "call, batch 1 unless the name says, upload + readback included; err = max rel err vs eager CPU fp32; parts = delegates + CPU ops")
    print(f"{'model':30} " + " ".join(f"{lbl:>9}" for _, lbl in ZOO_ENGINES)
          + f" {'ours/graph':>10} {'ours/ETVK':>9} {'ours err':>8} {'ETVK err':>8} {'parts ours|ETVK':>15}")
    notes = []
    for m in dict.fromkeys([*cases, *(r["model"] for r in rows)]):
        cells = [by.get((m, e), {}).get("median_ms") for e, _ in ZOO_ENGINES]
        for e, _ in ZOO_ENGINES:
            r = by.get((m, e), {})
            err = r.get("error") or (None if r.get("changed_input_changes_output", True) else "output ignored the input")
            err = err or next((f"lowering: {c[e]['error']}" for c in [cases.get(m, {})] if "error" in c.get(e, {})), None)
            if err:
                notes.append(f"  {m} / {e}: {err[:220]}")
        parts = "|".join("fail" if "error" in c else f"{c['delegates']}+{len(c['cpu_nodes'])}" if c else "-"
                         for c in (cases.get(m, {}).get(side, {}) for side in ("vkdg", "etvk")))
        print(f"{m:30} " + " ".join(_fmt(c, "9.3f") for c in cells)
              + f" {_fmt(cells[0] / cells[3] if cells[0] and cells[3] else None, '10.2f')}"
              f" {_fmt(cells[0] / cells[1] if cells[0] and cells[1] else None, '9.2f')}"
              f" {_fmt(by.get((m, 'vkdg'), {}).get('max_rel_err'), '8.1e')}"
              f" {_fmt(by.get((m, 'etvk'), {}).get('max_rel_err'), '8.1e')} {parts:>15}")
    for m, c in cases.items():  # throughput rows (batch > 1) also as images/s
        if c.get("batch", 1) > 1:
            ips = [by.get((m, e), {}).get("median_ms") for e, _ in ZOO_ENGINES]
            print(f"{m} images/s: " + ", ".join(f"{lbl} {_fmt(c['batch'] * 1000 / t if t else None, '.0f')}"
                                                 for (_, lbl), t in zip(ZOO_ENGINES, ips, strict=True)))
    print("\n".join(notes))
    return {f"{m}|{e}": r for (m, e), r in by.items()}


def print_decode_table(folder: Path = GPU) -> dict | None:
    """Print the newest decode run (*_decode_*.jsonl of bench/vulkan_gpu/run_decode.sh): the 4-bit KV-cache
    decoder's ms per token, tokens/s and the memory bandwidth its weight bytes per token imply."""
    files = sorted(folder.glob("*_decode_*.jsonl"))
    if not files:
        print(f"\nno recorded decode run in {folder}")
        return None
    rows = [json.loads(line) for line in files[-1].read_text().splitlines() if line.startswith("{")]
    print(f"\nDecode on the lent GPU ({files[-1].name}; see {(folder / 'README.md').relative_to(HERE.parent)}): "
          "one token per call, logits read back, median over every decode step")
    configs = sorted(folder.glob(files[-1].stem + "_config.json"))
    for name, meta in (json.loads(configs[0].read_text()).items() if configs else ()):
        print(f"config {name}: {meta['config']}, 4-bit groups of {meta['group']}, "
              f"{meta['weight_bytes_per_token'] / 1e6:.1f} MB of weights per token")
    print(f"{'config':8} {'engine':20} {'weights':>8} {'ms/token':>9} {'tokens/s':>9} {'MB/token':>9} {'GB/s':>7} {'of peak':>7} "
          f"{'prefill err':>11} {'tokens=eager':>12} {'changed':>7}")
    for r in rows:
        if "median_ms_per_token" not in r:
            continue
        fp16 = "fp16" in r.get("weights", "")
        match = f"{r['tokens_matching_eager']}/{r['tokens_compared']}" if "tokens_compared" in r else "-"
        print(f"{r.get('config', '-'):8} {r['engine']:20} {'fp16' if fp16 else '4-bit':>8} {_fmt(r['median_ms_per_token'], '9.3f')} "
              f"{_fmt(r['tokens_per_s'], '9.1f')} {_fmt(r['weight_bytes_per_token'] / 1e6, '9.1f')} "
              f"{_fmt(r['weight_gbps'], '7.0f')} {_fmt(r['bandwidth_fraction'] * 100, '6.1f')}% "
              f"{_fmt(r.get('prefill_max_rel_err'), '11.1e')} {match:>12} {str(r.get('changed_token_changes_logits', '-')):>7}")
    return {f"{r.get('config', '')} {r['engine']}".strip(): r for r in rows}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=STEMS, choices=STEMS)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--budget-s", type=float, default=30.0, help="time cap per (model, engine) after warm-up")
    p.add_argument("--no-ncnn", action="store_true")
    p.add_argument("--gpu-only", action="store_true", help="only print the recorded GPU table")
    p.add_argument("--measure", nargs=5, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.measure:
        pte, stem, engine, runs, budget = args.measure
        print(json.dumps(_measure(Path(pte), stem, engine, int(runs), float(budget))))
        return 0
    if args.gpu_only:
        tables = (print_gpu_table(), print_speed_table(), print_zoo_table(), print_decode_table())
        return 0 if any(t is not None for t in tables) else 1
    work = OUT / "vulkan_bench"
    work.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    rows: dict[str, dict] = {}
    for stem in args.models:
        for engine in ("vkdg", "xnnpack"):
            pte = work / f"{stem}_{engine}.pte"
            try:
                _lower(stem, engine, pte)
                done = subprocess.run([sys.executable, __file__, "--measure", str(pte), stem, engine,
                                       str(args.runs), str(args.budget_s)], capture_output=True, text=True,
                                      check=True)
                rows[f"{stem}|{engine}"] = json.loads(done.stdout.strip().splitlines()[-1])
            except (subprocess.CalledProcessError, RuntimeError, ValueError) as e:
                tail = (getattr(e, "stderr", None) or str(e)).strip().splitlines()[-1][:300]
                if engine == "vkdg" and "Failed to load method" in tail:
                    tail += (" (a runtime library older than the payload format? `uv sync` rebuilds runtime-cpp;"
                             " VULKAN_DELEGATE_LIB names another build)")
                rows[f"{stem}|{engine}"] = {"error": tail}
    if not args.no_ncnn:
        for stem, r in _ncnn_rows(args.models, args.runs, work).items():
            rows[f"{stem}|ncnn-vulkan"] = r
    device = next((r["device"] for k, r in rows.items() if "device" in r), "?")
    print(f"FP32 on this host: our Vulkan delegate ({device}) vs XNNPACK (pip runtime) vs ncnn-Vulkan (same "
          f"device); ms per call, median; load average at start {load:.1f} on {os.cpu_count()} cores")
    print(f"{'model':22} {'ours':>9} {'XNNPACK':>9} {'ncnn-Vk':>9} {'ours/XNN':>9} {'ours/ncnn':>9} {'ours err':>9}")
    for stem in args.models:
        ours, xnn, ncnn = (rows.get(f"{stem}|{e}", {}) for e in ("vkdg", "xnnpack", "ncnn-vulkan"))
        o, x, n = (r.get("median_ms") for r in (ours, xnn, ncnn))
        print(f"{stem:22} {_fmt(o)} {_fmt(x)} {_fmt(n)} {_fmt(o / x if o and x else None)} "
              f"{_fmt(o / n if o and n else None)} {_fmt(ours.get('max_rel_err'), '9.1e')}")
    for key, r in rows.items():
        if "error" in r:
            print(f"  {key}: {r['error']}")
    gpu = print_gpu_table()
    speed = print_speed_table()
    zoo = print_zoo_table()
    decode = print_decode_table()
    (OUT / "vulkan_bench.json").write_text(json.dumps({"host": rows, "loadavg_1m_at_start": load, "gpu_recorded": gpu,
                                                       "gpu_speed_recorded": speed, "gpu_zoo_recorded": zoo,
                                                       "gpu_decode_recorded": decode}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
