"""Shared pieces of the arm-vgf flow tests: module wrappers, lowering and error measures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from arm_tosa_core import TosaCompileSpec, TOSAPartitioner
from arm_tosa_core.testing import lower, max_relative_error
from arm_vgf import VgfCompileSpec, VgfPartitioner


def randomized(module: nn.Module, seed: int = 0) -> nn.Module:
    """Non-trivial affine parameters (norm layers start at ones/zeros)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5 + 1.0)
    return module.eval()


def lower_vgf(module: nn.Module, inputs: Sequence[torch.Tensor], spec: VgfCompileSpec | None = None,
              partitioner: VgfPartitioner | None = None):
    """export + to_edge_transform_and_lower with VgfPartitioner (default spec unless given).

    Pass modules in eval mode (exported, quantized models cannot switch modes)."""
    return lower(module, inputs, partitioner or VgfPartitioner(spec or VgfCompileSpec()))


def lower_tosa(module: nn.Module, inputs: Sequence[torch.Tensor], spec: str):
    """The same module lowered for the TOSA reference model."""
    return lower(module, inputs, TOSAPartitioner(TosaCompileSpec(spec)))


def relative_error(actual: Any, expected: Any) -> tuple[float, float]:
    """(max abs error / max |expected|, max |expected|) over all output tensors."""
    err, mag = max_relative_error(actual, expected)
    return err / max(mag, 1e-12), mag


def payloads(edge) -> list[tuple[str, bytes]]:
    """(backend id, processed bytes) of every delegate in a lowered program, in graph order."""
    ep = edge.exported_program()
    out = []
    for node in ep.graph.nodes:
        if node.op == "get_attr" and str(node.target).startswith("lowered_module"):
            lm = getattr(ep.graph_module, node.target)
            out.append((lm.backend_id, bytes(lm.processed_bytes)))
    return out


def run_on_kept_tosa(program, inputs: Sequence[torch.Tensor], intermediate_dir) -> Any:
    """Run a lowered VGF program with each delegate replaced by the TOSA graph VgfBackend kept beside its
    VGF in `intermediate_dir` (`partition_<n>.tosa` / `partition_<n>.vgf`), on the reference model."""
    from arm_tosa_core.reference import run_tosa

    kept = _kept_tosa(intermediate_dir)

    def runner(backend_id, processed, compile_specs, ins):
        return run_tosa(kept[bytes(processed)], ins)

    return _walk(program, inputs, runner)


def _walk(program, inputs: Sequence[torch.Tensor], runner) -> Any:
    """Run a lowered program (not a .pte: the runtime would run its delegates on its registered
    backends) through the core's graph walk, each delegate call sent to `runner`."""
    from arm_tosa_core.reference import run_program

    return run_program(program, inputs, runner)


def _kept_tosa(intermediate_dir) -> dict[bytes, bytes]:
    """VGF bytes -> the TOSA graph it was converted from, as VgfBackend keeps them."""
    return {p.read_bytes(): p.with_suffix(".tosa").read_bytes()
            for p in Path(intermediate_dir).glob("partition_*.vgf")}


@dataclass
class DelegateComparison:
    """One delegate call, run on Vulkan and on the reference model with the same inputs."""

    index: int
    vulkan: list[torch.Tensor]
    reference: list[torch.Tensor]

    @property
    def bit_exact(self) -> bool:
        return all(a.dtype == b.dtype and torch.equal(a, b)
                   for a, b in zip(self.vulkan, self.reference, strict=True))

    def describe(self) -> str:
        parts = []
        for i, (a, b) in enumerate(zip(self.vulkan, self.reference, strict=True)):
            diff = (a.double() - b.double()).abs()
            parts.append(f"output {i} {a.dtype}/{b.dtype} {list(a.shape)}: {int((diff > 0).sum())} "
                         f"elements differ, max {diff.max().item():.4g}")
        return f"delegate call {self.index}: " + "; ".join(parts)


def compare_delegates_on_kept_tosa(program, inputs: Sequence[torch.Tensor],
                                   intermediate_dir) -> tuple[Any, list[DelegateComparison]]:
    """Run a lowered VGF program with every delegate call on the reference model (its kept TOSA graph) and,
    on the same delegate inputs, on Vulkan; return the reference run's program outputs and one
    comparison per delegate call. Both runs of a delegate see identical inputs, so a difference
    in a comparison comes from that delegate alone, never from error carried in from upstream."""
    from arm_tosa_core.reference import run_tosa
    from arm_vgf.host_runner import run_vgf_delegate

    kept = _kept_tosa(intermediate_dir)
    calls: list[DelegateComparison] = []

    def runner(backend_id, processed, compile_specs, ins):
        reference = run_tosa(kept[bytes(processed)], ins)
        vulkan = run_vgf_delegate(backend_id, processed, compile_specs, ins)
        calls.append(DelegateComparison(len(calls), vulkan, reference))
        return reference

    return _walk(program, inputs, runner), calls
