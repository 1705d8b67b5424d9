"""A test harness shared by every package: lower, run on the reference model, compare with eager.

`check_lowering(module, inputs)` exports, lowers with the given partitioner, runs the result with
`run_on_reference_model` and compares with the eager module within `rtol` of the output's max
magnitude. On mismatch the assertion names the case, the max error and the partition report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
from torch.utils import _pytree as pytree

from .compile_spec import TosaCompileSpec
from .partitioner import TOSAPartitioner
from .reference import run_on_reference_model
from .report import PartitionReport, partition_report


class FnModule(torch.nn.Module):
    """A function of the inputs as a module: `FnModule(lambda self, x: x @ self.w, w=tensor)`.

    Keyword tensors become buffers, `nn.Parameter`s parameters and modules submodules, so the function
    reaches them through `self` (and torch.export sees them as the constants they are).
    """

    def __init__(self, fn, **attrs: Any) -> None:
        super().__init__()
        self.fn = fn
        for name, value in attrs.items():
            if isinstance(value, torch.nn.Parameter):
                self.register_parameter(name, value)
            elif isinstance(value, torch.Tensor):
                self.register_buffer(name, value)
            else:
                setattr(self, name, value)

    def forward(self, *xs):
        return self.fn(self, *xs)


@dataclass
class LoweringCheck:
    edge: Any
    report: PartitionReport
    max_error: float
    max_magnitude: float
    outputs: Any


def lower(module: torch.nn.Module, inputs: Sequence[torch.Tensor], partitioner=None,
          spec: str = "TOSA-1.0+FP"):
    """export + to_edge_transform_and_lower with our partitioner (TOSA FP by default)."""
    partitioner = partitioner or TOSAPartitioner(TosaCompileSpec(spec))
    ep = torch.export.export(module, tuple(inputs))
    return to_edge_transform_and_lower(ep, partitioner=[partitioner],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))


def max_relative_error(actual: Any, expected: Any) -> tuple[float, float]:
    """(max abs error, max |expected|) over all output tensors."""
    a_leaves, b_leaves = pytree.tree_leaves(actual), pytree.tree_leaves(expected)
    if len(a_leaves) != len(b_leaves):
        raise AssertionError(f"{len(a_leaves)} outputs, expected {len(b_leaves)}")
    err, mag = 0.0, 0.0
    for a, b in zip(a_leaves, b_leaves, strict=True):
        if a.shape != b.shape:
            raise AssertionError(f"output shape {tuple(a.shape)}, expected {tuple(b.shape)}")
        a, b = a.detach().double(), b.detach().double()
        err = max(err, (a - b).abs().max().item() if a.numel() else 0.0)
        mag = max(mag, b.abs().max().item() if b.numel() else 0.0)
    return err, mag


def check_lowering(module: torch.nn.Module, inputs: Sequence[torch.Tensor], *, case: str = "",
                   partitioner=None, spec: str = "TOSA-1.0+FP", rtol: float = 1e-4,
                   expect_full: bool = True, expected: Any = None) -> LoweringCheck:
    """Lower `module`, run it on the reference model and assert it matches eager (or `expected`)."""
    module = module.eval()
    with torch.no_grad():
        reference = module(*inputs) if expected is None else expected
    edge = lower(module, inputs, partitioner, spec)
    report = partition_report(edge)
    with torch.no_grad():
        out = run_on_reference_model(edge, *inputs)
    err, mag = max_relative_error(out, reference)
    label = f"[{case}] " if case else ""
    if expect_full and report.cpu_nodes:
        raise AssertionError(f"{label}not fully delegated:\n{report}")
    if err > rtol * max(mag, 1e-6):
        raise AssertionError(f"{label}max abs error {err:.3g} exceeds {rtol:g} x max |output| "
                             f"{mag:.3g}\n{report}")
    return LoweringCheck(edge, report, err, mag, out)
