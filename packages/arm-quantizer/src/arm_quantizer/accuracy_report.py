"""The quantization error report's data and its forms: terminal table, CSV, JSON, PNG.

Stages (SQNR in dB of a layer's output vs the float model, ``inf`` when exact):

* ``cumulative_db`` / ``isolated_db``: PT2E fake-quant (see ``accuracy.py``);
* ``tosa_cumulative_db`` / ``tosa_isolated_db``: the lowered TOSA INT graph on the reference model
  (see ``tosa_stage.py``); None where not measured (the layer stays on the CPU, or no lowered
  program was given);
* ``target_db``: the target's own result; None where the target has none that this machine can
  produce, and ``target_note`` says why (Ethos-U: no NPU or FVP here).
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

STAGE_COLUMNS = {  # field -> (table heading, plot label)
    "isolated_db": ("fq iso", "fake-quant, isolated"),
    "cumulative_db": ("fq cum", "fake-quant, cumulative"),
    "tosa_isolated_db": ("tosa iso", "TOSA reference model, isolated"),
    "tosa_cumulative_db": ("tosa cum", "TOSA reference model, cumulative"),
    "target_db": ("target", "target"),
}


@dataclass
class LayerError:
    """SQNR (dB) of one layer's output vs float per stage; None where a stage was not measured."""

    name: str
    label: str
    module: str
    op: str
    cumulative_db: float
    isolated_db: float
    tosa_cumulative_db: float | None = None
    tosa_isolated_db: float | None = None
    target_db: float | None = None


def _cell(value: float | None) -> str:
    if value is None:
        return "-"
    return "inf" if math.isinf(value) and value > 0 else f"{value:.2f}"


@dataclass
class AccuracyReport:
    """``layers`` in graph order; ``output_db``: the model output's SQNR per stage;
    ``target_note``: what the target column holds (why it is empty, or what it equals)."""

    layers: list[LayerError]
    output_db: dict[str, float] = field(default_factory=dict)
    samples: int = 0
    target_note: str = ""

    def stages(self) -> list[str]:
        """The stage fields measured for at least one layer, in STAGE_COLUMNS order."""
        return [k for k in STAGE_COLUMNS if any(getattr(r, k) is not None for r in self.layers)]

    def worst(self, n: int = 10, by: str = "isolated_db") -> list[LayerError]:
        """The ``n`` layers lowest in stage ``by`` (layers without that stage last)."""
        return sorted(self.layers, key=lambda r: (getattr(r, by) is None, getattr(r, by) or 0.0))[:n]

    def format_table(self, n: int = 10) -> str:
        """The ``n`` layers with the lowest isolated SQNR, every measured stage, and the output's SQNR."""
        stages = self.stages()
        head = ("layer (PyTorch)", "node", *(STAGE_COLUMNS[k][0] + " dB" for k in stages))
        rows = [(r.label, r.name, *(_cell(getattr(r, k)) for k in stages)) for r in self.worst(n)]
        widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
        lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True))
                 for row in [head, tuple("-" * w for w in widths), *rows]]
        out = ", ".join(f"{k} {v:.2f} dB" for k, v in self.output_db.items())
        lines.append(f"model output SQNR vs float ({self.samples} samples): {out}")
        if self.target_note:
            lines.append(f"target column: {self.target_note}")
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps({"samples": self.samples, "output_db": self.output_db,
                           "target_note": self.target_note,
                           "layers": [asdict(r) for r in self.layers]}, indent=2)

    def write_csv(self, path: str | Path) -> Path:
        out = Path(path)
        with out.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(asdict(self.layers[0])) if self.layers else ["name"])
            writer.writeheader()
            for r in self.layers:
                writer.writerow({k: ("" if v is None else v) for k, v in asdict(r).items()})
        return out

    def plot_png(self, path: str | Path) -> Path:
        """SQNR by layer (graph order): one line per measured stage, the output SQNR dashed."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=(max(6.0, 0.22 * len(self.layers)), 4.5))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        xs = range(len(self.layers))
        for key, marker in zip(self.stages(), "os^vd", strict=False):
            ys = [math.nan if getattr(r, key) is None else min(getattr(r, key), 120.0) for r in self.layers]
            ax.plot(xs, ys, marker + "-", markersize=3, label=STAGE_COLUMNS[key][1])
        if "fake_quant" in self.output_db:
            ax.axhline(self.output_db["fake_quant"], color="gray", linestyle="--", label="model output")
        ax.set_xticks(list(xs), [r.label for r in self.layers], rotation=90, fontsize=6)
        ax.set_ylabel("SQNR vs float (dB)")
        ax.set_title("Quantization error by layer")
        ax.legend(fontsize=7)
        fig.tight_layout()
        out = Path(path)
        fig.savefig(out, format="png", dpi=100)
        return out
