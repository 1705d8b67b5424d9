"""`arm-compile --simulate`: the deployable .pte's command stream runs on runtime_cpp's NPU simulator,
bit for bit against the TOSA reference model, and its per-op record is named after vela's layers."""

import json

import pytest

import runtime_cpp
from arm_ethosu import ethosu_payloads, ethosu_report
from arm_ethosu.simulate import command_stream_start
from arm_ethosu.vela_runner import layer_kickoffs
from arm_tosa_core.compile_cli import main

# a strided conv, a depthwise conv, a sigmoid LUT and a 1x1 conv (one model factory line for arm-compile)
MODEL_FILE = ("import torch\nfrom torch import nn\n\ndef make_model():\n    torch.manual_seed(0)\n"
              "    return (nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, 1, 1, groups=8), "
              "nn.Sigmoid(), nn.Conv2d(8, 4, 1)).eval(), (torch.randn(1, 3, 16, 16),))\n")


def test_simulate_prints_the_record_beside_vela_and_macs_equal(tmp_path, capsys):
    (tmp_path / "tiny_model.py").write_text(MODEL_FILE)
    pte = tmp_path / "tiny.pte"
    rc = main([f"{tmp_path / 'tiny_model.py'}:make_model", "-o", str(pte), "--simulate", "--no-verify"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "simulator: bit-exact with the TOSA reference model" in out
    assert "vela cycles" in out and "sim MACs" in out
    record = json.loads((tmp_path / "tiny_report" / "simulation.json").read_text())
    (partition,) = ethosu_report(pte.read_bytes()).partitions
    assert record["bit_exact"] and record["max_abs_diff"] == 0.0
    assert record["macs"] == record["vela_macs"] == partition.nn_macs > 0
    layers = record["layers"]
    assert [x["name"] for x in layers] == [str(r["Name"]) for r in partition.layers]
    # every vela layer's MACs are those of the kick-offs named after it; the convolutions carry the
    # module names of the Ethos-U report and their weights' DMA
    assert all(x["macs"] == x["vela_macs"] for x in layers), layers
    convs = [x for x in layers if x["macs"]]
    assert [x["pytorch"].split(" ")[0] for x in convs] == ["0", "2", "4"]
    assert all("dma" in x["ops"] and x["dma_bytes"] > 0 for x in convs)
    (payload,) = ethosu_payloads(pte.read_bytes())  # every kick-off of the stream is in some layer
    assert sum(x["kickoffs"] for x in layers) == len(runtime_cpp.ethosu_work_record(payload)) > 0


def test_layer_kickoffs_read_vela_debug_database():
    xml = ('<debug source="x">\n<table name="perf">\n<![CDATA[\n"id","operator","name"\n7,"Conv2D","layer-1"\n'
           '9,"Add","layer-2"\n]]>\n</table>\n<table name="perf_debug">\n<![CDATA[\n"id","ofm_shape_w",'
           '"kernel_size_x","kernel_size_y"\n7,16,3,3\n9,8,1,1\n]]>\n</table>\n<table name="queue">\n'
           '<![CDATA[\n"offset","cmdstream_id","optimised_id","scheduled_id"\n120,1,5,9\n64,1,4,7\n]]>\n'
           '</table>\n</debug>\n')
    assert layer_kickoffs(xml) == [{"offset": 120, "layer": 1, "ofm_w": 8, "kernel_w": 1, "kernel_h": 1},
                                   {"offset": 64, "layer": 0, "ofm_w": 16, "kernel_w": 3, "kernel_h": 3}]


def test_command_stream_start_skips_the_driver_header():
    header = b"COP1" + bytes([1, 0, 0, 0]) + bytes(8) + bytes([5, 0, 0, 0]) + bytes([2, 0, 3, 0])
    assert command_stream_start(header + bytes(12)) == 24
    with pytest.raises(ValueError, match="no CmdStream"):
        command_stream_start(b"COP1" + bytes([9, 0, 0, 0]))
