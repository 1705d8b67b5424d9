"""Per-dispatch GPU time of a lowered program: which PyTorch layer costs the time on the Vulkan device.

The runtime brackets every dispatch with Vulkan timestamp queries when the environment variable
VKDG_PROFILE names a CSV path at load (a "%p" in it becomes one file per loaded partition) and rewrites
that CSV after each call: dispatch index, shader, the PyTorch module and op the dispatch came from (the
payload's "NAME" section, written by `payload.serialize`), calls, mean microseconds.

    report = profile_program(edge_or_pte, *inputs, runs=20)
    print(report.format_table())
    report.plot_png("vulkan_profile.png")

The bench runner (bench/vulkan_gpu/runner.cpp) writes the same CSV when VKDG_PROFILE is set there.
"""

from __future__ import annotations

import csv
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .runtime import _pte_bytes, device_name

ENV = "VKDG_PROFILE"


@dataclass
class DispatchTime:
    partition: int
    dispatch: int
    shader: str
    name: str  # '<module path>: <op>' (lower.source_name)
    calls: int
    mean_us: float


@dataclass
class VulkanProfile:
    device: str
    rows: list[DispatchTime] = field(default_factory=list)

    @property
    def total_us(self) -> float:
        return sum(r.mean_us for r in self.rows)

    def by_layer(self) -> list[tuple[str, float, int]]:
        """(layer, microseconds, dispatches), slowest first: a layer's dispatches summed."""
        acc: dict[str, list] = {}
        for r in self.rows:
            entry = acc.setdefault(r.name or f"dispatch {r.dispatch}", [0.0, 0])
            entry[0] += r.mean_us
            entry[1] += 1
        return sorted(((k, v[0], v[1]) for k, v in acc.items()), key=lambda t: -t[1])

    def format_table(self, top: int | None = None) -> str:
        """Per layer: GPU microseconds per call, share of the total, dispatch count."""
        total = self.total_us or 1.0
        rows = self.by_layer()[:top] if top else self.by_layer()
        width = max([len("layer")] + [len(n) for n, _, _ in rows])
        lines = [f"Vulkan GPU time per layer on {self.device} (timestamp queries, mean over "
                 f"{self.rows[0].calls if self.rows else 0} calls)",
                 f"{'layer':<{width}}  {'us':>9}  {'share':>6}  dispatches",
                 f"{'-' * width}  {'-' * 9}  {'-' * 6}  ----------"]
        lines += [f"{n:<{width}}  {us:9.1f}  {us / total:6.1%}  {k:10d}" for n, us, k in rows]
        lines.append(f"{'total':<{width}}  {self.total_us:9.1f}  {1:6.1%}  {len(self.rows):10d}")
        return "\n".join(lines)

    def plot_png(self, path: str | Path, top: int = 30) -> Path:
        """A horizontal bar chart of the `top` slowest layers (as the Ethos-U report draws vela layers)."""
        try:
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure
        except ImportError as e:
            raise RuntimeError("the profile PNG needs matplotlib: pip install matplotlib") from e
        rows = self.by_layer()[:top][::-1]
        fig = Figure(figsize=(10, 0.28 * len(rows) + 1.2))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        ax.barh(range(len(rows)), [us for _, us, _ in rows], color="#0091bd")
        ax.set_yticks(range(len(rows)), [n for n, _, _ in rows], fontsize=7)
        ax.set_xlabel("GPU time per call (us)")
        ax.set_title(f"Vulkan delegate on {self.device}: {self.total_us:.0f} us in {len(self.rows)} dispatches",
                     fontsize=9)
        fig.tight_layout()
        out = Path(path)
        fig.savefig(out, format="png", dpi=100)
        return out


def read_profile_csvs(paths: list[Path], device: str = "") -> VulkanProfile:
    """The CSVs the runtime wrote (one per partition, in the order given)."""
    prof = VulkanProfile(device)
    for part, p in enumerate(paths):
        with open(p, newline="") as f:
            for row in csv.DictReader(f):
                prof.rows.append(DispatchTime(part, int(row["dispatch"]), row["shader"], row["name"],
                                              int(row["calls"]), float(row["mean_us"])))
    return prof


def profile_program(program: Any, *inputs: torch.Tensor, runs: int = 10) -> VulkanProfile:
    """Load `program` (a lowered program or .pte) with profiling on, run it `runs` times, read the times.

    Loads its own method (not run_on_vulkan's cached one, which was loaded without timestamps)."""
    from executorch.runtime import Runtime

    device = device_name()
    data = _pte_bytes(program)
    with tempfile.TemporaryDirectory() as tmp:
        old = os.environ.get(ENV)
        os.environ[ENV] = str(Path(tmp) / "part_%p.csv")
        try:
            loaded = Runtime.get().load_program(data)
            method = loaded.load_method("forward")
        finally:
            if old is None:
                del os.environ[ENV]
            else:
                os.environ[ENV] = old
        for _ in range(runs):
            method.execute(list(inputs))
        csvs = sorted(Path(tmp).glob("part_*.csv"))
        if not csvs:
            raise RuntimeError(f"no per-dispatch times were written: {device} has no timestamp queries on its "
                               f"compute queue, or the program has no Vulkan partition")
        prof = read_profile_csvs(csvs, device)
        del method, loaded
    return prof
