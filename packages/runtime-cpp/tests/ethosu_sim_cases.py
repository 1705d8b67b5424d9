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

import hashlib
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from executorch.runtime import Runtime
from torch.utils import _pytree as pytree

import runtime_cpp  # noqa: F401  (registers EthosUBackend in the pip runtime)
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


progs = _load("runtime_cpp_test_programs", Path(__file__).with_name("runtime_cpp_programs.py"))  # as conftest.py


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
    cases = {name: (module, shape) for name, (module, shape, _reason) in coverage.U55_CPU.items()}
    return [SimCase(f"coverage:{name}", module, (torch.randn(shape),))
            for name, (module, shape) in (coverage.CASES | cases).items()]


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


class SweepCache:
    """What a sweep over several targets computes once per case: the quantized model (EthosUQuantizer
    annotates the same way for every target of one operator set) and the reference model's outputs
    for each distinct TOSA graph (U55 and U65 lower to the same one)."""

    def __init__(self) -> None:
        self.quantized: dict[tuple[str, str], torch.export.ExportedProgram] = {}
        self.reference: dict[str, list[torch.Tensor]] = {}

    def lower(self, case: SimCase, target: str):
        from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer

        spec = EthosUCompileSpec(target).include_host_graph()
        key = (case.name, "U85" if spec.family == "U85" else "U55/U65")
        if key not in self.quantized:
            quantizer = EthosUQuantizer(spec)
            if case.a16w8:
                quantizer.set_global(get_symmetric_a16w8_quantization_config())
            prepared = prepare_pt2e(torch.export.export(case.module.eval(), case.inputs).module(), quantizer)
            with torch.no_grad():
                prepared(*case.inputs)
            self.quantized[key] = torch.export.export(convert_pt2e(prepared), case.inputs)
        return to_edge_transform_and_lower(self.quantized[key], partitioner=[EthosUPartitioner(spec)],
                                           compile_config=EdgeCompileConfig(_check_ir_validity=False))

    def reference_outputs(self, case: SimCase, edge) -> list[torch.Tensor]:
        from arm_ethosu import parse_binstream

        graphs = hashlib.sha256()
        for module in lowered_modules(edge):
            for name, block in sorted(parse_binstream(bytes(module.processed_bytes)).extra.items()):
                graphs.update(name.encode() + block)
        key = f"{case.name}:{graphs.hexdigest()}"
        if key not in self.reference:
            self.reference[key] = _as_list(run_on_reference_model(edge, *case.inputs))
        return self.reference[key]


def _as_list(outputs) -> list[torch.Tensor]:
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


lowered_modules = progs.lowered_modules
deployable_pte = progs.deployable_pte


def run_case(case: SimCase, target: str, cache: SweepCache | None = None) -> Outcome:
    """Lower, run the deployable .pte on the simulator and compare with the reference model; `cache`
    shares the quantized model and the reference outputs between the targets of one sweep."""
    edge = cache.lower(case, target) if cache is not None else lower(case, target)
    if not lowered_modules(edge):
        return Outcome("not on the npu")
    program = Runtime.get().load_program(deployable_pte(edge))
    try:
        method = program.load_method("forward")
    except RuntimeError as exc:
        return Outcome("refused", str(exc))
    got = method.execute([x for x in pytree.tree_leaves(case.inputs) if isinstance(x, torch.Tensor)])
    expected = cache.reference_outputs(case, edge) if cache is not None else _as_list(
        run_on_reference_model(edge, *case.inputs))
    diff = 0.0
    for g, e in zip(got, expected, strict=True):
        if g.dtype != e.dtype or g.shape != e.shape:
            return Outcome("differs", f"dtype/shape {g.dtype}{tuple(g.shape)} vs {e.dtype}{tuple(e.shape)}", float("inf"))
        d = (g.double() - e.double()).abs()
        d = torch.where(torch.isnan(g) & torch.isnan(e), torch.zeros_like(d), d)
        diff = max(diff, float(torch.nan_to_num(d, nan=float("inf")).max()) if d.numel() else 0.0)
    return Outcome("exact") if diff == 0 else Outcome("differs", f"max abs diff {diff:g}", diff)


@dataclass
class SweepRow:
    case: str
    target: str
    kind: str  # an Outcome kind, or "error" when lowering or running raised
    max_diff: float
    seconds: float
    detail: str = ""


def sweep(targets: tuple[str, ...], cases: dict[str, SimCase] | None = None, log: Path | None = None) -> list[SweepRow]:
    """Every case on every target in one process, sharing each case's quantized model and reference
    outputs between the targets; `log` gets one JSON line per result as it comes (a partial run still
    records what it measured)."""
    import json
    import time

    cache = SweepCache()
    rows = []
    for case in (cases if cases is not None else all_cases()).values():
        for target in targets:
            start = time.perf_counter()
            try:
                outcome = run_case(case, target, cache)
            except Exception as exc:  # noqa: BLE001 - recorded as a failing row, with its message
                outcome = Outcome("error", f"{type(exc).__name__}: {str(exc)[:300]}", float("inf"))
            row = SweepRow(case.name, target, outcome.kind, outcome.max_diff, time.perf_counter() - start,
                           outcome.detail)
            rows.append(row)
            if log is not None:
                with log.open("a") as f:
                    f.write(json.dumps(row.__dict__) + "\n")
        cache.quantized.clear()  # a case's models are not needed once every target has run it
    return rows


def summary_table(rows: list[SweepRow]) -> str:
    """The README's table: per target, cases, bit-exact, differences, not on the NPU, refused, errors, time."""
    lines = ["| target | cases | bit-exact | differences | not on the NPU | refused | errors | time (s) |",
             "|---|---|---|---|---|---|---|---|"]
    for target in dict.fromkeys(r.target for r in rows):
        mine = [r for r in rows if r.target == target]
        count = {k: sum(r.kind == k for r in mine) for k in ("exact", "differs", "not on the npu", "refused", "error")}
        lines.append(f"| {target} | {len(mine)} | {count['exact']} | {count['differs']} | {count['not on the npu']} "
                     f"| {count['refused']} | {count['error']} | {sum(r.seconds for r in mine):.0f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    # The whole sweep in one process (`nice uv run --frozen --no-sync python
    # packages/runtime-cpp/tests/ethosu_sim_cases.py LOG.jsonl [TARGET ...]`): a JSON line per result
    # into LOG as it comes, then the README's summary table.
    rows = sweep(tuple(sys.argv[2:]) or ("ethos-u55-128", "ethos-u65-256"), log=Path(sys.argv[1]))
    print(summary_table(rows))
