"""Run a deployable Ethos-U .pte on runtime-cpp's NPU simulator and name its work after vela's layers.

    from arm_ethosu.simulate import simulate_pte
    result = simulate_pte(deployable_pte, lowered, inputs)   # lowered: with the host graph kept
    print(result.format_table())                              # per vela layer: vela's and the simulator's numbers

The simulator (runtime_cpp's EthosUBackend) executes vela's command stream, byte for byte what the
device gets; the same inputs go through the TOSA reference model on the TOSA graph vela compiled,
and the outputs must be equal bit for bit. The simulator's per-op record
(`runtime_cpp.ethosu_work_record`: one entry per kick-off) is grouped by vela layer with the
"queue" table of vela's debug database (`PartitionReport.layer_kickoffs`: the offset of each
layer's last kick-off), so each row carries vela's estimate (cycles, MACs) next to what the
stream does (kick-offs, MACs, DMA bytes), under the PyTorch name the Ethos-U report gives it.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from .binstream import parse_binstream
from .program_report import ethosu_payloads, partition_report_of

# Driver-action tags of the "COP1" header vela puts before the register command stream, and the
# words each takes (tag word included); CmdStream (2) ends the header.
_HEADER_WORDS = {0x01: 3, 0x03: 1, 0x04: 1, 0x05: 1}
_CMD_STREAM = 0x02


@dataclass
class SimulatedLayer:
    """One vela layer: vela's estimate and what its kick-offs in the command stream do."""

    partition: str
    name: str  # vela's layer name (per-layer CSV "Name")
    pytorch: str  # "module · op" of the layer's main TOSA operator ("" when unknown)
    operator: str  # vela's "NNG Operator"
    vela_cycles: int  # vela's "Op Cycles" estimate
    vela_macs: int  # vela's "MAC Count"
    kickoffs: int  # kick-offs of the command stream (stripes, DMAs) that belong to the layer
    ops: str  # their kinds, e.g. "conv x4, dma x1"
    macs: int  # on the MAC array, from the registers (simulator's record)
    dma_bytes: int


@dataclass
class SimulationResult:
    """Outputs of the simulated .pte, the comparison with the reference model, and the layers."""

    outputs: list[torch.Tensor]
    bit_exact: bool
    max_abs_diff: float
    layers: list[SimulatedLayer] = field(default_factory=list)

    @property
    def macs(self) -> int:
        return sum(layer.macs for layer in self.layers)

    @property
    def vela_macs(self) -> int:
        return sum(layer.vela_macs for layer in self.layers)

    def verdict(self) -> str:
        if self.bit_exact:
            return "bit-exact with the TOSA reference model"
        return f"DIFFERS from the TOSA reference model (max abs diff {self.max_abs_diff:g})"

    def format_table(self) -> str:
        head = ("partition", "vela layer", "PyTorch", "operator", "vela cycles", "vela MACs", "kick-offs",
                "sim ops", "sim MACs", "DMA bytes")
        rows = [(x.partition, x.name, x.pytorch, x.operator, x.vela_cycles, x.vela_macs, x.kickoffs, x.ops,
                 x.macs, x.dma_bytes) for x in self.layers]
        rows.append(("total", "", "", "", sum(x.vela_cycles for x in self.layers), self.vela_macs,
                     sum(x.kickoffs for x in self.layers), "", self.macs, sum(x.dma_bytes for x in self.layers)))
        widths = [max(len(str(v)) for v in col) for col in zip(head, *rows, strict=True)]
        lines = ["  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
                 for r in (head, *rows)]
        return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])

    def to_json(self) -> str:
        return json.dumps({"bit_exact": self.bit_exact, "max_abs_diff": self.max_abs_diff,
                           "macs": self.macs, "vela_macs": self.vela_macs,
                           "layers": [asdict(x) for x in self.layers]}, indent=2)


def command_stream_start(cmd_data: bytes) -> int:
    """Byte offset of the register command stream in vela's cmd_data (after the driver header)."""
    w = 1  # the "COP1" fourcc
    while 4 * w + 4 <= len(cmd_data):
        tag = struct.unpack_from("<I", cmd_data, 4 * w)[0] & 0xFF
        if tag == _CMD_STREAM:
            return 4 * (w + 1)
        if tag not in _HEADER_WORDS:
            break
        w += _HEADER_WORDS[tag]
    raise ValueError("cmd_data has no CmdStream driver action after its 'COP1' header: not a vela "
                     "Ethos-U55/U65 command stream")


def _layer_of(op: Any, ends: Sequence[dict[str, int]], start: int) -> dict[str, int] | None:
    """The queue entry a kick-off belongs to: the first layer whose last kick-off is at or after it
    (a DMA prefetches for the layer that follows it). Cascaded layers interleave their stripes, so a
    convolution whose kernel is not that layer's goes to the first later layer with its kernel
    (two cascaded layers with the same kernel stay with the first: their sum is still right)."""
    later = [e for e in ends if e["offset"] + start >= op.offset]
    if not later:
        return ends[-1] if ends else None
    kernel = set(op.kernel)
    if op.op in ("conv", "depthwise") and {later[0]["kernel_w"], later[0]["kernel_h"]} != kernel:
        for e in later[1:]:
            if {e["kernel_w"], e["kernel_h"]} == kernel:
                return e
    return later[0]


def layer_record(payload: bytes, partition: str = "") -> list[SimulatedLayer]:
    """The simulator's per-op record of one Ethos-U payload, grouped by vela layer (in vela's order)."""
    import runtime_cpp

    report = partition_report_of(payload)
    if not report.layer_kickoffs:
        raise ValueError("this payload's vela report has no layer_kickoffs (compiled by an older "
                         "arm_ethosu, before vela's debug database was kept): recompile it")
    start = command_stream_start(parse_binstream(payload).cmd_data)
    layers = [SimulatedLayer(partition or report.name, str(row.get("Name", "")), str(row.get("PyTorch", "")),
                             str(row.get("NNG Operator", "")), int(row.get("Op Cycles") or 0),
                             int(row.get("MAC Count") or 0), 0, "", 0, 0) for row in report.layers]
    kinds: list[dict[str, int]] = [{} for _ in layers]
    ends = sorted(report.layer_kickoffs, key=lambda e: e["offset"])
    for op in runtime_cpp.ethosu_work_record(payload):
        entry = _layer_of(op, ends, start)
        if entry is None:
            continue
        layer = layers[entry["layer"]]
        layer.kickoffs += 1
        layer.macs += op.macs
        layer.dma_bytes += op.dma_bytes
        kinds[entry["layer"]][op.op] = kinds[entry["layer"]].get(op.op, 0) + 1
    for layer, k in zip(layers, kinds, strict=True):
        layer.ops = ", ".join(f"{op} x{n}" for op, n in k.items())
    return layers


def _max_abs_diff(got: Sequence[torch.Tensor], expected: Sequence[torch.Tensor]) -> float:
    diff = 0.0
    for g, e in zip(got, expected, strict=True):
        if g.dtype != e.dtype or g.shape != e.shape:
            return float("inf")
        d = (g.double() - e.double()).abs()
        if d.numel():
            diff = max(diff, float(torch.nan_to_num(d, nan=float("inf")).max()))
    return diff


def simulate_pte(pte: bytes, lowered: Any, inputs: Sequence[torch.Tensor]) -> SimulationResult:
    """Run the deployable `pte` on the simulator and `lowered` (its TOSA graphs, host graph kept) on
    the TOSA reference model with the same `inputs`; compare bit for bit and record every layer."""
    from arm_tosa_core import run_on_reference_model
    from arm_tosa_core.pte_runtime import run_pte_on_runtime

    got = run_pte_on_runtime(pte, list(inputs))
    expected = run_on_reference_model(lowered, *inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    diff = _max_abs_diff(got, expected)
    layers = [x for i, payload in enumerate(ethosu_payloads(pte)) for x in layer_record(payload, f"partition_{i}")]
    return SimulationResult(got, diff == 0.0, diff, layers)


def write_simulation_json(result: SimulationResult, report_dir: str | Path) -> Path:
    """`report_dir`/simulation.json: the verdict, the MAC totals and every layer's row."""
    path = Path(report_dir) / "simulation.json"
    path.write_text(result.to_json())
    return path
