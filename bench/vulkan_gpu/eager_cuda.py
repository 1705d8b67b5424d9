"""Eager PyTorch CUDA baseline on the device machine (its own torch): median ms per call over 200 runs,
input upload and output readback included, same seeded models as the .pte files."""

import json
import statistics
import sys
import time

import example_models
import torch


def bench(name: str, size: int, half: bool, runs: int = 200, warmup: int = 20) -> dict:
    model, (x,) = example_models.get_example(name).build(input_size=size)
    model = model.cuda()
    if half:
        model = model.half()
    times = []
    with torch.no_grad():
        for i in range(warmup + runs):
            t0 = time.perf_counter()
            xi = x.cuda()
            y = model(xi.half() if half else xi).float().cpu()
            t1 = time.perf_counter()
            if i >= warmup:
                times.append((t1 - t0) * 1000)
    return {"model": f"{name}_{size}_{'fp16' if half else 'fp32'}", "eager_cuda_median_ms": statistics.median(times),
            "eager_cuda_min_ms": min(times), "checksum": float(y.sum())}


if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name(0), file=sys.stderr)
    for name, size in (("mobilenet_v2", 224), ("llama_block", 8), ("llama_block", 128)):
        for half in (False, True):
            print(json.dumps(bench(name, size, half)), flush=True)
