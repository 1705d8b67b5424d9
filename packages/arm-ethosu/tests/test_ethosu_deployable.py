"""`arm-compile` writes the deployable .pte by default (vela's payload, no host graph), says what the
host graph costs, runs on the host as it is (the NPU simulator) and with --host-graph, and writes
reproducible bytes."""

import io
import re

import pytest
import torch

from arm_ethosu import ethosu_payloads, parse_binstream
from arm_ethosu.program_report import TOSA_BLOCK
from arm_tosa_core import run_on_reference_model
from arm_tosa_core.compile_cli import build_parser, compile_model, main

MODEL_FILE = '''
import torch
from torch import nn


def make_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.ReLU(), nn.Conv2d(8, 4, 1))
    return model.eval(), (torch.randn(1, 3, 12, 12),)
'''


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """Three compiles of one model: default into two different folders, and --host-graph."""
    root = tmp_path_factory.mktemp("deployable")
    model = root / "tiny_model.py"
    model.write_text(MODEL_FILE)
    outs = {}
    for name, extra in (("a", []), ("b", []), ("host", ["--host-graph"])):
        pte = root / f"folder_{name}" / "nested" / "tiny.pte"
        argv = [f"{model}:make_model", "-o", str(pte), "--calibration-samples", "2", *extra]
        out = io.StringIO()
        assert compile_model(build_parser().parse_args(argv), out=out, progress=None) == 0
        outs[name] = (pte.read_bytes(), out.getvalue(), pte)
    return outs


def test_same_model_and_flags_any_folder_give_identical_bytes(compiled):
    (a, _, path_a), (b, _, _) = compiled["a"], compiled["b"]
    assert a == b
    assert str(path_a.parent).encode() not in a and b"tiny_report" not in a  # no host path inside


def test_default_pte_is_deployable_and_reports_the_host_graph_cost(compiled):
    pte, out, _ = compiled["a"]
    host, host_out, _ = compiled["host"]
    for payload in ethosu_payloads(pte):
        assert TOSA_BLOCK not in parse_binstream(payload).extra
    assert all(TOSA_BLOCK in parse_binstream(p).extra for p in ethosu_payloads(host))
    cost = int(re.search(r"host graphs: (\d+) bytes", out).group(1))
    assert len(host) - len(pte) == cost and "--host-graph keeps them" in out
    assert "included (--host-graph)" in host_out
    # same vela command stream and weights in both
    assert [parse_binstream(p).cmd_data for p in ethosu_payloads(pte)] == [
        parse_binstream(p).cmd_data for p in ethosu_payloads(host)]


def test_host_graph_pte_and_deployable_pte_both_run_bit_exactly(compiled):
    x = torch.randn(1, 3, 12, 12)
    y = run_on_reference_model(compiled["host"][0], x)
    assert y.shape == (1, 4, 12, 12) and torch.isfinite(y).all()
    # the CLI's verify step ran the host twin through executorch.runtime against the quantized model
    err, mag = map(float, re.search(r"max abs error vs the quantized PyTorch model: (\S+) "
                                    r"\(max \|output\| (\S+)\)", compiled["a"][1]).groups())
    assert err <= 0.05 * mag
    # the deployable .pte runs too, with no flag: its command stream on runtime_cpp's NPU simulator
    assert torch.equal(run_on_reference_model(compiled["a"][0], x), y)


def test_cli_main_accepts_host_graph(tmp_path, capsys):
    model = tmp_path / "tiny_model.py"
    model.write_text(MODEL_FILE)
    rc = main([f"{model}:make_model", "-o", str(tmp_path / "t.pte"), "--host-graph", "--no-verify",
               "--calibration-samples", "1"])
    assert rc == 0, capsys.readouterr().err


def _python_api_edge(folder, host_graph: bool):
    """The README's Python flow on the same model and calibration as arm-compile's defaults."""
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from arm_ethosu import EthosUCompileSpec, EthosUPartitioner, EthosUQuantizer
    from arm_tosa_core.compile_inputs import load_model, random_samples

    folder.mkdir()
    (folder / "tiny_model.py").write_text(MODEL_FILE)
    model = load_model(f"{folder / 'tiny_model.py'}:make_model")
    spec = EthosUCompileSpec("ethos-u55-128").dump_intermediate_artifacts_to(folder / "out")
    if host_graph:
        spec = spec.include_host_graph()
    prepared = prepare_pt2e(torch.export.export(model.module, model.example_inputs).module(),
                            EthosUQuantizer(spec))
    with torch.no_grad():
        for sample in random_samples(model.example_inputs, 2, 0):
            prepared(*sample)
    return to_edge_transform_and_lower(torch.export.export(convert_pt2e(prepared), model.example_inputs),
                                       partitioner=[EthosUPartitioner(spec)],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))


def test_python_api_writes_the_cli_pte_by_default_and_the_host_twin_on_request(compiled, tmp_path):
    from executorch.exir import ExecutorchBackendConfig

    from arm_ethosu.deployable import pte_variants

    config = ExecutorchBackendConfig(extract_delegate_segments=False)
    cli_default, cli_host = compiled["a"][0], compiled["host"][0]
    for host_graph, cli in ((False, cli_default), (True, cli_host)):
        edge = _python_api_edge(tmp_path / f"host_{host_graph}", host_graph)
        pte = edge.to_executorch(config).buffer
        payloads = ethosu_payloads(pte)
        assert payloads and all((TOSA_BLOCK in parse_binstream(p).extra) == host_graph for p in payloads)
        assert [parse_binstream(p).cmd_data for p in payloads] == [
            parse_binstream(p).cmd_data for p in ethosu_payloads(cli)]
        # byte for byte the CLI's .pte once the wall time, vela's unnamed-layer numbers and the host
        # folder arm-compile leaves out are left out here too
        variants = pte_variants(edge)
        assert (variants.host if host_graph else variants.deployable) == cli
        if not host_graph:  # nothing to strip: lowered lean
            assert variants.host == variants.deployable
            assert abs(len(pte) - len(cli)) < len(compiled["host"][0]) - len(cli)
        else:
            x = torch.randn(1, 3, 12, 12)
            assert torch.equal(run_on_reference_model(pte, x), run_on_reference_model(cli, x))
