"""CUDA baselines of the kernel-speed run, on the device machine's own torch (speed_models.CASES).

    python3 speed_cuda.py gemm-ref DIR     # writes DIR/<stem>.ref.f32 of the GEMM and CHECKS cases (fp64 on the GPU)
    python3 speed_cuda.py time DIR         # JSON lines: eager CUDA and CUDA graph per case, GEMM TFLOP/s
    python3 speed_cuda.py compiled DIR STEM  # one JSON line: torch.compile(mode="max-autotune") of one case

Per model case: median ms per call over 200 runs (20 warm-ups) with upload and readback, eager
(`model(x.cuda())`) and CUDA graph (cuda_timing.graph_call), max_rel_err against the staged eager CPU
fp32 reference. The compiled-CUDA reference (issue 19 item 5) is `torch.compile(mode="max-autotune")`, one
case per process so run_speed.sh can cap its compile time with `timeout` (COMPILE_CAP_S there). Per GEMM case also the kernel alone: torch.matmul on resident tensors timed with CUDA
events (TF32 off for fp32), in TFLOP/s.
"""

import json
import sys
from pathlib import Path

import speed_models
import torch
from cuda_timing import eager_call, graph_call, median_ms, rel_err_to_file


def _gemm_kernel_tflops(n: int, half: bool, runs: int = 50) -> float:
    torch.backends.cuda.matmul.allow_tf32 = False
    a = speed_models.gemm_input(n).cuda()
    a = a.half() if half else a
    for _ in range(5):
        torch.matmul(a, a)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(runs):
        torch.matmul(a, a)
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / runs
    return 2 * n**3 / (ms * 1e-3) / 1e12


def _staged(folder: Path) -> set[str]:
    """The stems prepare_speed.py staged (all, or those it was given)."""
    return {c["stem"] for c in json.loads((folder / "cases.json").read_text())}


def time_all(folder: Path) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    staged = _staged(folder)
    for stem, name, batch, half in speed_models.CASES:
        if stem not in staged or stem in speed_models.LOWERING_ENV:  # (an A/B row: its model is timed once)
            continue
        model, x = speed_models.build(name, batch)
        ref_file = folder / f"{stem}.ref.f32"
        model = model.cuda()
        model = model.half() if half else model
        with torch.no_grad():
            for engine in ("eager-cuda", "cuda-graph"):
                row = {"engine": engine, "model": stem}
                try:
                    call = (graph_call if engine == "cuda-graph" else eager_call)(model, x, half)
                    row["median_ms"], y = median_ms(call, x, runs=50 if name == "gemm" else 200)
                    if ref_file.exists():
                        row["max_rel_err"] = rel_err_to_file(y, ref_file)
                except RuntimeError as e:
                    row["error"] = str(e)[:300]
                print(json.dumps(row), flush=True)
        if name == "gemm":
            print(json.dumps({"engine": "torch.matmul kernel", "model": stem,
                              "tflops": _gemm_kernel_tflops(batch, half)}), flush=True)
        del model
        torch.cuda.empty_cache()


def time_compiled(folder: Path, stem: str) -> None:
    """torch.compile(mode="max-autotune") of one case: compile_s (the first call: tracing, autotuning, CUDA
    graph capture), then the median ms per call with upload and readback, as eager's."""
    import time

    torch.backends.cuda.matmul.allow_tf32 = False
    _, name, batch, half = next(c for c in speed_models.CASES if c[0] == stem)
    model, x = speed_models.build(name, batch)
    model = model.cuda()
    model = model.half() if half else model
    compiled = torch.compile(model, mode="max-autotune")
    row = {"engine": "torch.compile max-autotune", "model": stem}
    with torch.no_grad():
        call = eager_call(compiled, x, half)
        start = time.perf_counter()
        call(x)
        row["compile_s"] = round(time.perf_counter() - start, 1)
        row["median_ms"], y = median_ms(call, x)
    ref_file = folder / f"{stem}.ref.f32"
    if ref_file.exists():
        row["max_rel_err"] = rel_err_to_file(y, ref_file)
    print(json.dumps(row), flush=True)


def gemm_refs(folder: Path) -> None:
    staged = _staged(folder)
    for stem, name, batch, _ in speed_models.CASES:
        if name == "gemm" and stem in staged:
            a = speed_models.gemm_input(batch).cuda().double()
            (a @ a).float().cpu().numpy().tofile(folder / f"{stem}.ref.f32")
    for stem, kind, m, k, n, _ in speed_models.CHECKS:  # the kernel checks: the model itself in fp64
        if stem not in staged:
            continue
        model, x = speed_models.build_check(kind, m, k, n)
        with torch.no_grad():
            model.cuda().double()(x.cuda().double()).float().cpu().numpy().tofile(folder / f"{stem}.ref.f32")


if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name(0), file=sys.stderr)
    {"gemm-ref": gemm_refs, "time": time_all, "compiled": time_compiled}[sys.argv[1]](Path(sys.argv[2]), *sys.argv[3:])
