"""Cycle-driven search (`arm-compile --tune`): compile one partition several ways with vela, keep the
fewest NPU cycles that fit the SRAM limit.

A candidate is a graph form (a TOSA flatbuffer of the partition; every form the lowering offers computes
the same integers, see `graph_forms`) times a set of vela scheduling options that change cycles
(`SCHEDULES`: vela's optimisation strategy, cascading, buffering, chaining, forwarding, IFM reuse, and the
arena cache size set to the user's SRAM limit). The choice: the fewest NPU cycles among the candidates
that fit the SRAM limits and take no more total cycles than the default (see `_choose`).
Candidates compile over a process pool; the default
(the first form with no extra option, what a plain compile does) always finishes, the others get what
is left of the time cap.

Bounds: at most `TuneBounds.max_candidates` candidates (default 12), a time cap of
`TuneBounds.time_limit_s` (default 120 s) on the whole search, `TuneBounds.max_workers` processes
(default: the CPU count, at most 4). Deterministic for a given model and vela version: candidates are
listed in a fixed order and a tie goes to the earlier one; only a candidate cut off by the time cap
(recorded as such) can make two runs differ.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from .report import MemoryBudgetError, PartitionReport, check_memory_budget
from .vela_runner import VelaCompileError, VelaResult, compile_with_vela


@dataclass(frozen=True)
class TuneBounds:
    """How much the search may try: candidates, wall seconds, worker processes."""

    max_candidates: int = 12
    time_limit_s: float = 120.0
    max_workers: int = 4

    def __post_init__(self) -> None:
        if self.max_candidates < 1 or self.time_limit_s <= 0 or self.max_workers < 1:
            raise ValueError(f"tune bounds must be positive (at least 1 candidate and 1 worker), got {self}")


#: vela 5.2 scheduling options that change cycles, in the order they are tried (name -> flags).
#: "arena=sram-limit" is added only when the user gave an SRAM limit (see `schedules`).
SCHEDULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("default", ()),
    ("optimise=Size", ("--optimise", "Size")),
    ("no-cascading", ("--disable-cascading",)),
    ("no-buffering", ("--disable-buffering",)),
    ("no-ifm-reuse", ("--disable-ifm-reuse",)),
    ("no-chaining", ("--disable-chaining",)),
    ("no-fwd", ("--disable-fwd",)),
)


@dataclass(frozen=True)
class Candidate:
    """One way to compile: a graph form and vela flags (added after the spec's own)."""

    name: str
    form: str
    flags: tuple[str, ...]


@dataclass
class CandidateResult:
    """What one candidate gave. `error` is vela's reason or "timed out"; `fits` is the SRAM check."""

    name: str
    form: str
    flags: list[str]
    cycles_npu: int | None = None
    cycles_total: int | None = None
    sram_bytes: int | None = None
    fits: bool = False
    error: str | None = None


def schedules(sram_limit_bytes: int | None = None) -> list[tuple[str, tuple[str, ...]]]:
    """The scheduling options tried: `SCHEDULES`, plus vela's arena cache sized to the user's SRAM limit
    (so vela plans for the board's SRAM rather than the memory mode's) when one is given."""
    out = list(SCHEDULES)
    if sram_limit_bytes is not None:
        out.append(("arena=sram-limit", ("--arena-cache-size", str(int(sram_limit_bytes)))))
    return out


def candidates(forms: Sequence[str], sram_limit_bytes: int | None, bounds: TuneBounds) -> list[Candidate]:
    """Every (form, schedule) pair, the default first, cut to `bounds.max_candidates`."""
    out = [Candidate(name if form == forms[0] else f"{form}/{name}", form, flags)
           for form in forms for name, flags in schedules(sram_limit_bytes)]
    return out[:bounds.max_candidates]


def _compile_one(job: tuple) -> VelaResult | str:
    """Pool worker: one vela compile; the error text instead of raising (it crosses processes)."""
    tosa, target, system_config, memory_mode, config_ini, flags, work_dir, name = job
    try:
        return compile_with_vela(tosa, target, system_config, memory_mode, config_ini, flags,
                                 work_dir=work_dir, name=name)
    except VelaCompileError as exc:
        return exc.reason


@dataclass
class TuneOutcome:
    """The chosen candidate's vela result and form, and the record that goes into the report."""

    result: VelaResult
    form: str
    record: dict


def tune_partition(forms: Mapping[str, bytes], spec, name: str = "partition",
                   work_dir: str | Path | None = None, bounds: TuneBounds | None = None) -> TuneOutcome:
    """Compile every candidate of `forms` (name -> TOSA flatbuffer; the first is the plain compile's)
    for `spec` (an EthosUCompileSpec) and return the fewest NPU cycles within the SRAM limits.

    With `work_dir`, the chosen candidate's vela files are copied there as `<name>_*` (what a plain
    compile leaves). The default candidate's VelaCompileError propagates: a graph vela refuses is an
    error with or without tuning.
    """
    bounds = bounds or TuneBounds()
    if not forms:
        raise ValueError("tune_partition needs at least one graph form")
    cands = candidates(list(forms), spec.sram_limit_bytes, bounds)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="arm_ethosu_tune_") as tmp:
        jobs = [(forms[c.form], spec.target, spec.system_config, spec.memory_mode, spec.config_ini,
                 [*spec.extra_flags, *c.flags], str(Path(tmp) / str(i)), name) for i, c in enumerate(cands)]
        outputs = _run_jobs(jobs, bounds, started)
        if isinstance(outputs[0], str):  # the plain compile failed: the same error as without --tune
            return TuneOutcome(compile_with_vela(*jobs[0][:6], name=name), cands[0].form, {})
        results = [_measure(c, out, spec) for c, out in zip(cands, outputs, strict=True)]
        best = _choose(results)
        chosen = outputs[best]
        if work_dir is not None:
            for path in Path(jobs[best][6]).iterdir():
                if path.name.startswith(name) and path.suffix != ".tosa":
                    shutil.copy2(path, Path(work_dir) / path.name)
    record = {
        "chosen": cands[best].name,
        "bounds": asdict(bounds),
        "candidates": [asdict(r) for r in results],
    }
    return TuneOutcome(chosen, cands[best].form, record)


def _run_jobs(jobs: list[tuple], bounds: TuneBounds, started: float) -> list[VelaResult | str]:
    workers = min(len(jobs), bounds.max_workers, os.cpu_count() or 1)
    if workers == 1:
        out: list[VelaResult | str] = []
        for i, job in enumerate(jobs):
            late = i > 0 and time.perf_counter() - started > bounds.time_limit_s
            out.append("timed out" if late else _compile_one(job))
        return out
    # fork: the workers inherit the imported vela (spawn would re-import torch with this package)
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
    pool = ctx.Pool(workers)
    try:
        pending = [pool.apply_async(_compile_one, (job,)) for job in jobs]
        out = [pending[0].get()]  # the default always finishes
        for task in pending[1:]:
            left = bounds.time_limit_s - (time.perf_counter() - started)
            try:
                out.append(task.get(timeout=max(left, 0.0)))
            except multiprocessing.TimeoutError:
                out.append("timed out")
        return out
    finally:
        pool.terminate()
        pool.join()


def _measure(cand: Candidate, out: VelaResult | str, spec) -> CandidateResult:
    res = CandidateResult(cand.name, cand.form, list(cand.flags))
    if isinstance(out, str):
        res.error = out
        return res
    report = PartitionReport.from_vela(out)
    res.cycles_npu, res.cycles_total = report.cycles_npu, report.cycles_total
    try:
        use = check_memory_budget(report, out.limits, spec.sram_limit_bytes, spec.weight_limit_bytes)
        res.sram_bytes, res.fits = use.sram_bytes, True
    except MemoryBudgetError as exc:
        res.sram_bytes, res.error = exc.needed, f"over the memory limit: {exc.what}"
    return res


def _choose(results: list[CandidateResult]) -> int:
    """Index of the fewest NPU cycles among the candidates that fit and take no more total cycles than
    the default (then fewer total cycles, then list order); the default when none does (the backend's
    budget check then says why).

    The total-cycles guard matters: vela's Size strategy can cut NPU cycles while the memory traffic it
    adds doubles the total (the inference time), which no user wants from a tuner."""
    default_total = results[0].cycles_total
    ok = [i for i, r in enumerate(results)
          if r.fits and (default_total is None or not results[0].fits or r.cycles_total <= default_total)]
    if not ok:
        return 0
    return min(ok, key=lambda i: (results[i].cycles_npu, results[i].cycles_total, i))
