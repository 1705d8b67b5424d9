"""vela compiled in-process on small TOSA 1.0 INT graphs for U55, U65 and U85."""

import shlex

import arm_ethosu_test_graphs as graphs
import numpy as np
import pytest
from ethosu.vela import vela

from arm_ethosu.vela_runner import VelaCompileError, compile_with_vela

TARGETS = ("ethos-u55-128", "ethos-u65-256", "ethos-u85-256")
# graph -> (input shapes, output shape, MACs computed by hand)
GRAPHS = {
    "conv2d_rescale": ([(1, 8, 8, 4)], (1, 8, 8, 8), 8 * 8 * 8 * (3 * 3 * 4)),
    "add_rescaled": ([(1, 4, 4, 8), (1, 4, 4, 8)], (1, 4, 4, 8), 0),
    "depthwise_rescale": ([(1, 8, 8, 4)], (1, 8, 8, 4), 8 * 8 * 4 * (3 * 3)),
}
SUMMARY_COLUMNS = ("cycles_npu", "cycles_total", "inference_time", "sram_memory_used",
                   "dram_memory_used", "off_chip_flash_memory_used", "nn_macs")  # fmt: skip


def _six_d(shape):
    return (1,) * (6 - len(shape)) + tuple(shape)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("graph", list(GRAPHS))
def test_compile_small_graphs(compiled, graph, target):
    in_shapes, out_shape, macs = GRAPHS[graph]
    r = compiled(graph, target)
    assert [t.shape for t in r.inputs] == [_six_d(s) for s in in_shapes]
    assert [t.shape for t in r.outputs] == [_six_d(out_shape)]
    assert all(t.elem_size == 1 for t in r.inputs + r.outputs)  # int8 in and out
    for t in r.inputs + r.outputs:  # IO lives inside the scratch arena
        assert t.region == r.scratch_region and 0 <= t.offset
        assert t.offset + t.nbytes <= r.scratch_size
    assert len(r.cmd_data) > 0 and len(r.cmd_data) % 4 == 0  # 32-bit command words
    assert (len(r.weight_data) > 0) == (graph != "add_rescaled")
    assert all(c in r.summary for c in SUMMARY_COLUMNS)
    assert r.summary["nn_macs"] == macs
    assert 0 < r.summary["cycles_npu"] <= r.summary["cycles_total"]
    core_clock = r.limits.core_clock_hz
    assert r.summary["inference_time"] == pytest.approx(r.summary["cycles_total"] / core_clock)
    # per-layer rows add up to the network summary
    assert r.per_layer and all(row["Target"] == "NPU" for row in r.per_layer)
    assert sum(row["Op Cycles"] for row in r.per_layer) == r.summary["cycles_total"]
    assert sum(row["NPU"] for row in r.per_layer) == r.summary["cycles_npu"]
    assert sum(row["MAC Count"] for row in r.per_layer) == macs
    assert (r.cpu_ops, r.npu_ops) == (0, 1)  # vela's own count; TOSA has no CPU fallback
    assert "Network summary" in r.stdout


@pytest.mark.parametrize("target", TARGETS)
def test_memory_placement_matches_summary(compiled, target):
    r = compiled("conv2d_rescale", target)
    kib = 1024
    if target.startswith("ethos-u55"):  # Shared_Sram: arena in SRAM, weights in flash
        assert r.summary["sram_memory_used"] * kib == r.scratch_size
        assert r.summary["off_chip_flash_memory_used"] * kib == len(r.weight_data)
    else:  # Dedicated_Sram_384KB: arena and weights in DRAM, SRAM only as a cache
        assert r.summary["dram_memory_used"] * kib == r.scratch_size + len(r.weight_data)
        assert r.scratch_fast_size <= r.limits.arena_cache_size


@pytest.mark.parametrize("first", [[1, 4, 4, 8], [1, 1, 1, 8]])
def test_io_order_is_tosa_input_order(first):
    second = [1, 1, 1, 8] if first[1] == 4 else [1, 4, 4, 8]
    r = compile_with_vela(graphs.add_rescaled(shape_a=first, shape_b=second), "ethos-u55-128")
    assert [t.shape for t in r.inputs] == [_six_d(first), _six_d(second)]
    assert [t.shape for t in r.outputs] == [(1, 1, 1, 4, 4, 8)]


def test_files_kept_and_command_reproduces(tmp_path):
    r = compile_with_vela(graphs.conv2d_rescale(), "ethos-u85-256", work_dir=tmp_path, name="conv")
    assert r.npz_path == tmp_path / "conv_vela.npz"
    assert r.summary_csv_path == tmp_path / "conv_summary_Ethos_U85_SYS_DRAM_Mid.csv"
    assert r.per_layer_csv_path == tmp_path / "conv_per-layer.csv"
    with np.load(r.npz_path) as npz:
        assert npz["cmd_data"].tobytes() == r.cmd_data
        assert int(npz["scratch_size"]) == r.scratch_size
    first = r.cmd_data
    r.npz_path.unlink()
    argv = shlex.split(r.command_line)
    assert argv[0] == "vela"
    assert vela.main(argv[1:]) == 0  # the printed command line rebuilds the same stream
    with np.load(r.npz_path) as npz:
        assert npz["cmd_data"].tobytes() == first


def test_console_output_is_captured(capfd):
    r = compile_with_vela(graphs.add_rescaled(), "ethos-u55-128", extra_flags=["--verbose-all"])
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert "Before Graph Optimisation" in r.stdout  # printed by vela's C++ core to fd 1


def test_float_graph_error_names_reason_and_command(tmp_path, capfd):
    with pytest.raises(VelaCompileError) as err:
        compile_with_vela(graphs.float_add(), "ethos-u85-256", work_dir=tmp_path)
    e = err.value
    assert "Input data type not supported" in str(e)
    assert e.command.startswith("vela ") and str(tmp_path / "model.tosa") in e.command
    assert (tmp_path / "model.tosa").read_bytes() == graphs.float_add()
    assert capfd.readouterr() == ("", "")


def test_bad_arguments():
    conv = graphs.conv2d_rescale()
    with pytest.raises(ValueError, match="not a TOSA flatbuffer"):
        compile_with_vela(b"TFL3" * 4, "ethos-u55-128")
    with pytest.raises(TypeError, match="must be bytes"):
        compile_with_vela("model.tosa", "ethos-u55-128")
    with pytest.raises(ValueError, match="may not contain '--output-dir=x'"):
        compile_with_vela(conv, "ethos-u55-128", extra_flags=["--output-dir=x"])
    with pytest.raises(ValueError, match="valid targets"):
        compile_with_vela(conv, "ethos-u42")


def test_bad_extra_flag_value_is_vela_error(tmp_path):
    with pytest.raises(VelaCompileError, match="--optimise Bogus"):
        compile_with_vela(
            graphs.conv2d_rescale(), "ethos-u55-128", extra_flags=["--optimise", "Bogus"],
            work_dir=tmp_path,
        )  # fmt: skip
