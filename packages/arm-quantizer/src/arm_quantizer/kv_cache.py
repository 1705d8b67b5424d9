"""PT2E quantization of a decoder exported as several methods that share a KV cache (`prefill`, `decode`).

Each method's graph is prepared with its own quantizer, but the prepared (and converted) modules are
given the *same* cache buffers, so calibration runs the real sequence (prefill, then decode steps that
read what prefill wrote) and the converted modules form the fake-quant reference a lowered program is
compared with."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.fx import GraphModule
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e


def share_buffers(modules: dict[str, GraphModule], suffix: str = "_cache") -> None:
    """Make every module use the first module's buffers whose names end with `suffix`."""
    first, *rest = modules.values()
    for name, buf in first.named_buffers():
        if not name.endswith(suffix):
            continue
        *path, leaf = name.split(".")
        for module in rest:
            owner = module
            for part in path:
                owner = getattr(owner, part)
            setattr(owner, leaf, buf)


def reset_buffers(modules: dict[str, GraphModule], suffix: str = "_cache") -> None:
    for module in modules.values():
        for name, buf in module.named_buffers():
            if name.endswith(suffix):
                buf.zero_()


def quantize_methods(programs: dict[str, torch.export.ExportedProgram], make_quantizer: Callable,
                     calibrate: Callable[[Callable[[str, tuple], torch.Tensor]], object]
                     ) -> dict[str, GraphModule]:
    """prepare every method, share their caches, `calibrate(run)` (run(method, inputs) on the prepared
    modules), convert, share again and zero the caches. Returns the converted modules by method."""
    prepared = {name: prepare_pt2e(ep.module(), make_quantizer()) for name, ep in programs.items()}
    share_buffers(prepared)
    reset_buffers(prepared)
    calibrate(module_runner(prepared))
    converted = {name: convert_pt2e(module) for name, module in prepared.items()}
    share_buffers(converted)
    reset_buffers(converted)
    return converted


def module_runner(modules: dict[str, GraphModule]) -> Callable[[str, tuple], torch.Tensor]:
    """`run(method, inputs)` over modules sharing a cache (for `greedy_decode`)."""

    def run(method: str, inputs: tuple) -> torch.Tensor:
        with torch.no_grad():
            return modules[method](*inputs)

    return run
