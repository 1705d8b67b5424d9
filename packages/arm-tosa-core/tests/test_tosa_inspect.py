"""tosa_inspect: operator counts of a graph built with tosa_serializer, cross-checked with flatc."""

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import tosa_reference_model
import tosa_serializer as ts

from arm_tosa_core.tosa_inspect import tosa_op_counts, tosa_summary


def _attr(kind: str, *args) -> ts.TosaSerializerAttribute:
    a = ts.TosaSerializerAttribute()
    getattr(a, kind)(*args)
    return a


def _graph() -> bytes:
    """NHWC->NCHW transpose, sigmoid, add, transpose back: 2 TRANSPOSE, 1 SIGMOID, 1 ADD."""
    ser = ts.TosaSerializer("", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)
    ser.addInputTensor(ts.TosaSerializerTensor("x", [1, 4, 5, 2], ts.DType.FP32))
    t = ser.addIntermediate([1, 2, 4, 5], ts.DType.FP32)
    s = ser.addIntermediate([1, 2, 4, 5], ts.DType.FP32)
    a = ser.addIntermediate([1, 2, 4, 5], ts.DType.FP32)
    out = ser.addOutput([1, 4, 5, 2], ts.DType.FP32)
    ser.addOperator(ts.Op.TRANSPOSE, ["x"], [t.name], _attr("TransposeAttribute", [0, 3, 1, 2]))
    ser.addOperator(ts.Op.SIGMOID, [t.name], [s.name], _attr("SigmoidAttribute"))
    ser.addOperator(ts.Op.ADD, [t.name, s.name], [a.name], _attr("AddAttribute"))
    ser.addOperator(
        ts.Op.TRANSPOSE, [a.name], [out.name], _attr("TransposeAttribute", [0, 2, 3, 1])
    )
    return ser.serialize()


def test_counts_of_serialized_graph() -> None:
    data = _graph()
    # The graph is real: the reference model runs it and computes x + sigmoid(x).
    x = np.random.default_rng(0).standard_normal((1, 4, 5, 2)).astype(np.float32)
    outputs, status = tosa_reference_model.run(data, [x])
    assert status == tosa_reference_model.GraphStatus.TOSA_VALID
    np.testing.assert_allclose(outputs[0], x + 1 / (1 + np.exp(-x)), rtol=1e-6, atol=1e-6)

    assert tosa_op_counts(data) == Counter({"TRANSPOSE": 2, "SIGMOID": 1, "ADD": 1})


def test_summary_and_path_input(tmp_path: Path) -> None:
    path = tmp_path / "g.tosa"
    path.write_bytes(_graph())
    summary = tosa_summary(path)
    assert summary.version == (1, 0, 0, False)
    assert summary.num_ops == 4
    assert summary.num_tensors == 5
    assert summary.op_counts["TRANSPOSE"] == 2
    assert len(summary.regions) == 1


def test_agrees_with_flatc_json_dump(tmp_path: Path) -> None:
    bindir = Path(sys.executable).parent
    flatc = shutil.which("flatc", path=str(bindir)) or shutil.which("flatc")
    schema = Path(ts.__file__).resolve().parent.parent / "bin" / "tosa.fbs"
    assert flatc and schema.is_file(), "flatc and tosa.fbs ship with tosa-tools"
    path = tmp_path / "g.tosa"
    path.write_bytes(_graph())
    subprocess.run(
        [flatc, "--json", "--strict-json", "--raw-binary", "-o", str(tmp_path), str(schema),
         "--", str(path)],
        check=True,
    )  # fmt: skip
    graph = json.loads((tmp_path / "g.json").read_text())
    ops = Counter(
        op["op"]
        for region in graph["regions"]
        for block in region["blocks"]
        for op in block["operators"]
    )
    assert ops == tosa_op_counts(path.read_bytes())


@pytest.mark.parametrize("bad", [b"", b"\x00" * 16, b"12345678TFL3"])
def test_rejects_non_tosa_bytes(bad: bytes) -> None:
    with pytest.raises(ValueError, match="not a TOSA flatbuffer"):
        tosa_op_counts(bad)
