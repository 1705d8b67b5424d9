"""describe_vgf/read_vgf report the converted graph's I/O, modules and constants."""

import json

import numpy as np
import pytest
import vgf_test_graphs as graphs

from arm_vgf.converter import convert_tosa_to_vgf
from arm_vgf.vgf_file import VgfFormatError, describe_vgf


def _io(entries):
    return [(e["shape"], e["dtype"]) for e in entries]


@pytest.mark.parametrize(
    "builder", [graphs.add_fp32, graphs.conv2d_fp32, graphs.conv2d_int8_rescale]
)
def test_io_matches_the_tosa_graph(builder, tmp_path):
    graph = builder()
    desc = describe_vgf(convert_tosa_to_vgf(graph.tosa, tmp_path))
    assert _io(desc["inputs"]) == [(list(t.shape), t.dtype.name) for t in graph.inputs]
    assert _io(desc["outputs"]) == [(list(t.shape), t.dtype.name) for t in graph.outputs]
    for entry in desc["inputs"] + desc["outputs"]:
        assert entry["scale"] is None and entry["zero_point"] is None  # filled by the caller
    bindings = [e["binding"] for e in desc["inputs"] + desc["outputs"]]
    assert len(set(bindings)) == len(bindings)
    assert [m["type"] for m in desc["modules"]] == ["graph"]
    assert desc["modules"][0]["spirv_bytes"] > 0
    assert json.loads(json.dumps(desc)) == desc


def test_int8_conv_weights_are_a_constant(tmp_path):
    desc = describe_vgf(
        convert_tosa_to_vgf(graphs.conv2d_int8_rescale(cout=8, cin=4, k=3).tosa, tmp_path)
    )
    weights = [c for c in desc["constants"] if c["shape"] == [8, 3, 3, 4]]
    assert len(weights) == 1
    assert weights[0]["vk_format"] == "VK_FORMAT_R8_SINT"
    assert weights[0]["nbytes"] == 8 * 3 * 3 * 4 * np.dtype(np.int8).itemsize


@pytest.mark.parametrize("blob", [b"", b"VGF", bytes(range(256))])
def test_non_vgf_bytes_are_refused(blob):
    with pytest.raises(VgfFormatError):
        describe_vgf(blob)
