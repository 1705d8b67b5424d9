"""`arm-compile` run in-process on a small model file: stages, outputs, calibration, refusals, targets
from entry points. (The bundled MobileNetV2 runs end to end in test_ethosu_fresh_env.py.)"""

import json

import numpy as np
import pytest
import torch

from arm_ethosu import ethosu_report
from arm_tosa_core.compile_cli import main
from arm_tosa_core.compile_inputs import load_model, load_samples
from arm_tosa_core.compile_targets import CompileTarget, TargetFamily, load_families, resolve_target

MODEL_FILE = '''
import torch
from torch import nn


def make_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, 1, 1, groups=8),
                          nn.ReLU6(), nn.Conv2d(8, 4, 1))
    return model.eval(), (torch.randn(1, 3, 16, 16),)


def not_a_pair():
    return 3
'''


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "tiny_model.py"
    path.write_text(MODEL_FILE)
    return path


@pytest.fixture
def calibration(tmp_path):
    folder = tmp_path / "calib"
    folder.mkdir()
    rng = np.random.default_rng(0)
    np.save(folder / "a.npy", rng.standard_normal((3, 16, 16)).astype(np.float32))  # no batch dim
    np.save(folder / "b.npy", rng.standard_normal((3, 3, 16, 16)).astype(np.float32))  # 3 stacked
    torch.save(torch.randn(1, 3, 16, 16), folder / "c.pt")
    (folder / "notes.txt").write_text("ignored")
    return folder


def _run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_compile_factory_file_for_u55(model_file, calibration, tmp_path, capsys):
    pte = tmp_path / "out" / "tiny.pte"
    rc, out, err = _run(capsys, f"{model_file}:make_model", "--calibration", calibration, "-o", pte)
    assert rc == 0, err
    for i in range(1, 7):  # every stage announced and timed
        assert f"[{i}/6]" in err and "done in" in err
    assert "5 samples from" in err  # 1 + 3 + 1 calibration samples
    assert "warning" not in err
    assert pte.read_bytes()[4:6] == b"ET"
    report_dir = tmp_path / "out" / "tiny_report"
    assert json.loads((report_dir / "report.json").read_text()) == json.loads(ethosu_report(pte).to_json())
    assert (report_dir / "layers.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list(report_dir.glob("partition_0_summary_*.csv"))
    assert "npu cycles" in out and "ethos-u55-128" in out and "EthosUBackend" in out
    assert "max abs error vs the quantized PyTorch model: 0 " in out


def test_refuses_to_overwrite(model_file, tmp_path, capsys):
    pte = tmp_path / "m.pte"
    pte.write_bytes(b"keep me")
    rc, _, err = _run(capsys, f"{model_file}:make_model", "-o", pte, "--no-verify")
    assert rc == 1 and "exists; pass --force" in err and pte.read_bytes() == b"keep me"
    rc, _, err = _run(capsys, f"{model_file}:make_model", "-o", pte, "--force", "--no-verify",
                      "--target", "ethos-u85-256")
    assert rc == 0, err
    assert pte.read_bytes()[4:6] == b"ET"
    assert "warning: no --calibration folder" in err  # random data is used, and said so
    assert ethosu_report(pte).partitions[0].target == "ethos-u85-256"


def test_tosa_fp_target(model_file, tmp_path, capsys):
    rc, out, err = _run(capsys, f"{model_file}:make_model", "--target", "TOSA-1.0+FP", "-o", tmp_path / "fp.pte")
    assert rc == 0, err
    assert "skipped: TOSA-1.0+FP runs float" in err
    assert "TOSABackend" in out and "max abs error vs the PyTorch model" in out
    error = float(out.split("max abs error vs the PyTorch model: ")[1].split()[0])
    assert error < 1e-5


@pytest.mark.parametrize("argv,message", [
    (["{model}:make_model", "--target", "ethos-u99"], "unknown target 'ethos-u99'"),
    (["{model}:make_model", "--target", "TOSA-1.0+FP", "--system-config", "X"],
     "--system-config (Ethos-U (vela)) does not apply to target 'TOSA-1.0+FP'"),
    (["{model}:make_model", "--target", "TOSA-1.0+FP", "--target-sqnr", "30"], "--target-sqnr (Ethos-U"),
    (["{model}:make_model", "--target", "TOSA-1.0+FP", "--accuracy-report"], "runs float"),
    (["{model}:make_model", "--target", "vulkan", "--host-graph"], "--host-graph (Ethos-U (vela)) does not apply"),
    (["{model}:make_model", "--fp16"], "--fp16 (Vulkan delegate) does not apply to target 'ethos-u55-128'"),
    (["{model}:make_model", "--target", "TOSA-2.0+INT"], "TOSA"),
    (["{model}:nope"], "has no function 'nope'"),
    (["{model}:not_a_pair"], "must return (model, example_inputs)"),
    (["{model}"], "name the factory"),
    (["{model}:make_model", "--input-size", "64"], "--input-size applies to the bundled examples"),
    (["no_such_example"], "valid names"),
    (["{model}:make_model", "--memory-mode", "Dedicated_Sram"], "Shared_Sram or Sram_Only"),
    (["{model}:make_model", "--sram-limit", "64", "--vela-flags=--optimise Size"], "limit is 64 bytes"),
])  # fmt: skip
def test_errors_are_one_clear_line(model_file, tmp_path, capsys, argv, message):
    argv = [a.format(model=model_file) for a in argv] + ["-o", str(tmp_path / "x.pte")]
    rc, _, err = _run(capsys, *argv)
    assert rc == 1 and message in err and "Traceback" not in err
    assert not (tmp_path / "x.pte").exists()


def test_unknown_target_lists_the_known_ones(model_file, capsys):
    _, _, err = _run(capsys, f"{model_file}:make_model", "--target", "npu-9000")
    assert "ethos-u55-128" in err and "ethos-u85-2048" in err and "TOSA-1.0+INT" in err


def test_list_targets_and_examples(capsys):
    rc, out, _ = _run(capsys, "--list-targets")
    assert rc == 0 and "Ethos-U (vela): ethos-u55-32" in out and "TOSA: TOSA-1.0+INT" in out
    rc, out, _ = _run(capsys, "--list-examples")
    assert rc == 0 and "mobilenet_v2:" in out and "resnet18:" in out


def test_targets_come_from_entry_points():
    families = {f.family: f for f in load_families()}
    assert {"Ethos-U (vela)", "TOSA"} <= set(families)
    assert resolve_target("ethos-u65-512").name == "ethos-u65-512"
    assert resolve_target("TOSA-1.0+FP+INT").name == "TOSA-1.0+FP+INT"
    # a family another package would register
    mine = TargetFamily("Mine", ("my-npu",), lambda n: CompileTarget(n, dict, list) if n == "my-npu" else None)
    assert resolve_target("my-npu", [mine, *families.values()]).name == "my-npu"
    with pytest.raises(ValueError, match="Mine: my-npu"):
        resolve_target("ethos-u55-128", [mine])


def test_calibration_folder_errors(tmp_path):
    example = (torch.zeros(1, 3, 4, 4),)
    with pytest.raises(FileNotFoundError):
        load_samples(tmp_path / "missing", example)
    with pytest.raises(ValueError, match="no .npy or .pt files"):
        load_samples(tmp_path, example)
    np.save(tmp_path / "bad.npy", np.zeros((3, 5, 5), np.float32))
    with pytest.raises(ValueError, match=r"shape \(3, 5, 5\); the model's example input is \(1, 3, 4, 4\)"):
        load_samples(tmp_path, example)
    with pytest.raises(ValueError, match="takes 2 inputs"):
        load_samples(tmp_path, example * 2)


def test_load_bundled_example_with_size():
    loaded = load_model("mobilenet_v2", input_size=40, seed=1)
    assert loaded.example_inputs[0].shape == (1, 3, 40, 40) and not loaded.module.training
