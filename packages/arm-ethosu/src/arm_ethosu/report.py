"""Cycle and memory report over the Ethos-U partitions of a model, and a memory-budget check.

Numbers are vela's estimates (not hardware measurements). vela's summary CSV states memory in
KiB; here every size is in bytes and the field names say so.

MAC utilization says how far a layer or a model is from the NPU's limit: MACs / (cycles x MACs the
NPU can do per cycle), a fraction in [0, 1]. Per layer it uses vela's ``Op Cycles`` (as vela's own
rounded ``Util% (MAC)`` does); per partition and per model the NPU cycles (``cycles_npu``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .layer_map import annotate_layers
from .vela_config import MemoryLimits, macs_per_cycle
from .vela_runner import VelaResult

# Per-layer columns shown in the text table: the PyTorch name (see layer_map), then vela's CSV names.
_LAYER_COLUMNS = ("PyTorch", "Name", "NNG Operator", "Target", "Op Cycles", "NPU", "Staging Usage", "MAC Count",
                  "MAC util %")
#: The per-layer key (a fraction) this report adds to vela's columns.
LAYER_MAC_UTIL = "MAC Util"
# Columns of layers.csv: the PyTorch names first, then every column vela wrote.
_TORCH_COLUMNS = ("partition", "PyTorch", "Module", "Torch Op", "TOSA Ops", "Node")


def _kib_to_bytes(value: object) -> int:
    return round(float(value) * 1024)


@dataclass
class PartitionReport:
    """One vela-compiled partition. ``layers`` are vela's per-layer CSV rows (vela's names)."""

    name: str
    target: str
    system_config: str
    memory_mode: str
    cycles_npu: int
    cycles_total: int
    inference_time: float
    sram_memory_used_bytes: int
    dram_memory_used_bytes: int
    on_chip_flash_memory_used_bytes: int
    off_chip_flash_memory_used_bytes: int
    nn_macs: int
    cpu_ops: int
    npu_ops: int
    cmd_bytes: int
    weight_bytes: int
    scratch_size: int
    scratch_fast_size: int
    layers: list[dict[str, int | float | str]] = field(default_factory=list)
    vela_seconds: float = 0.0  # wall time of the vela compile (set by EthosUBackend)
    mac_utilization: float = 0.0  # nn_macs / (cycles_npu x macs_per_cycle(target))
    tune: dict | None = None  # arm-compile --tune: every candidate and its cycles (see arm_ethosu.tune)
    # Where each layer row's kick-offs end in the command stream (vela_runner.layer_kickoffs): how
    # arm_ethosu.simulate names the simulator's per-op record after vela's layers
    layer_kickoffs: list[dict[str, int]] = field(default_factory=list)

    @classmethod
    def from_vela(cls, result: VelaResult, name: str = "partition_0",
                  debug_map: Sequence[dict] | None = None) -> PartitionReport:
        """Take the numbers from a ``VelaResult`` (its summary CSV, per-layer CSV and npz).

        ``debug_map`` is the lowered graph's ``TosaGraph.debug_map``; with it every layer row gets
        its PyTorch name (``PyTorch``, ``Module``, ``Torch Op``, ``TOSA Ops``: see ``layer_map``).
        """
        s = result.summary
        try:
            report = cls(
                name=name,
                target=result.target,
                system_config=result.system_config,
                memory_mode=result.memory_mode,
                cycles_npu=int(s["cycles_npu"]),
                cycles_total=int(s["cycles_total"]),
                inference_time=float(s["inference_time"]),
                sram_memory_used_bytes=_kib_to_bytes(s["sram_memory_used"]),
                dram_memory_used_bytes=_kib_to_bytes(s["dram_memory_used"]),
                on_chip_flash_memory_used_bytes=_kib_to_bytes(s["on_chip_flash_memory_used"]),
                off_chip_flash_memory_used_bytes=_kib_to_bytes(s["off_chip_flash_memory_used"]),
                nn_macs=int(s["nn_macs"]),
                cpu_ops=result.cpu_ops,
                npu_ops=result.npu_ops,
                cmd_bytes=len(result.cmd_data),
                weight_bytes=len(result.weight_data),
                scratch_size=result.scratch_size,
                scratch_fast_size=result.scratch_fast_size,
                layers=[dict(row) for row in result.per_layer],
                layer_kickoffs=list(result.layer_kickoffs),
            )
        except KeyError as exc:
            raise ValueError(
                f"vela summary has no column {exc}; columns are {sorted(s)} (vela output changed?)"
            ) from exc
        if debug_map is not None:
            annotate_layers(report.layers, debug_map)
        report.add_mac_utilization()
        return report

    def add_mac_utilization(self) -> None:
        """Set ``mac_utilization`` and each layer's ``MAC Util`` from vela's MACs and cycles."""
        per_cycle = macs_per_cycle(self.target)
        self.mac_utilization = mac_utilization(self.nn_macs, self.cycles_npu, per_cycle)
        for row in self.layers:
            row[LAYER_MAC_UTIL] = mac_utilization(row.get("MAC Count"), row.get("Op Cycles"), per_cycle)

    def peak_staging_layer(self) -> dict | None:
        """The layer row with the largest SRAM staging usage (vela's ``Staging Usage``)."""
        return max(self.layers, key=lambda r: float(r.get("Staging Usage", 0) or 0), default=None)


def mac_utilization(macs: object, cycles: object, per_cycle: int) -> float:
    """MACs / (cycles x MACs per cycle); 0.0 for a layer without cycles or MACs (a CPU or copy layer)."""
    macs, cycles = float(macs or 0), float(cycles or 0)
    return macs / (cycles * per_cycle) if macs > 0 and cycles > 0 else 0.0


def number_unnamed_layers(layers: list[dict]) -> None:
    """vela names unnamed layers '#<n>' from a process-wide counter: number them from 0 instead, so the
    same model gives the same rows in every compile."""
    ids = sorted({int(r["Name"][1:]) for r in layers
                  if isinstance(r.get("Name"), str) and r["Name"][1:].isdigit() and r["Name"][0] == "#"})
    rank = {old: new for new, old in enumerate(ids)}
    for row in layers:
        name = row.get("Name")
        if isinstance(name, str) and name[:1] == "#" and name[1:].isdigit():
            row["Name"] = f"#{rank[int(name[1:])]}"


@dataclass
class EthosUReport:
    """Per-partition vela numbers for one model."""

    partitions: list[PartitionReport]

    @classmethod
    def from_vela(
        cls, results: VelaResult | Sequence[VelaResult], names: Sequence[str] | None = None
    ) -> EthosUReport:
        """Build from one or several ``VelaResult`` (one per delegated partition)."""
        results = [results] if isinstance(results, VelaResult) else list(results)
        names = (
            list(names) if names is not None else [f"partition_{i}" for i in range(len(results))]
        )
        if len(names) != len(results):
            raise ValueError(f"got {len(names)} names for {len(results)} vela results")
        return cls([PartitionReport.from_vela(r, n) for r, n in zip(results, names, strict=True)])

    @property
    def cycles_total(self) -> int:
        return sum(p.cycles_total for p in self.partitions)

    @property
    def cpu_ops(self) -> int:
        return sum(p.cpu_ops for p in self.partitions)

    @property
    def mac_utilization(self) -> float:
        """The model's MACs / (its NPU cycles x MACs per cycle), over every partition."""
        macs = sum(p.nn_macs for p in self.partitions)
        capacity = sum(p.cycles_npu * macs_per_cycle(p.target) for p in self.partitions)
        return macs / capacity if macs > 0 and capacity > 0 else 0.0

    def to_json(self, indent: int | None = 2) -> str:
        """JSON text: ``{"mac_utilization": ..., "partitions": [{field: value, ..., "layers": [...]}, ...]}``."""
        return json.dumps({"mac_utilization": self.mac_utilization, **asdict(self)}, indent=indent)

    @classmethod
    def from_json(cls, text: str) -> EthosUReport:
        """Inverse of ``to_json``."""
        data = json.loads(text)
        return cls([PartitionReport(**p) for p in data["partitions"]])

    def format_table(self) -> str:
        """A plain-text table: one line per partition, then each partition's layers."""
        head = (
            "partition",
            "target",
            "npu cycles",
            "total cycles",
            "time us",
            "SRAM B",
            "DRAM B",
            "flash B",
            "MACs",
            "MAC util %",
            "CPU ops",
        )
        rows = [
            (
                p.name,
                p.target,
                p.cycles_npu,
                p.cycles_total,
                f"{p.inference_time * 1e6:.3f}",
                p.sram_memory_used_bytes,
                p.dram_memory_used_bytes,
                p.off_chip_flash_memory_used_bytes + p.on_chip_flash_memory_used_bytes,
                p.nn_macs,
                f"{100 * p.mac_utilization:.1f}",
                p.cpu_ops,
            )
            for p in self.partitions
        ]
        if len(self.partitions) > 1:
            rows.append(
                (
                    "total",
                    "",
                    sum(p.cycles_npu for p in self.partitions),
                    self.cycles_total,
                    f"{sum(p.inference_time for p in self.partitions) * 1e6:.3f}",
                    "",
                    "",
                    "",
                    sum(p.nn_macs for p in self.partitions),
                    f"{100 * self.mac_utilization:.1f}",
                    self.cpu_ops,
                )
            )
        parts = [_table(head, rows)]
        for p in self.partitions:
            parts.append(f"\n{p.name} ({p.target}, {p.system_config}, {p.memory_mode}): layers")
            layer_rows = [tuple(_layer_cell(row, c) for c in _LAYER_COLUMNS) for row in p.layers]
            parts.append(
                _table(_LAYER_COLUMNS, layer_rows) if layer_rows else "  (no per-layer data)"
            )
        for p in self.partitions:
            if p.tune:
                parts.append(f"\n{p.name}: --tune candidates (chosen: {p.tune['chosen']})")
                parts.append(_table(("candidate", "vela flags", "npu cycles", "total cycles", "SRAM B", "result"),
                                    [(c["name"], " ".join(c["flags"]) or "-", c["cycles_npu"] or "",
                                      c["cycles_total"] or "", c["sram_bytes"] or "",
                                      "chosen" if c["name"] == p.tune["chosen"] else (c["error"] or "fits"))
                                     for c in p.tune["candidates"]]))
        parts.append("\nby PyTorch module (layers of one module grouped)")
        parts.append(_table(("module", "layers", "Op Cycles", "vela layers"), self.by_module()))
        return "\n".join(parts)

    def by_module(self) -> list[tuple[str, int, int, str]]:
        """(module path, number of vela layers, summed Op Cycles, vela layer names), first-seen order."""
        groups: dict[str, list[dict]] = {}
        for p in self.partitions:
            for row in p.layers:
                groups.setdefault(str(row.get("Module") or "(top level)"), []).append(row)
        return [(m, len(rows), sum(int(float(r.get("Op Cycles", 0) or 0)) for r in rows),
                 ", ".join(str(r.get("Name", "?")) for r in rows)) for m, rows in groups.items()]

    def write_layers_csv(self, path: str | Path) -> Path:
        """Every layer row of every partition, PyTorch names first, then vela's own columns."""
        import csv

        vela_cols: list[str] = []
        for p in self.partitions:
            for row in p.layers:
                vela_cols += [k for k in row if k not in _TORCH_COLUMNS and k not in vela_cols]
        out = Path(path)
        with out.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=[*_TORCH_COLUMNS, *vela_cols])
            writer.writeheader()
            for p in self.partitions:
                for row in p.layers:
                    writer.writerow({"partition": p.name, **row})
        return out

    def plot_sram_png(self, path: str | Path, limit_bytes: int | None = None) -> Path:
        """Bar chart of SRAM in use per layer (vela's ``Staging Usage``), the limit as a red line."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        labels = [_layer_label(p, r) for p in self.partitions for r in p.layers]
        used = [float(r.get("Staging Usage", 0) or 0) for p in self.partitions for r in p.layers]
        if not labels:
            raise ValueError("no per-layer rows to plot (vela's --verbose-performance output)")
        fig = Figure(figsize=(8, 1.2 + 0.35 * len(labels)))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        peak = max(range(len(used)), key=used.__getitem__)
        colors = ["#d62728" if i == peak else "#0091bd" for i in range(len(used))]
        ax.barh(range(len(labels)), used, color=colors)
        ax.set_yticks(range(len(labels)), labels)
        ax.invert_yaxis()
        if limit_bytes:
            ax.axvline(limit_bytes, color="red", linestyle="--", label=f"limit {limit_bytes} B")
            ax.legend(loc="lower right")
        ax.set_xlabel("SRAM in use (bytes, vela staging usage)")
        ax.set_title(f"Ethos-U SRAM per layer (peak: {labels[peak]})")
        fig.tight_layout()
        out = Path(path)
        fig.savefig(out, format="png", dpi=100)
        return out

    def plot_layers_png(self, path: str | Path) -> Path:
        """Write a horizontal bar chart of per-layer cycles ("Op Cycles") to a PNG file."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        labels, cycles, utils = [], [], []
        for p in self.partitions:
            for row in p.layers:
                labels.append(_layer_label(p, row))
                cycles.append(float(row.get("Op Cycles", 0)))
                utils.append(float(row.get(LAYER_MAC_UTIL, 0) or 0))
        if not labels:
            raise ValueError(
                "no per-layer rows to plot: compile with vela's --verbose-performance "
                "(compile_with_vela always passes it)"
            )
        fig = Figure(figsize=(8, 1.2 + 0.35 * len(labels)))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        pos = list(range(len(labels)))
        ax.barh(pos, cycles, color="#0091bd")
        for y, (c, u) in enumerate(zip(cycles, utils, strict=True)):
            if u > 0:  # how far the layer is from the NPU's MAC limit, at the end of its bar
                ax.text(c, y, f" {100 * u:.0f} % MAC", va="center", fontsize=7)
        ax.set_yticks(pos, labels)
        ax.invert_yaxis()  # first layer on top, in execution order
        ax.set_xlabel("cycles (vela estimate); label: MAC utilization")
        ax.set_title(f"Ethos-U per-layer cycles (model MAC utilization {100 * self.mac_utilization:.1f} %)")
        fig.tight_layout()
        out = Path(path)
        fig.savefig(out, format="png", dpi=100)
        return out


def _layer_label(p: PartitionReport, row: dict) -> str:
    """``features.18.0 · conv2d [layer-152 Conv2D]``; vela's name alone when no map was kept."""
    vela = f"{row.get('Name', '?')} {row.get('NNG Operator', '?')}"
    torch_name = row.get("PyTorch")
    return f"{torch_name} [{vela}]" if torch_name else f"{p.name}: {vela}"


def _layer_cell(row: dict, column: str) -> str:
    if column == "MAC util %":
        return f"{100 * float(row.get(LAYER_MAC_UTIL, 0) or 0):.1f}"
    return _fmt(row.get(column, ""))


def _fmt(value: object) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [list(map(str, head))] + [[_fmt(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    lines = [
        "  ".join(
            c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


class MemoryBudgetError(ValueError):
    """A compiled model needs more memory than the system/memory mode or the user allows."""

    def __init__(self, what: str, needed: int, limit: int, advice: str) -> None:
        self.what, self.needed, self.limit = what, needed, limit
        super().__init__(
            f"{what}: needs {needed} bytes, limit is {limit} bytes (over by "
            f"{needed - limit}). {advice}"
        )


@dataclass(frozen=True)
class MemoryUse:
    """What ``check_memory_budget`` computed (bytes)."""

    sram_bytes: int
    sram_limit: int | None
    weight_bytes: int
    arena_bytes: int


def check_memory_budget(
    report_or_result: EthosUReport | PartitionReport | VelaResult,
    limits: MemoryLimits,
    user_limit_bytes: int | None = None,
    user_weight_limit_bytes: int | None = None,
) -> MemoryUse:
    """Raise ``MemoryBudgetError`` if the compiled partitions do not fit; else return the use.

    SRAM need = the largest per-partition scratch held in SRAM (the arena when the memory mode
    puts it there, plus the fast scratch; partitions run one at a time) + all weights held in
    SRAM (Sram_Only). It must fit the mode's ``arena_cache_size`` when the .ini gives one, and
    ``user_limit_bytes`` (the SRAM your board gives the NPU). Weights (all partitions) must fit
    the address space and ``user_weight_limit_bytes`` (flash/DRAM set aside for them).
    """
    if isinstance(report_or_result, VelaResult):
        parts = [PartitionReport.from_vela(report_or_result)]
    elif isinstance(report_or_result, PartitionReport):
        parts = [report_or_result]
    else:
        parts = list(report_or_result.partitions)
    for p in parts:
        compiled_for = (p.target, p.system_config, p.memory_mode)
        if compiled_for != (limits.target, limits.system_config, limits.memory_mode):
            raise ValueError(
                f"partition {p.name} was compiled for {'/'.join(compiled_for)} but the limits are "
                f"for {limits.target}/{limits.system_config}/{limits.memory_mode}; pass the "
                "limits of that compile (VelaResult.limits)"
            )
    scratch_in_sram = max(
        (
            (p.scratch_size if limits.arena_area == "Sram" else 0)
            + (p.scratch_fast_size if limits.cache_area == "Sram" else 0)
            for p in parts
        ),
        default=0,
    )
    weights = sum(p.weight_bytes for p in parts)
    sram = scratch_in_sram + (weights if limits.const_in_sram else 0)
    arena = max((p.scratch_size for p in parts), default=0)
    mode = f"system config {limits.system_config}, memory mode {limits.memory_mode}"
    peaks = [(float(r.get("Staging Usage", 0) or 0), p, r) for p in parts
             if (r := p.peak_staging_layer()) is not None]
    if peaks:
        _, p, r = max(peaks, key=lambda t: t[0])
        mode += f"; peak SRAM staging at layer {_layer_label(p, r)} ({r.get('Staging Usage')} B)"
    if limits.sram_limit is not None and sram > limits.sram_limit:
        raise MemoryBudgetError(
            f"SRAM for {mode}",
            sram,
            limits.sram_limit,
            "Pick a memory mode with more SRAM (e.g. Dedicated_Sram_512KB on U65/U85), compile "
            "with extra_flags=['--optimise', 'Size'], or shrink the model.",
        )
    if user_limit_bytes is not None and sram > user_limit_bytes:
        raise MemoryBudgetError(
            f"SRAM ({mode}) against the user limit",
            sram,
            int(user_limit_bytes),
            "Raise user_limit_bytes if the board has more SRAM, use a Dedicated_Sram mode "
            "(U65/U85), compile with extra_flags=['--optimise', 'Size'], or shrink the model.",
        )
    for what, size in (("scratch arena", arena), ("weights", weights)):
        if size > limits.address_limit:
            raise MemoryBudgetError(
                f"{what} for {limits.target}",
                size,
                limits.address_limit,
                "The NPU cannot address it; shrink the model.",
            )
    if user_weight_limit_bytes is not None and weights > user_weight_limit_bytes:
        raise MemoryBudgetError(
            f"weights in {limits.const_area} against the user limit",
            weights,
            int(user_weight_limit_bytes),
            "Raise user_weight_limit_bytes or shrink/prune the model.",
        )
    return MemoryUse(
        sram_bytes=sram, sram_limit=limits.sram_limit, weight_bytes=weights, arena_bytes=arena
    )
