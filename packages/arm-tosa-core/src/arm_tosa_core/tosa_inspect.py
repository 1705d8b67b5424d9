"""Read TOSA flatbuffers back: operator counts and a short summary, in process.

Uses the flatbuffers Python classes generated from ``tosa.fbs`` that the tosa-tools wheel ships as
the ``tosa`` package (``tosa.TosaGraph`` ...). They read the buffer lazily, so counting the operators
of a MobileNetV2-sized graph takes milliseconds and needs neither ``flatc`` nor temporary files.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tosa.DType import DType
from tosa.Op import Op
from tosa.TosaGraph import TosaGraph

__all__ = ["TosaSummary", "tosa_constant_types", "tosa_op_counts", "tosa_summary"]

_FILE_IDENTIFIER = b"TOSA"
_OP_NAMES: dict[int, str] = {
    value: name
    for name, value in vars(Op).items()
    if not name.startswith("_") and isinstance(value, int)
}
_DTYPE_NAMES: dict[int, str] = {
    value: name for name, value in vars(DType).items() if not name.startswith("_") and isinstance(value, int)
}


@dataclass(frozen=True)
class TosaSummary:
    """What a TOSA flatbuffer holds: its spec version, regions, and operator counts."""

    version: tuple[int, int, int, bool]  # (major, minor, patch, draft)
    regions: tuple[str, ...]
    num_tensors: int
    op_counts: Counter[str]

    @property
    def num_ops(self) -> int:
        """Total number of operators over every region and block."""
        return sum(self.op_counts.values())


def _load(tosa: bytes | bytearray | memoryview | str | Path) -> TosaGraph:
    if isinstance(tosa, str | Path):
        tosa = Path(tosa).read_bytes()
    buf = bytes(tosa)
    if len(buf) < 8 or buf[4:8] != _FILE_IDENTIFIER:
        raise ValueError(
            f"not a TOSA flatbuffer: expected file identifier {_FILE_IDENTIFIER!r} at bytes 4..8, "
            f"got {buf[4:8]!r} ({len(buf)} bytes); pass the bytes of a .tosa file "
            "(e.g. TosaSerializer.serialize())"
        )
    return TosaGraph.GetRootAs(buf, 0)


def _blocks(graph: TosaGraph):
    for r in range(graph.RegionsLength()):
        region = graph.Regions(r)
        for b in range(region.BlocksLength()):
            yield region, region.Blocks(b)


def tosa_op_counts(tosa_bytes: bytes | bytearray | memoryview | str | Path) -> Counter[str]:
    """Count operators by TOSA name (``"CONV2D"``, ``"TRANSPOSE"``, ...) over all regions and blocks.

    Accepts the serialized bytes (or a path to a ``.tosa`` file). Raises ValueError when the buffer
    does not carry the ``TOSA`` file identifier.
    """
    counts: Counter[str] = Counter()
    for _, block in _blocks(_load(tosa_bytes)):
        for i in range(block.OperatorsLength()):
            code = block.Operators(i).Op()
            counts[_OP_NAMES.get(code, f"UNKNOWN_OP_{code}")] += 1
    return counts


def tosa_summary(tosa_bytes: bytes | bytearray | memoryview | str | Path) -> TosaSummary:
    """Version, region names, tensor count and operator counts of a TOSA flatbuffer."""
    graph = _load(tosa_bytes)
    v = graph.Version()
    # The generated accessors are underscore-prefixed because the schema names them _major etc.
    version = (v._Major(), v._Minor(), v._Patch(), bool(v._Draft())) if v else (0, 0, 0, False)
    regions = tuple(
        graph.Regions(r).Name().decode() if graph.Regions(r).Name() else ""
        for r in range(graph.RegionsLength())
    )
    num_tensors = sum(block.TensorsLength() for _, block in _blocks(graph))
    return TosaSummary(version, regions, num_tensors, tosa_op_counts(tosa_bytes))


def tosa_constant_types(tosa_bytes: bytes | bytearray | memoryview | str | Path) -> dict[str, str]:
    """Each constant tensor (one with data) by name -> its TOSA type name (``"INT4"``, ``"INT8"``, ...):
    which weights a graph stores packed (4-bit) and which as bytes."""
    types: dict[str, str] = {}
    for _, block in _blocks(_load(tosa_bytes)):
        for i in range(block.TensorsLength()):
            tensor = block.Tensors(i)
            if tensor.DataLength():
                types[tensor.Name().decode()] = _DTYPE_NAMES.get(tensor.Type(), str(tensor.Type()))
    return types
