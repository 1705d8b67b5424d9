"""The Ethos-U simulator verification sweep's cases and harness (imported by file path as
``runtime_cpp_ethosu_sim_cases``, like runtime_cpp_programs).

Cases: one INT case per registry target from the core's op sweep (op_sweep.generate, rank 4 base
case), the Ethos-U coverage table (test_ethosu_coverage.CASES), the a16w8 op table
(test_ethosu_a16w8.OPS) and the core's small models (arm_tosa_core.small_models). Each is quantized
with EthosUQuantizer, lowered for the target with the host graph kept, and its deployable .pte (host
graph stripped) is run on the simulator; the outcome is compared with the TOSA reference model on
the same TOSA graph.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import runtime_cpp_test_programs as progs  # registered by conftest.py
import torch
from executorch.runtime import Runtime
from torch.utils import _pytree as pytree

from arm_quantizer import get_symmetric_a16w8_quantization_config
from arm_tosa_core import run_on_reference_model

PACKAGES = Path(__file__).resolve().parents[2]
ETHOSU_TESTS = PACKAGES / "arm-ethosu" / "tests"
for _tests in ("arm-tosa-core/tests", "arm-quantizer/tests"):  # op_sweep and its quant_harness
    if str(PACKAGES / _tests) not in sys.path:
        sys.path.append(str(PACKAGES / _tests))


def _load(name: str, path: Path):
    """A test module loaded by path under a unique name (as the packages' conftests do)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _ethosu_test_module(stem: str):
    _load("arm_ethosu_test_flow", ETHOSU_TESTS / "ethosu_flow.py")
    return _load(f"runtime_cpp_sim_{stem}", ETHOSU_TESTS / f"{stem}.py")


@dataclass
class SimCase:
    name: str
    module: torch.nn.Module
    inputs: tuple
    a16w8: bool = False


@dataclass
class Outcome:
    kind: str  # "exact", "differs", "refused", "not on the npu"
    detail: str = ""
    max_diff: float = 0.0


def op_sweep_cases(targets: set[str] | None = None) -> list[SimCase]:
    """The INT cases of the core's op sweep eager PyTorch accepts: the rank-4 base case of every
    registry target (``sweep:<op>.<overload>``) and every recipe case (``sweep:<op> <label>``);
    `targets` keeps only the aten targets named, e.g. {"aten.flip.default"}."""
    import op_sweep

    from arm_tosa_core import registry

    pairs = [(e.name, t) for e in registry.entries() if e.name not in op_sweep.SKIP_FAMILIES
             for t in e.targets if hasattr(t, "_schema") and (targets is None or str(t) in targets)]
    if not pairs:  # op_sweep.generate([]) would generate every case
        return []
    torch.manual_seed(0)
    cases = []
    for c in op_sweep.generate(pairs):
        if c.profile != "INT":
            continue
        op, label = c.name.removesuffix(" INT").split(" ", 1)
        # the schema-derived base case at rank 4, and every recipe case (conv, matmul, norms, ...)
        if (label == "r4 base" or not re.match(r"r\d ", label)) and op_sweep.valid(c):
            cases.append(SimCase(f"sweep:{op}" if label == "r4 base" else f"sweep:{op} {label}",
                                 c.module, c.inputs))
    return cases


def coverage_cases() -> list[SimCase]:
    coverage = _ethosu_test_module("test_ethosu_coverage")

    torch.manual_seed(0)
    return [SimCase(f"coverage:{name}", module, (torch.randn(shape),))
            for name, (module, shape) in coverage.CASES.items()]


def a16w8_cases() -> list[SimCase]:
    a16w8 = _ethosu_test_module("test_ethosu_a16w8")

    torch.manual_seed(0)
    return [SimCase(f"a16w8:{name}", make(), tuple(torch.randn(1, 8, 8, 8) for _ in range(n)), a16w8=True)
            for name, (make, n, _lsb) in a16w8.OPS.items()]


def small_model_cases() -> list[SimCase]:
    """The core's small models (ConvMixer, U-Net decoder, MobileNetV3-small, KWS CNN, ViT patch
    embedding, CRNN), each with its example input."""
    from arm_tosa_core.small_models import SMALL_MODELS, build_small

    return [SimCase(f"small:{name}", *build_small(name)) for name in SMALL_MODELS]


def all_cases() -> dict[str, SimCase]:
    return {c.name: c for c in op_sweep_cases() + coverage_cases() + a16w8_cases() + small_model_cases()}


def lower(case: SimCase, target: str):
    return progs.ethosu_lower(case.module, case.inputs, target,
                              get_symmetric_a16w8_quantization_config() if case.a16w8 else None)


lowered_modules = progs.lowered_modules
deployable_pte = progs.deployable_pte


def run_case(case: SimCase, target: str) -> Outcome:
    """Lower, run the deployable .pte on the simulator and compare with the reference model."""
    edge = lower(case, target)
    if not lowered_modules(edge):
        return Outcome("not on the npu")
    program = Runtime.get().load_program(deployable_pte(edge))
    try:
        method = program.load_method("forward")
    except RuntimeError as exc:
        return Outcome("refused", str(exc))
    got = method.execute([x for x in pytree.tree_leaves(case.inputs) if isinstance(x, torch.Tensor)])
    expected = run_on_reference_model(edge, *case.inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    diff = 0.0
    for g, e in zip(got, expected, strict=True):
        if g.dtype != e.dtype or g.shape != e.shape:
            return Outcome("differs", f"dtype/shape {g.dtype}{tuple(g.shape)} vs {e.dtype}{tuple(e.shape)}", float("inf"))
        d = (g.double() - e.double()).abs()
        d = torch.where(torch.isnan(g) & torch.isnan(e), torch.zeros_like(d), d)
        diff = max(diff, float(torch.nan_to_num(d, nan=float("inf")).max()) if d.numel() else 0.0)
    return Outcome("exact") if diff == 0 else Outcome("differs", f"max abs diff {diff:g}", diff)
