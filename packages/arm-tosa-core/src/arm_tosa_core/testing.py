"""A test harness shared by every package: lower, run on the reference model, compare with eager.

`check_lowering(module, inputs)` exports, lowers with the given partitioner, runs the result with
`run_on_reference_model` and compares with the eager module within `rtol` of the output's max
magnitude. On mismatch the assertion names the case, the max error and the partition report.
Every comparison is NaN-aware (`compare_outputs`): a NaN or inf where the expected value is finite
fails, and where the expected value is NaN or inf the actual one must be the same.
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


@dataclass(frozen=True)
class OutputComparison:
    """Actual outputs against expected ones, NaN-aware.

    `nonfinite` describes every position where the two disagree about NaN or inf (a NaN or inf where
    the expected value is finite, a finite value where it is NaN or inf, or an inf of the other sign);
    empty when they agree. `max_error` is the max abs difference over positions finite in both, and
    inf whenever `nonfinite` is not empty, so a bound on it can never pass a NaN. `max_magnitude` is
    the max |expected| over its finite values.
    """

    max_error: float
    max_magnitude: float
    nonfinite: str = ""

    def within(self, bound: float) -> bool:
        return not self.nonfinite and self.max_error <= bound


def _nonfinite_mismatch(a: torch.Tensor, b: torch.Tensor, where: str) -> str:
    """How many positions of `a` disagree with `b` about NaN / signed inf, and the first of them."""
    bad = (a.isnan() != b.isnan()) | (a.isposinf() != b.isposinf()) | (a.isneginf() != b.isneginf())
    count = int(bad.sum())
    if not count:
        return ""
    finite_b = b.isfinite()
    kinds = [(int((bad & finite_b & a.isnan()).sum()), "NaN where the reference is finite"),
             (int((bad & finite_b & a.isinf()).sum()), "inf where the reference is finite"),
             (int((bad & ~finite_b & a.isfinite()).sum()), "finite where the reference is NaN or inf"),
             (int((bad & ~finite_b & ~a.isfinite()).sum()), "NaN/inf unlike the reference's")]
    first = tuple(int(i) for i in bad.nonzero()[0])
    counts = ", ".join(f"{n} {kind}" for n, kind in kinds if n)
    return (f"{where}: {count} of {a.numel()} values disagree about NaN/inf ({counts}); first at {first}: "
            f"got {a[first].item()}, expected {b[first].item()}")


def compare_outputs(actual: Any, expected: Any) -> OutputComparison:
    """Compare every output tensor of `actual` with `expected` (same tree of shapes), NaN-aware."""
    a_leaves, b_leaves = pytree.tree_leaves(actual), pytree.tree_leaves(expected)
    if len(a_leaves) != len(b_leaves):
        raise AssertionError(f"{len(a_leaves)} outputs, expected {len(b_leaves)}")
    err, mag, nonfinite = 0.0, 0.0, []
    for i, (a, b) in enumerate(zip(a_leaves, b_leaves, strict=True)):
        a, b = torch.as_tensor(a), torch.as_tensor(b)
        if a.shape != b.shape:
            raise AssertionError(f"output shape {tuple(a.shape)}, expected {tuple(b.shape)}")
        a, b = a.detach().double(), b.detach().double()
        where = f"output {i}" if len(a_leaves) > 1 else "output"
        if message := _nonfinite_mismatch(a, b, where):
            nonfinite.append(message)
        both = a.isfinite() & b.isfinite()
        if bool(both.any()):
            err = max(err, (a[both] - b[both]).abs().max().item())
        if bool(b.isfinite().any()):
            mag = max(mag, b[b.isfinite()].abs().max().item())
    return OutputComparison(float("inf") if nonfinite else err, mag, "; ".join(nonfinite))


def max_relative_error(actual: Any, expected: Any) -> tuple[float, float]:
    """(max abs error, max |expected|) over all output tensors; the error is inf where the outputs
    disagree about NaN or inf (see `compare_outputs`, which also says where)."""
    comparison = compare_outputs(actual, expected)
    return comparison.max_error, comparison.max_magnitude


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
    comparison = compare_outputs(out, reference)
    label = f"[{case}] " if case else ""
    if expect_full and report.cpu_nodes:
        raise AssertionError(f"{label}not fully delegated:\n{report}")
    if comparison.nonfinite:
        raise AssertionError(f"{label}{comparison.nonfinite}\n{report}")
    err, mag = comparison.max_error, comparison.max_magnitude
    if err > rtol * max(mag, 1e-6):
        raise AssertionError(f"{label}max abs error {err:.3g} exceeds {rtol:g} x max |output| "
                             f"{mag:.3g}\n{report}")
    return LoweringCheck(edge, report, err, mag, out)
