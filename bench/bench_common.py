"""Pieces both benchmark sides share: process isolation, model building, TOSA and accuracy metrics.

Nothing here imports ``arm_tosa_core`` (the package) or ``executorch.backends``: our package's
``__init__`` registers ``TOSABackend`` and ``EthosUBackend`` classes in ExecuTorch's backend
registry, and so does upstream's; ExecuTorch picks a backend by class name, so a process holding
both would run whichever it finds first. The two modules of ours that the upstream side needs
(``tosa_inspect.py`` and ``example_models.py``, which import only torch / tosa-tools) are loaded
by file path instead, under private module names.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import math
import operator
import os
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

BENCH_DIR = Path(__file__).resolve().parent


# ----------------------------------------------------------------------------- loading by path


def load_core_file(stem: str) -> ModuleType:
    """Load ``arm_tosa_core/<stem>.py`` on its own, without running the package's ``__init__``.

    Only for files that import nothing from the package (tosa_inspect, example_models).
    """
    name = f"_bench_core_{stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec("arm_tosa_core")  # locates the package, does not import it
    if spec is None or spec.origin is None:
        raise ImportError("arm_tosa_core is not installed in this environment: run `uv sync`")
    file_spec = importlib.util.spec_from_file_location(name, Path(spec.origin).with_name(f"{stem}.py"))
    module = importlib.util.module_from_spec(file_spec)
    sys.modules[name] = module  # dataclasses look their module up while the class body runs
    file_spec.loader.exec_module(module)
    return module


def _small_models() -> ModuleType:
    """``arm_tosa_core/small_models.py``, whose one relative import (``.example_models``) resolves in a
    stand-in package over the same folder: the package's ``__init__`` still never runs."""
    if "_bench_core" not in sys.modules:
        spec = importlib.util.find_spec("arm_tosa_core")
        if spec is None or spec.origin is None:
            raise ImportError("arm_tosa_core is not installed in this environment: run `uv sync`")
        package = ModuleType("_bench_core")
        package.__path__ = [str(Path(spec.origin).parent)]
        sys.modules["_bench_core"] = package
    return importlib.import_module("_bench_core.small_models")


def example_models() -> dict[str, Any]:
    """The bundled example models and the small models (name -> ExampleModel), loaded without the
    arm_tosa_core package."""
    return {**load_core_file("example_models").EXAMPLE_MODELS, **_small_models().SMALL_MODELS}


def build_example(name: str, seed: int = 0, input_size: int | None = None) -> tuple[torch.nn.Module, tuple]:
    """Seeded (module, example inputs) of a bundled example model or a public one (`public_models`:
    tv:<name>, timm:<name>); same weights in every process."""
    from public_models import build_public, is_public

    if is_public(name):
        return build_public(name, seed, input_size)
    return example_models()[name].build(seed, input_size)


# ----------------------------------------------------------------------------- isolation


def run_isolated_example(module_name: str, flow: str, model: str, seed: int = 0,
                         input_size: int | None = None, log_file: Path | None = None,
                         timeout_s: float | None = None, **kwargs: Any) -> dict[str, Any]:
    """Run ``bench/<module_name>.py``'s ``FLOWS[flow]`` on a bundled example in a fresh interpreter.

    The child (``bench/flow_worker.py``) builds the model itself by name and seed, so nothing of
    ``arm_tosa_core`` is unpickled there, and import costs and compile caches never leak from one
    flow to the next. Its stdout/stderr (compiler chatter, warnings) go to ``log_file``. The result
    comes back as JSON; a crashed or timed-out child becomes an ``error`` entry.
    """
    import json
    import subprocess
    import tempfile

    request = {"module": module_name, "flow": flow, "model": model, "seed": seed,
               "input_size": input_size, "kwargs": kwargs}
    with tempfile.TemporaryDirectory() as tmp:
        result_path = Path(tmp) / "result.json"
        cmd = [sys.executable, str(BENCH_DIR / "flow_worker.py"), json.dumps(request), str(result_path)]
        log = open(log_file, "w") if log_file else subprocess.DEVNULL  # noqa: SIM115
        t0 = time.perf_counter()
        try:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=BENCH_DIR.parent,
                                timeout=timeout_s, check=False).returncode
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout_s:.0f} s", "root_cause": "timeout",
                    "failed_after_s": time.perf_counter() - t0}
        finally:
            if log_file:
                log.close()
        if not result_path.is_file():
            where = f"; see {log_file}" if log_file else ""
            return {"error": f"worker exited with code {rc} without a result{where}",
                    "root_cause": f"exit code {rc}", "failed_after_s": time.perf_counter() - t0}
        res = json.loads(result_path.read_text())
    res["process_wall_s"] = time.perf_counter() - t0  # interpreter start + imports included
    return res


def guard(flow: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """Record an exception as ``error`` (with its root cause and traceback tail) instead of raising."""

    def wrapped(*args: Any, **kwargs: Any) -> dict[str, Any]:
        t0, c0, load = time.perf_counter(), cpu_seconds(), os.getloadavg()[0]
        try:
            res = flow(*args, **kwargs)
            res |= {"flow_wall_s": time.perf_counter() - t0, "flow_cpu_s": cpu_seconds() - c0}
            return res | {"loadavg_1m_at_start": load, "torch_threads": torch.get_num_threads()}
        except Exception as exc:  # noqa: BLE001 - a failing flow is a measurement too
            tb = traceback.format_exc().strip().splitlines()
            root = exc
            while root.__cause__ is not None or root.__context__ is not None:
                root = root.__cause__ or root.__context__
            return {
                "error": f"{type(exc).__name__}: {exc}"[:2000],
                "root_cause": f"{type(root).__name__}: {root}"[:2000],
                "traceback_tail": "\n".join(tb[-12:]),
                "failed_after_s": time.perf_counter() - t0,
            }

    wrapped.__name__ = flow.__name__
    wrapped.__doc__ = flow.__doc__
    wrapped.__wrapped__ = flow  # type: ignore[attr-defined]
    return wrapped


# ----------------------------------------------------------------------------- graph statistics


def partition_stats(edge: Any) -> dict[str, Any]:
    """Share of call_function nodes that went into delegates (getitem bookkeeping not counted).

    Counted the same way for both sides, on the edge program after lowering and before
    ``to_executorch`` (which adds memory-planning nodes).
    """
    gm = edge.exported_program().graph_module
    delegated, partitions, rest = 0, 0, Counter()
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        if "executorch_call_delegate" in str(node.target):
            partitions += 1
            lowered = getattr(gm, node.args[0].target)
            delegated += sum(1 for n in lowered.original_module.graph.nodes
                             if n.op == "call_function" and n.target is not operator.getitem)
        else:
            rest[str(getattr(node.target, "__name__", node.target))] += 1
    total = delegated + sum(rest.values())
    return {"delegated_nodes": delegated, "total_nodes": total,
            "partition_share": delegated / total if total else 0.0, "partitions": partitions,
            "not_delegated": dict(rest)}  # fmt: skip


def unique_files(folder: Path, suffix: str) -> list[Path]:
    """Files under ``folder`` ending in ``suffix``, one per distinct content (some flows write twice)."""
    seen: dict[str, Path] = {}
    for f in sorted(Path(folder).rglob(f"*{suffix}")):
        seen.setdefault(hashlib.sha256(f.read_bytes()).hexdigest(), f)
    return sorted(seen.values())


def tosa_stats(tosa_graphs: Sequence[bytes]) -> dict[str, Any]:
    """Operator counts over the given TOSA flatbuffers (one per delegate)."""
    count_ops = load_core_file("tosa_inspect").tosa_op_counts
    counts: Counter[str] = Counter()
    for graph in tosa_graphs:
        counts += count_ops(graph)
    return {
        "tosa_files": len(tosa_graphs),
        "tosa_ops": sum(counts.values()),
        # CONST / CONST_SHAPE are operators in TOSA 1.0 flatbuffers; compute ops leave them out.
        "tosa_compute_ops": sum(v for k, v in counts.items() if k not in ("CONST", "CONST_SHAPE")),
        "tosa_transpose": counts["TRANSPOSE"],
        "tosa_rescale": counts["RESCALE"],
        "tosa_table": counts["TABLE"],
        "tosa_op_counts": dict(counts.most_common()),
    }


def tosa_stats_of_dir(folder: Path) -> dict[str, Any]:
    """``tosa_stats`` over the distinct ``.tosa`` files a flow dumped into ``folder``."""
    return tosa_stats([f.read_bytes() for f in unique_files(folder, ".tosa")])


# ----------------------------------------------------------------------------- accuracy


def _flat(out: Any) -> torch.Tensor:
    leaves = out if isinstance(out, list | tuple) else [out]
    return torch.cat([t.detach().reshape(-1).double() for t in leaves])


def sqnr_db(signal: Any, approx: Any) -> float:
    """10 log10(|signal|^2 / |signal - approx|^2) in dB; inf when the two are identical."""
    s, a = _flat(signal), _flat(approx)
    noise = float(((s - a) ** 2).sum())
    return math.inf if noise == 0.0 else 10.0 * math.log10(float((s**2).sum()) / noise)


def rel_max_error(expected: Any, got: Any) -> float:
    """max |got - expected| / max |expected| (so 1e-2 is 1 % of the output's range)."""
    e, g = _flat(expected), _flat(got)
    scale = float(e.abs().max()) or 1.0
    return float((g - e).abs().max()) / scale


def median_seconds(fn: Callable[[], Any], repeats: int, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` over ``repeats`` runs after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def run_with_tosa_delegates(edge: Any, inputs: Sequence[torch.Tensor],
                            tosa_of: Callable[[Any], bytes]) -> Any:
    """Run a lowered program: each delegate's TOSA graph on the TOSA reference model, the rest eager.

    ``tosa_of(lowered_module)`` returns the TOSA flatbuffer of one delegate. Used for upstream's
    programs (ours have ``arm_tosa_core.run_on_reference_model``). Delegate inputs go in call order,
    outputs come back in graph-output order, cast to the dtypes the delegate declared.
    """
    import numpy as np
    import tosa_reference_model as trm

    def run_delegate(lowered: Any, args: Sequence[Any]) -> list[torch.Tensor]:
        arrays = [a.detach().contiguous().numpy() if a.dtype != torch.int64
                  else a.to(torch.int32).numpy() for a in args]  # fmt: skip
        outs, status = trm.run(tosa_of(lowered), arrays)
        if status != trm.GraphStatus.TOSA_VALID:
            raise RuntimeError(f"the TOSA reference model returned {status.name}")
        out_node = next(n for n in lowered.original_module.graph.nodes if n.op == "output")
        metas = [n.meta["val"] for n in out_node.args[0]]
        return [torch.from_numpy(np.array(o)).reshape(m.shape).to(m.dtype)
                for o, m in zip(outs, metas, strict=True)]  # fmt: skip

    class _Interp(torch.fx.Interpreter):
        def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
            if "executorch_call_delegate" in str(target):
                return run_delegate(args[0], args[1:])
            return super().call_function(target, args, kwargs)

    gm = edge.exported_program().module()
    with torch.no_grad():
        flat = _Interp(gm).run(*inputs)
    return flat


def cpu_seconds() -> float:
    """CPU seconds of this process and of its waited-for children (e.g. the VGF model converter)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def layer_summary(layers: Sequence[dict[str, Any]], top: int = 8) -> dict[str, Any]:
    """Where vela's cycles go: per-operator totals and the ``top`` costliest layers (JSON only).

    ``layers`` are ``{"name", "op", "cycles"}`` rows from vela's per-layer CSV(s).
    """
    by_op: Counter[str] = Counter()
    for layer in layers:
        by_op[layer["op"]] += layer["cycles"]
    return {"vela_cycles_by_op": dict(by_op.most_common()),
            "vela_top_layers": sorted(layers, key=lambda x: -x["cycles"])[:top]}
