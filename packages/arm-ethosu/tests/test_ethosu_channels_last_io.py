"""Channels-last I/O (`arm_tosa_core.channels_last_io`, `arm-compile --channels-last-io`): a program exported
with channels-last image inputs hands the NPU its bytes as NHWC, so the partition has no edge TRANSPOSE, and
the .pte computes what the reference model does on the lowered program.

Before the lowering followed each I/O tensor's dim order, such a .pte read the NHWC bytes as NCHW and
answered wrongly without a word (max error 1.18 on the model below)."""

import pytest
import torch
from arm_ethosu_test_flow import lower, quantize, tosa_graph_of
from tosa.Op import Op
from tosa.TosaGraph import TosaGraph

from arm_ethosu import EthosUCompileSpec, ethosu_payloads
from arm_tosa_core import channels_last_io, run_on_reference_model


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.Conv2d(8, 4, 1)).eval()


def _graph_io(tosa: bytes) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]], int]:
    """(input shapes, output shapes, TRANSPOSE count) of a TOSA flatbuffer's main block."""
    block = TosaGraph.GetRootAs(tosa, 0).Regions(0).Blocks(0)
    shapes = {block.Tensors(i).Name(): tuple(block.Tensors(i).ShapeAsNumpy())
              for i in range(block.TensorsLength())}
    transposes = sum(block.Operators(i).Op() == Op.TRANSPOSE for i in range(block.OperatorsLength()))
    return ([shapes[block.Inputs(i)] for i in range(block.InputsLength())],
            [shapes[block.Outputs(i)] for i in range(block.OutputsLength())], transposes)


@pytest.fixture(scope="module")
def channels_last_program():
    x = torch.randn(1, 3, 8, 6, generator=torch.Generator().manual_seed(1))
    quantized = quantize(_model(), (x,))
    (x_cl,) = channels_last_io((x,))
    spec = EthosUCompileSpec("ethos-u55-128").include_host_graph()
    edge = lower(quantized, (x_cl,), spec)
    return x, x_cl, quantized, edge


def test_channels_last_inputs_cross_as_nhwc_without_edge_transposes(channels_last_program):
    x, x_cl, quantized, edge = channels_last_program
    (payload,) = ethosu_payloads(edge)
    inputs, outputs, transposes = _graph_io(tosa_graph_of(payload))
    assert inputs == [(1, 8, 6, 3)] and outputs == [(1, 8, 6, 4)]  # NHWC at both edges
    assert transposes == 0
    # the same model exported with an NCHW input pays a TRANSPOSE at each edge
    (plain,) = ethosu_payloads(lower(quantized, (x,), EthosUCompileSpec("ethos-u55-128").include_host_graph()))
    assert _graph_io(tosa_graph_of(plain))[2] == 2


def test_channels_last_pte_matches_the_reference_model_bit_exactly(channels_last_program):
    x, x_cl, quantized, edge = channels_last_program
    with torch.no_grad():
        expected = quantized(x)
    on_reference = run_on_reference_model(edge, x_cl)
    assert torch.isfinite(on_reference).all()
    assert torch.equal(on_reference, expected)  # 0 LSB: the same integers as the quantized model
    pte = edge.to_executorch().buffer
    from_pte = run_on_reference_model(pte, x_cl)  # the C++ runtime, the delegate fed NHWC bytes
    assert from_pte.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(from_pte, expected)
    # the deployable .pte: vela's command stream on runtime_cpp's NPU simulator reads the NHWC bytes as they are
    deployable = lower(quantized, (x_cl,), EthosUCompileSpec("ethos-u55-128")).to_executorch().buffer
    assert torch.equal(run_on_reference_model(deployable, x_cl), expected)


def test_pte_refuses_a_contiguous_input_where_it_plans_channels_last(channels_last_program):
    x, _, _, edge = channels_last_program
    pte = edge.to_executorch().buffer
    with pytest.raises(ValueError, match=r"input 0 .* is channels-last \(dim order \(0, 2, 3, 1\)\).*"
                                         r"contiguous.*x\.to\(memory_format=torch\.channels_last\)"):
        run_on_reference_model(pte, x)


def test_arm_compile_channels_last_io(tmp_path, capsys):
    """`arm-compile --channels-last-io`: the written partition takes NHWC, and the .pte, run on the host with
    channels-last inputs, equals the quantized model (0 LSB)."""
    from arm_tosa_core.compile_cli import main

    (tmp_path / "m.py").write_text(
        "import torch\n\ndef make():\n    torch.manual_seed(0)\n"
        "    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), "
        "torch.nn.Conv2d(8, 4, 1))\n    return model.eval(), (torch.randn(1, 3, 8, 6),)\n")
    pte = tmp_path / "m.pte"
    rc = main([f"{tmp_path / 'm.py'}:make", "--channels-last-io", "--calibration-samples", "2", "-o", str(pte)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "max abs error vs the quantized PyTorch model: 0 " in out
    (tosa,) = (tmp_path / "m_report").glob("*.tosa")
    assert _graph_io(tosa.read_bytes()) == ([(1, 8, 6, 3)], [(1, 8, 6, 4)], 0)


def test_exposed_intermediates_stay_in_pytorch_layout(channels_last_program):
    """The debugging lowering exposes inner values in PyTorch's layout, channels-last I/O or not."""
    from arm_tosa_core.intermediates import run_with_intermediates

    x, x_cl, quantized, _ = channels_last_program
    # a program of its own: to_executorch on the shared one (the tests above) re-plans its partitions
    edge = lower(quantized, (x_cl,), EthosUCompileSpec("ethos-u55-128"))
    plain = lower(quantized, (x,), EthosUCompileSpec("ethos-u55-128"))

    out_cl, seen_cl = run_with_intermediates(edge, [x_cl], lambda node: True)
    out, seen = run_with_intermediates(plain, [x], lambda node: True)
    assert torch.equal(out_cl, out)
    four_d = [(a, b) for a, b in zip(seen.values(), seen_cl.values(), strict=True) if a.dim() == 4]
    assert len(seen) == len(seen_cl) and four_d
    for a, b in four_d:
        assert a.shape == b.shape and torch.isfinite(a).all() and torch.equal(a, b)
