"""The never-crash sweep: cases generated from the op registry, each lowered for TOSA FP and INT.

Every target of every registry entry (so families added later are swept with no change here) gets
cases built from its aten schema: each argument gets values from `ARG_VALUES` (by name and type),
varied one at a time from the first value (overloads, alpha, divisor_override, ceil_mode,
count_include_pad, dilation, padding, align_corners, keepdim, negative dims, ...), over ranks 1-5,
with broadcast / 0-d / constant (lifted) second operands, in-place forms (`add_`) and a pytree input
`((x, y), scalar)`. Cases eager PyTorch rejects are dropped (they are not programs a user can export).
`RECIPES` covers the few structured ops whose tensors must have related shapes (conv, matmul, norms,
attention, embedding).

Outcome of a case: `lowered` (every compute node delegated, within 1e-4 x max|output| of eager for
FP, within 1 LSB of `run_exactly` for INT), `cpu` (some node on the CPU with a reason, result still
correct), or `crashed` (an exception out of lowering or the run, a node on the CPU with no reason, or
a wrong result). Run it as `python packages/arm-tosa-core/tests/op_sweep.py [--sample N]` or
`nox -s sweep`; `test_op_sweep.py` runs a seeded sample.
"""

from __future__ import annotations

import argparse
import random
import sys
import traceback
from collections import Counter
from dataclasses import dataclass, field

import torch
from torch.utils import _pytree as pytree

from arm_tosa_core import (
    TosaCompileSpec,
    TOSAPartitioner,
    partition_report,
    registry,
    run_on_reference_model,
)
from arm_tosa_core.testing import compare_outputs, lower

aten = torch.ops.aten
SHAPE = (2, 3, 4, 5, 6)
VARIATION_RANK = 4  # pooling and resize need rank 3-4; every op takes rank 4
# quantize/dequantize: exercised by every INT case; cond/while_loop: higher-order ops with no aten schema
# to derive cases from (their table is op_tables.CONTROL_FLOW, run by test_control_flow.py)
SKIP_FAMILIES = {"quantize", "dequantize", "cond", "while_loop"}

# Values per schema argument name; the first is the default a case starts from.
ARG_VALUES: dict[str, list] = {
    "alpha": [1, 2, -0.5], "beta": [1, 0.5], "divisor_override": [None, 3], "ceil_mode": [False, True],
    "count_include_pad": [True, False], "dilation": [[1, 1], [2, 2]], "padding": [[0, 0], [1, 1]],
    "stride": [[1, 1], [2, 2]], "kernel_size": [[2, 2], [3, 3]], "align_corners": [False, True],
    "keepdim": [False, True], "dim": [-1, 0, 1], "dim0": [0], "dim1": [-1], "start": [0, 1],
    "end": [2, None], "step": [1, 2], "index": [0, -1], "output_size": [[1, 1], [2, 2]],
    "scale_factors": [[2.0, 2.0]], "scales_h": [None], "scales_w": [None], "negative_slope": [0.01, 0.2],
    "min_val": [-1.0], "max_val": [1.0], "min": [-0.5, None], "max": [0.5], "approximate": ["none", "tanh"],
    "half_to_float": [False], "rounding_mode": ["trunc", "floor"], "exponent": [2, 3, 0.5, -1],
    "correction": [1, 0], "unbiased": [True], "eps": [1e-5], "momentum": [0.1], "training": [False],
    "input_scale": [1.0], "scale": [1.0], "split_size": [1, 2], "split_sizes": [[1, 1]], "value": [0.0, 1.5],
    "memory_format": [None], "dtype": [None], "non_blocking": [False], "copy": [False], "layout": [None],
    "device": [None], "pin_memory": [None], "sparse_grad": [False], "other": [2.0, 0.5],
}
TENSOR_OPERANDS = ["same", "broadcast", "0-d", "constant"]


@dataclass
class Case:
    family: str
    name: str
    module: torch.nn.Module
    inputs: tuple
    profile: str  # "FP" or "INT"


@dataclass
class Tally:
    counts: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)


class Call(torch.nn.Module):
    """Calls `fn(self, *inputs)`; tensors in `consts` become buffers (lifted constants on export)."""

    def __init__(self, fn, consts: dict[str, torch.Tensor] | None = None) -> None:
        super().__init__()
        self.fn = fn
        for k, v in (consts or {}).items():
            self.register_buffer(k, v)

    def forward(self, *xs):
        return self.fn(self, *xs)


def _shape(rank: int) -> tuple[int, ...]:
    return SHAPE[:rank]


def _type_str(t) -> str:
    """A schema type in the schema's own spelling: List[int] -> int[], Optional[Tensor] -> Tensor?."""
    s = str(t)
    if s.startswith("Optional[") and s.endswith("]"):
        return _type_str(s[len("Optional["):-1]) + "?"
    if s.startswith("List[") and s.endswith("]"):
        return _type_str(s[len("List["):-1]) + "[]"
    return s


def _schema_cases(target, rank: int) -> list[tuple[str, list, dict, list[torch.Tensor]]]:
    """(label, positional arg plan, kwargs, runtime inputs) varied one argument at a time.

    A plan entry is ("in", i) for runtime input i, ("const", tensor) for a lifted constant, or a value.
    """
    args = target._schema.arguments
    x = torch.randn(_shape(rank))
    base: list = []
    options: list[list] = []
    for i, a in enumerate(args):
        t = _type_str(a.type)
        if t == "Tensor" and i == 0:
            base.append(("in", 0))
            options.append([])
        elif t in ("Tensor", "Tensor?") and a.name in ("other", "exponent", "self", "end"):
            base.append(("in", 1))
            options.append(["broadcast", "0-d", "constant"])
        elif t == "Tensor[]":
            base.append(("list", 2))
            options.append([])
        elif a.kwarg_only and a.has_default_value() and a.name not in ARG_VALUES:
            base.append(("default",))
            options.append([])
        elif a.name in ARG_VALUES:
            vals = ARG_VALUES[a.name]
            if a.name == "dim" and t.startswith("int[]"):
                vals = [[-1], [0, -1]]
            if a.name == "other" and t == "Tensor":
                vals = []
            base.append(vals[0] if vals else ("in", 1))
            options.append(vals[1:])
        elif t.startswith("int[]") and a.name in ("dims",):
            base.append(list(reversed(range(rank))))
            options.append([])
        elif t.startswith(("int[]", "SymInt[]")) and a.name in ("size", "shape"):
            base.append(list(_shape(rank)))
            options.append([[*_shape(rank)[:-1], -1]])
        elif t.startswith(("int[]", "SymInt[]")) and a.name in ("repeats", "pad"):
            base.append([2] + [1] * (rank - 1) if a.name == "repeats" else [1, 1])
            options.append([])
        elif t in ("Scalar", "number") or t.startswith("Scalar"):
            base.append(2.0)
            options.append([0.5, 3])
        elif a.has_default_value():
            base.append(("default",))
            options.append([])
        else:
            return []  # an argument this generator knows no values for: reported as uncovered
    inputs = [x, torch.randn(_shape(rank)), [torch.randn(_shape(rank)), torch.randn(_shape(rank))]]
    cases = [("base", base)]
    for i, opts in enumerate(options):
        for v in opts:
            plan = list(base)
            plan[i] = v
            cases.append((f"{args[i].name}={v}", plan))
    return [(label, plan, {}, inputs) for label, plan in cases]


def _build(target, plan: list, inputs: list, rank: int, inplace: bool = False, pytree_form: bool = False):
    """A module calling `target` with `plan`, and its runtime inputs."""
    consts: dict[str, torch.Tensor] = {}
    runtime = [inputs[0]]
    resolved: list = []
    names = [a.name for a in target._schema.arguments]
    kwarg_only = {a.name for a in target._schema.arguments if a.kwarg_only}
    keys: list[str | None] = []
    for name, p in zip(names, plan, strict=False):
        keys.append(name if name in kwarg_only else None)
        if isinstance(p, tuple) and p and p[0] == "in":
            runtime.append(inputs[1]) if p[1] == 1 else None
            resolved.append(("rt", len(runtime) - 1))
        elif isinstance(p, tuple) and p and p[0] == "list":
            runtime.append(tuple(inputs[2]))
            resolved.append(("rt", len(runtime) - 1))
        elif isinstance(p, tuple) and p and p[0] == "default":
            keys.pop()
            break  # trailing defaults: leave them to the schema
        elif p == "broadcast":
            runtime.append(torch.randn(_shape(rank)[1:] or (1,)))
            resolved.append(("rt", len(runtime) - 1))
        elif p == "0-d":
            runtime.append(torch.tensor(1.5))
            resolved.append(("rt", len(runtime) - 1))
        elif p == "constant":
            consts["c0"] = torch.randn(_shape(rank)[-1:])
            resolved.append(("const", "c0"))
        else:
            resolved.append(("val", p))
    call = target
    if inplace:
        packet = getattr(aten, target._schema.name.split("::")[1] + "_", None)
        overload = getattr(packet, target._overloadname, None) if packet is not None else None
        if overload is None:
            return None
        call = overload

    def fn(self, *xs):
        if pytree_form:
            xs = (*xs[0], xs[1])
        values = []
        for kind, v in resolved:
            values.append(xs[v] if kind == "rt" else getattr(self, v) if kind == "const" else v)
        if inplace:
            values[0] = values[0].clone()
        args = [v for k, v in zip(keys, values, strict=True) if k is None]
        return call(*args, **{k: v for k, v in zip(keys, values, strict=True) if k is not None})

    if pytree_form:  # ((x, y), python scalar): the scalar operand arrives as a plain float input
        if len(runtime) != 2 or not isinstance(runtime[1], torch.Tensor):
            return None
        return Call(fn, consts), ((runtime[0], runtime[1]), 2.0)
    return Call(fn, consts), tuple(runtime)


def generate(targets: list | None = None) -> list[Case]:
    """Every case, for every registry target (or the given (family, target) pairs)."""
    from sweep_recipes import recipe_cases

    cases: list[Case] = []
    done: set = set()
    # higher-order ops (torch.cond, while_loop) have no aten schema to derive cases from: op_tables covers them
    pairs = targets or [(e.name, t) for e in registry.entries() if e.name not in SKIP_FAMILIES
                        for t in e.targets if hasattr(t, "_schema")]
    for family, target in pairs:
        name = f"{target._schema.name.split('::')[1]}.{target._overloadname}"
        built = recipe_cases(family, target, done)
        if built is None:
            built = []
            for rank in range(1, 6):  # the base case at every rank; the variations at rank 4
                for label, plan, _, inputs in _schema_cases(target, rank):
                    if label != "base" and rank != VARIATION_RANK:
                        continue
                    made = _build(target, plan, inputs, rank)
                    if made is not None:
                        built.append((f"r{rank} {label}", *made))
                    if label == "base" and rank == VARIATION_RANK:
                        for form, kw in (("inplace", {"inplace": True}), ("pytree", {"pytree_form": True})):
                            made = _build(target, plan, inputs, rank, **kw)
                            if made is not None:
                                built.append((f"r{rank} {form}", *made))
        for label, module, inputs in built:
            for profile in ("FP", "INT"):
                cases.append(Case(family, f"{name} {label} {profile}", module, inputs, profile))
    return cases


def _eager(module, inputs):
    with torch.no_grad():
        return module(*_clone(inputs))


def _clone(inputs):
    return pytree.tree_map(lambda v: v.clone() if isinstance(v, torch.Tensor) else v, inputs)


def valid(case: Case) -> bool:
    """Whether eager PyTorch runs the case to finite float outputs (INT needs float inputs/outputs)."""
    try:
        out = _eager(case.module, case.inputs)
    except Exception:
        return False
    leaves = [v for v in pytree.tree_leaves(out) if isinstance(v, torch.Tensor)]
    if not leaves or any(v.is_floating_point() and not torch.isfinite(v).all() for v in leaves):
        return False
    if case.profile == "INT":
        tensors = [v for v in pytree.tree_leaves(case.inputs) if isinstance(v, torch.Tensor)]
        return all(v.is_floating_point() for v in leaves + tensors) and all(v.numel() > 1 for v in leaves)
    return True


def run_case(case: Case) -> tuple[str, str]:
    """(outcome, detail) of one case; see module docstring."""
    try:
        if case.profile == "FP":
            expected = _eager(case.module, case.inputs)
            edge = lower(case.module.eval(), _clone(case.inputs), TOSAPartitioner(TosaCompileSpec("TOSA-1.0+FP")))
            out = run_on_reference_model(edge, *_clone(case.inputs))
            comparison = compare_outputs(out, expected)
            err, mag = comparison.max_error, comparison.max_magnitude
            ok = comparison.within(1e-4 * max(mag, 1e-6))
        else:
            from quant_harness import output_scales, quantize

            from arm_quantizer import run_exactly

            converted = quantize(case.module.eval(), _clone(case.inputs))
            expected = run_exactly(converted, *_clone(case.inputs))
            edge = lower(converted, _clone(case.inputs), TOSAPartitioner(TosaCompileSpec("TOSA-1.0+INT")))
            out = run_on_reference_model(edge, *_clone(case.inputs))
            comparison = compare_outputs(out, expected)
            err, mag = comparison.max_error, comparison.max_magnitude
            try:  # 1 LSB of a quantized output; an output left in float (op not quantized): FP tolerance
                mag, ok = max(output_scales(converted)), comparison.within(max(output_scales(converted)) * 1.0001)
            except IndexError:
                ok = comparison.within(1e-4 * max(mag, 1e-6))
        report = partition_report(edge)
    except Exception as exc:
        return "crashed", f"{type(exc).__name__}: {str(exc)[:300]}\n{traceback.format_exc(limit=-3)}"
    cpu = [c for c in report.cpu_nodes if "quantize" not in c.target]
    if not ok:
        return "crashed", (f"wrong result: {comparison.nonfinite or f'max error {err:.3g}'} "
                           f"(tolerance base {mag:.3g})\n{report}")
    if any(not c.reason or c.reason == "not claimed by any partitioner" for c in cpu):
        return "crashed", f"a node left on the CPU without a reason\n{report}"
    return ("cpu", cpu[0].reason) if cpu else ("lowered", "")


def run_sweep(cases: list[Case], verbose: bool = False) -> dict[str, Tally]:
    tallies: dict[str, Tally] = {}
    for case in cases:
        if not valid(case):
            continue
        outcome, detail = run_case(case)
        tally = tallies.setdefault(case.family, Tally())
        tally.counts["cases"] += 1
        tally.counts[outcome] += 1
        if outcome == "crashed":
            tally.failures.append(f"{case.name}: {detail}")
        if verbose:
            print(f"{outcome:8} {case.name}" + (f"  ({detail.splitlines()[0][:120]})" if detail else ""),
                  flush=True)
    return tallies


def table(tallies: dict[str, Tally]) -> str:
    lines = [f"{'family':<30}{'cases':>7}{'lowered':>9}{'cpu':>6}{'crashed':>9}"]
    total = Counter()
    for family, t in sorted(tallies.items()):
        c = t.counts
        total.update(c)
        lines.append(f"{family:<30}{c['cases']:>7}{c['lowered']:>9}{c['cpu']:>6}{c['crashed']:>9}")
    lines.append(f"{'total':<30}{total['cases']:>7}{total['lowered']:>9}{total['cpu']:>6}{total['crashed']:>9}")
    return "\n".join(lines)


def sample(cases: list[Case], n: int, seed: int = 0) -> list[Case]:
    """A fixed, seeded sample with at least one case per family where there are enough."""
    rng = random.Random(seed)
    by_family: dict[str, list[Case]] = {}
    for c in cases:
        by_family.setdefault(c.family, []).append(c)
    picked = [rng.choice(v) for _, v in sorted(by_family.items())]
    rest = [c for c in cases if c not in picked]
    picked += rng.sample(rest, max(0, min(len(rest), n - len(picked))))
    return picked[:n] if n < len(picked) else picked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=0, help="run a seeded sample of N cases (0: all)")
    parser.add_argument("--family", action="append", help="only these registry families")
    parser.add_argument("-v", "--verbose", action="store_true")
    opts = parser.parse_args(argv)
    torch.manual_seed(0)
    cases = generate()
    if opts.family:
        cases = [c for c in cases if c.family in opts.family]
    if opts.sample:
        cases = sample(cases, opts.sample)
    tallies = run_sweep(cases, opts.verbose)
    for t in tallies.values():
        for f in t.failures:
            print("CRASHED", f, "\n")
    print(table(tallies))
    uncovered = sorted({f"{e.name}:{t}" for e in registry.entries() if e.name not in SKIP_FAMILIES
                        for t in e.targets} - {f"{c.family}:{_target_of(c)}" for c in cases})
    if uncovered and not opts.sample and not opts.family:
        print(f"targets with no generated case ({len(uncovered)}): {', '.join(uncovered)}")
    return 1 if any(t.counts["crashed"] for t in tallies.values()) else 0


def _target_of(case: Case) -> str:
    name = case.name.split(" ")[0]
    op, overload = name.rsplit(".", 1)
    return str(getattr(getattr(aten, op), overload))


if __name__ == "__main__":
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2] / "arm-quantizer" / "tests"))
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
    sys.exit(main())
