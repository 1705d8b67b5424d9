"""CUDA rows of the zoo GPU run, on the device machine's own torch (cases.json of prepare_zoo.py).

    python3 zoo_cuda.py DIR [eager|compile]

eager (default): per case, eager CUDA (`model(x.cuda()).float().cpu()`) and CUDA graph
(cuda_timing.graph_call: input copied into the captured buffer, replay, readback); compile:
torch.compile(mode="max-autotune") (its own CUDA graphs included), called the same way, with its compile
time; cases after COMPILE_BUDGET_S seconds of compiling (default 240) are written as skipped, and with
COMPILE_MODELS (comma-separated stems) only those are compiled. Median ms per
call over 200 runs after 20 warm-ups, upload and readback included, PyTorch defaults (cuDNN may use TF32);
max_rel_err against the staged eager CPU fp32 reference; one JSON line per row.
"""

import json
import os
import sys
import time
from pathlib import Path

import torch
import zoo_models
from cuda_timing import eager_call, graph_call, median_ms, rel_err_to_file


def _row(engine: str, case: dict, folder: Path, make_call) -> dict:
    row = {"engine": engine, "model": case["stem"]}
    try:
        t0 = time.perf_counter()
        model, x = zoo_models.build(case["model"], case["batch"])
        model = model.cuda()
        model = model.half() if case["fp16"] else model
        with torch.no_grad():
            call = make_call(model, x, case["fp16"])
            if engine == "torch-compile":
                call(x)  # compiles (max-autotune benchmarks its candidate kernels here)
                row["compile_s"] = round(time.perf_counter() - t0, 1)
            row["median_ms"], y = median_ms(call, x)
        row["max_rel_err"] = rel_err_to_file(y, folder / f"{case['stem']}.ref.f32")
    except Exception as e:  # noqa: BLE001 - a failure is a result of the row, not the end of the run
        row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    torch.cuda.empty_cache()
    return row


def _compiled(model, x, half):
    compiled = torch.compile(model, mode="max-autotune")
    return lambda xc: compiled(xc.cuda().half() if half else xc.cuda()).float().cpu()


def main(folder: Path, what: str) -> None:
    print(torch.__version__, torch.cuda.get_device_name(0), file=sys.stderr)
    # our quantized-linear kernel cases need vulkan_delegate, which the device machine lacks
    cases = [c for c in json.loads((folder / "cases.json").read_text()) if c["model"] not in zoo_models.KERNELS]
    if what == "eager":
        for case in cases:
            print(json.dumps(_row("eager-cuda", case, folder, eager_call)), flush=True)
            print(json.dumps(_row("cuda-graph", case, folder, graph_call)), flush=True)
        return
    budget, spent = float(os.environ.get("COMPILE_BUDGET_S", 240)), 0.0
    only = os.environ.get("COMPILE_MODELS")  # comma-separated stems: compile only these (minutes each)
    for case in cases:
        if only and case["stem"] not in only.split(","):
            continue
        if spent > budget:
            row = {"engine": "torch-compile", "model": case["stem"], "error": f"skipped: compile budget {budget:.0f} s"}
        else:
            t0 = time.perf_counter()
            row = _row("torch-compile", case, folder, _compiled)
            spent += time.perf_counter() - t0
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "eager")
