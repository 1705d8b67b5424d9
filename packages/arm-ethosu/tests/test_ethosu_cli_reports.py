"""`arm-compile --accuracy-report --target-sqnr` on a small model file: what they print and write."""

import json

from arm_tosa_core.compile_cli import main

MODEL_FILE = '''
import torch
from torch import nn


def make_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU()),
                          nn.Sequential(nn.Conv2d(8, 8, 3, 1, 1), nn.ReLU6()), nn.Conv2d(8, 4, 1))
    return model.eval(), (torch.randn(1, 3, 16, 16),)
'''


def test_accuracy_report_and_target_sqnr(tmp_path, capsys):
    path = tmp_path / "tiny.py"
    path.write_text(MODEL_FILE)
    out = tmp_path / "tiny.pte"
    status = main([f"{path}:make_model", "-o", str(out), "--accuracy-report", "--target-sqnr", "60",
                   "--calibration-samples", "3"])
    assert status == 0
    text = capsys.readouterr()
    assert "warning: no --calibration folder" in text.err  # random inputs: the same warning as today
    data = json.loads((tmp_path / "tiny_report" / "accuracy.json").read_text())
    assert [r["label"] for r in data["layers"]] == ["0.0 · conv2d", "1.0 · conv2d", "2 · conv2d"]
    assert data["output_db"]["fake_quant"] > 20
    # the .pte on the TOSA reference model matches the fake-quant model's SQNR closely
    assert abs(data["output_db"]["tosa_reference"] - data["output_db"]["fake_quant"]) < 1.0
    # per layer, the partition's TOSA graph on the reference model (every layer is on the NPU)
    for row in data["layers"]:
        assert abs(row["tosa_cumulative_db"] - row["cumulative_db"]) < 1.0, row
        assert row["tosa_isolated_db"] is not None and row["target_db"] is None
    assert data["target_note"].startswith("not measured on an NPU or FVP: on this machine the .pte runs")
    assert "tosa cum dB" in text.out and "target column: not measured" in text.out
    assert "verify on the Ethos-U NPU simulator" in text.out + text.err  # the .pte runs vela's stream here
    assert (tmp_path / "tiny_report" / "accuracy.png").stat().st_size > 0
    assert "model output SQNR vs float (3 samples)" in text.out
    assert "target 60.00 dB" in text.out and "get_symmetric_a16w8_quantization_config" in text.out
    assert "cycles (vela)" in text.out  # int16 compiles for Ethos-U: vela's own int16 numbers, not an estimate
    rows = (tmp_path / "tiny_report" / "layers.csv").read_text().splitlines()
    assert rows[0].startswith("partition,PyTorch,Module,Torch Op,TOSA Ops")
    assert any(",0.0 · conv2d," in r for r in rows[1:])
