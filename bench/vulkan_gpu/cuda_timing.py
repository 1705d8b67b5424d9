"""How the CUDA baselines are called and timed on the device machine (speed_cuda.py, zoo_cuda.py,
eager_cuda.py): eager (`model(x.cuda())`, fp16 input for fp16 models, output read back as fp32), CUDA
graph replay of the same, the median of per-call wall times, the error against a staged reference."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch


def eager_call(model, x: torch.Tensor, half: bool):
    """A callable: upload, eager model, readback."""
    return lambda xc: model(xc.cuda().half() if half else xc.cuda()).float().cpu()


def graph_call(model, x: torch.Tensor, half: bool):
    """A callable that copies x into a captured CUDA graph's input, replays it and reads the output back."""
    static_in = x.cuda().half() if half else x.cuda()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):  # warm-up on a side stream before capture, as torch.cuda.graphs asks
            model(static_in)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = model(static_in)

    def call(xc: torch.Tensor) -> torch.Tensor:
        static_in.copy_(xc, non_blocking=True)
        graph.replay()
        return static_out.float().cpu()

    return call


def median_ms(call, x, runs: int = 200, warmup: int = 20):
    """(median ms of `runs` calls after `warmup`, the last output)."""
    for _ in range(warmup):
        y = call(x)
    stamps = [time.perf_counter()]
    for _ in range(runs):
        y = call(x)
        stamps.append(time.perf_counter())
    return statistics.median(1000 * (b - a) for a, b in zip(stamps, stamps[1:], strict=False)), y


def rel_err_to_file(y: torch.Tensor, ref_file: Path) -> float:
    """max|y - ref| / max|ref| against raw float32 `ref_file`."""
    ref = torch.from_file(str(ref_file), size=y.numel(), dtype=torch.float32)
    return float((y.reshape(-1) - ref).abs().max() / ref.abs().max())
