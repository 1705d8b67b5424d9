"""Stage the zoo GPU run (issue 23's benchmark, issue 19 item 5) for the lent device machine.

    uv run python bench/vulkan_gpu/prepare_zoo.py [OUT] [--models a,b] [--no-etvk]   # OUT: out/vulkan-zoo

For every zoo_models.ZOO model at batch 1 (and zoo_models.THROUGHPUT) it writes:
  <stem>.vkdg.pte   lowered by our VulkanPartitioner (force_fp16 for fp16 rows),
  <stem>.etvk.pte   lowered by ExecuTorch's own VulkanPartitioner (ET-VK, the competitor; bench only),
  <stem>.ref.f32    eager CPU fp32 output on vkdg_runner's pattern input,
and cases.json with, per model, the input shape, each side's partition count / CPU nodes, or the exception
that stopped its lowering. Each side lowers in its own process (both toolkits' lowerings stay apart; a
crash of one costs only that side's row). All of it is kept in OUT-stage/, where a later staging reuses
the cases already lowered (delete a case's <stem>.<side>.json to lower it again). OUT then gets run_zoo.sh and bundle.tar.gz with the .pte files,
vkdg_runner, libexecutorch.so + the wheel's CPU kernel libraries, our runtime library, libetvk.so
(bench/vulkan_gpu/build_etvk.sh; ETVK_SO names it, default /work/etvk-build/libetvk.so), zoo_models.py +
zoo_cuda.py + cuda_timing.py for the CUDA rows, and the Debian Vulkan loader.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import zoo_models  # noqa: E402
from staging import stage_runtime  # noqa: E402


def cases(models: list[str] | None) -> list[tuple[str, str, int, bool]]:
    """(stem, zoo name, batch, fp16) of the run."""
    rows = [(name, name, 1, False) for name in zoo_models.ZOO]
    rows += zoo_models.THROUGHPUT
    rows += [(name, name, 1, False) for name in zoo_models.KERNELS]
    return [r for r in rows if models is None or r[0] in models or r[1] in models]


def _partitioner(side: str, fp16: bool):
    if side == "vkdg":
        from vulkan_delegate import VulkanPartitioner
        return VulkanPartitioner({"force_fp16": fp16})
    from executorch.backends.vulkan.partitioner.vulkan_partitioner import (
        VulkanPartitioner as EtvkPartitioner,
    )
    return EtvkPartitioner({"force_fp16": fp16} if fp16 else {})


def exported(work: Path, stem: str, name: str, batch: int):
    """torch.export of a case, shared by both sides through <stem>.pt2 (export is ~20 % of a side's
    staging; building the model another 5 %): whichever side comes first saves it."""
    import torch

    path = work / f"{stem}.pt2"
    if path.exists():
        try:
            return torch.export.load(path)
        except Exception:  # noqa: BLE001 - half written by the other side: export it here
            pass
    model, x = zoo_models.build(name, batch)
    ep = torch.export.export(model, (x,))
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    torch.export.save(ep, tmp)
    tmp.replace(path)
    return ep


def lower_side(side: str, work: Path, models: list[str] | None) -> None:
    """Child process: lower every case with one side's partitioner; one JSON line per case on stdout."""
    from executorch.exir import to_edge_transform_and_lower

    for stem, name, batch, fp16 in cases(models):
        done = work / f"{stem}.{side}.json"
        if done.exists():  # lowered by an earlier staging into the same folder
            print(done.read_text(), flush=True)
            continue
        row = {"stem": stem, "side": side}
        t0 = time.time()
        if side == "etvk" and name in zoo_models.KERNELS:  # our quantizer's custom op: nothing ET-VK takes
            print(json.dumps(dict(row, error="ours only (vulkan_delegate's quantized linear op)")), flush=True)
            continue
        try:
            ep = exported(work, stem, name, batch)
            edge = to_edge_transform_and_lower(ep, partitioner=[_partitioner(side, fp16)])
            graph = edge.exported_program().graph_module.graph
            calls = [n for n in graph.nodes if n.op == "call_function"]
            row["delegates"] = sum("executorch_call_delegate" in str(n.target) for n in calls)
            row["cpu_nodes"] = sorted({str(n.target) for n in calls if "executorch_call_delegate" not in str(n.target)
                                       and "getitem" not in str(n.target)})
            (work / f"{stem}.{side}.pte").write_bytes(edge.to_executorch().buffer)
        except Exception as e:  # noqa: BLE001 - the row records why this side could not lower the model
            row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
            traceback.print_exc(file=sys.stderr)
        row["lower_s"] = round(time.time() - t0, 1)
        done.write_text(json.dumps(row))
        print(json.dumps(row), flush=True)


def references(work: Path, models: list[str] | None) -> dict[str, list[int]]:
    import torch

    shapes = {}
    for stem, name, batch, _ in cases(models):
        if (work / f"{stem}.ref.f32").exists() and (work / f"{stem}.shape.json").exists():
            shapes[stem] = json.loads((work / f"{stem}.shape.json").read_text())
            continue
        model, x = zoo_models.build(name, batch)
        shapes[stem] = list(x.shape)
        (work / f"{stem}.shape.json").write_text(json.dumps(shapes[stem]))
        with torch.no_grad():
            model(x).contiguous().numpy().tofile(work / f"{stem}.ref.f32")
        print("ref", stem, flush=True)
    return shapes


def stage(work: Path, models: list[str] | None, etvk: bool) -> None:
    sides = ["vkdg", *(["etvk"] if etvk else [])]
    procs = {side: subprocess.Popen([sys.executable, __file__, "--lower", side, str(work),
                                     *(["--models", ",".join(models)] if models else [])],
                                    stdout=subprocess.PIPE, text=True) for side in sides}
    shapes = references(work, models)
    lowered = {side: [json.loads(line) for line in p.communicate()[0].splitlines() if line.startswith("{")]
               for side, p in procs.items()}
    meta = []
    for stem, name, batch, fp16 in cases(models):
        entry = {"stem": stem, "model": name, "batch": batch, "fp16": fp16, "shape": shapes[stem]}
        for side in sides:
            entry[side] = next((r for r in lowered[side] if r["stem"] == stem), {"error": "no result (crashed)"})
        meta.append(entry)
    (work / "cases.json").write_text(json.dumps(meta, indent=1))

    stage_runtime(work)
    etvk_so = Path(os.environ.get("ETVK_SO", "/work/etvk-build/libetvk.so"))
    if etvk and etvk_so.exists():
        shutil.copy(etvk_so, work / "libetvk.so")
    elif etvk:
        (work / "libetvk.missing").write_text(f"{etvk_so} not built (bench/vulkan_gpu/build_etvk.sh)\n")
    for f in ("zoo_models.py", "zoo_cuda.py", "cuda_timing.py"):
        shutil.copy(HERE / f, work)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", default="out/vulkan-zoo")
    ap.add_argument("--models", help="comma-separated stems or zoo names (default: all)")
    ap.add_argument("--no-etvk", action="store_true", help="our delegate only")
    ap.add_argument("--lower", help=argparse.SUPPRESS)  # child process: --lower SIDE WORKDIR
    args = ap.parse_args()
    models = args.models.split(",") if args.models else None
    if args.lower:
        lower_side(args.lower, Path(args.out), models)
        return
    out = Path(args.out).resolve()
    work = out.parent / f"{out.name}-stage"  # kept: a later staging reuses its lowered cases
    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    for f in ("run_zoo.sh", "device_env.sh"):
        shutil.copy(HERE / f, out)
    bundle = out / "bundle.tar.gz"
    stage(work, models, not args.no_etvk)
    keep = {f"{c[0]}.{ext}" for c in cases(models) for ext in ("vkdg.pte", "etvk.pte", "ref.f32")}
    with tarfile.open(bundle, "w:gz", compresslevel=6) as tar:
        for f in sorted(work.iterdir()):
            if f.suffix not in (".pte", ".f32", ".json", ".pt2", ".tmp") or f.name in keep or f.name == "cases.json":
                tar.add(f, arcname=f.name)
    print(bundle, bundle.stat().st_size)


if __name__ == "__main__":
    main()
