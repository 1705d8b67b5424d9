"""Eager PyTorch CUDA baseline on the device machine (its own torch): median ms per call over 200 runs,
input upload and output readback included, same seeded models as the .pte files. Also CUDA-graph replay
of the same model ("cuda-graph": input copied into the captured buffer, replay, readback), the
launch-free floor the issue compares against.

    python3 eager_cuda.py [IO_DIR]   # IO_DIR: ncnn_peer.py's export folder; adds max_rel_err vs <stem>.ref.f32
"""

import json
import statistics
import sys
import time
from pathlib import Path

import example_models
import torch
from cuda_timing import eager_call, graph_call


def bench(name: str, size: int, half: bool, io: Path | None, graph: bool = False, runs: int = 200,
          warmup: int = 20) -> dict:
    model, (x,) = example_models.get_example(name).build(input_size=size)
    model = model.cuda()
    if half:
        model = model.half()
    times = []
    with torch.no_grad():
        call = (graph_call if graph else eager_call)(model, x, half)
        for i in range(warmup + runs):
            t0 = time.perf_counter()
            y = call(x)
            t1 = time.perf_counter()
            if i >= warmup:
                times.append((t1 - t0) * 1000)
    row = {"engine": "cuda-graph" if graph else "eager-cuda", "model": f"{name}_{size}_{'fp16' if half else 'fp32'}",
           "runs": runs, "median_ms": statistics.median(times), "min_ms": min(times), "checksum": float(y.sum())}
    ref_file = io / f"{name}_{size}.ref.f32" if io else None
    if ref_file and ref_file.exists():
        ref = torch.from_file(str(ref_file), size=y.numel(), dtype=torch.float32)
        row["max_rel_err"] = float((y.reshape(-1) - ref).abs().max() / ref.abs().max())
    return row


if __name__ == "__main__":
    io = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    print(torch.__version__, torch.cuda.get_device_name(0), file=sys.stderr)
    for graph in (False, True):
        for name, size in (("mobilenet_v2", 224), ("llama_block", 8), ("llama_block", 128)):
            for half in (False, True):
                try:
                    row = bench(name, size, half, io, graph)
                except RuntimeError as e:  # a capture failure is a result too, not the end of the run
                    row = {"engine": "cuda-graph" if graph else "eager-cuda",
                           "model": f"{name}_{size}_{'fp16' if half else 'fp32'}", "error": str(e)[:300]}
                print(json.dumps(row), flush=True)
