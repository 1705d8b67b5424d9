"""EthosUBackend's contract: artifacts and report.json in the dump folder, vela's numbers reachable
from every form of the program, the memory budget checked at compile time, and the host-only TOSA
graph optional."""

import json

import arm_ethosu_test_flow as flow
import pytest
import torch
from executorch.exir import ExecutorchBackendConfig
from torch import nn

from arm_ethosu import (
    EthosUCompileSpec,
    EthosUReport,
    MemoryBudgetError,
    ethosu_payloads,
    ethosu_report,
    parse_binstream,
)
from arm_ethosu.vela_runner import read_vela_csv
from arm_tosa_core import ReferenceModelError, run_on_reference_model

torch.manual_seed(0)


@pytest.fixture(scope="module")
def two_partitions():
    """A model U55 splits in two (the stride-4 convolution stays on the CPU)."""
    model = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, 4, 1), nn.ReLU(),
                          nn.Conv2d(8, 4, 1))
    inputs = (torch.randn(1, 3, 17, 17),)
    return flow.quantize(model, inputs), inputs


def test_artifacts_and_report_json(two_partitions, tmp_path):
    quantized, inputs = two_partitions
    spec = EthosUCompileSpec("ethos-u55-128").dump_intermediate_artifacts_to(tmp_path)
    edge = flow.lower(quantized, inputs, spec)
    report = ethosu_report(edge)
    assert [p.name for p in report.partitions] == ["partition_0", "partition_1"]
    on_disk = json.loads((tmp_path / "report.json").read_text())
    # report.json has vela's wall time; the payloads (in the .pte) do not, so the .pte is reproducible
    assert all(p.pop("vela_seconds") > 0 for p in on_disk["partitions"])
    stored = json.loads(report.to_json())
    assert [p.pop("vela_seconds") for p in stored["partitions"]] == [0.0, 0.0]
    assert on_disk == stored
    for part in report.partitions:
        assert (tmp_path / f"{part.name}.tosa").is_file()
        (row,) = read_vela_csv(tmp_path / f"{part.name}_summary_Ethos_U55_High_End_Embedded.csv")
        for column in ("cycles_npu", "cycles_total", "nn_macs"):
            assert getattr(part, column) == row[column]
        assert part.sram_memory_used_bytes == round(row["sram_memory_used"] * 1024)
        assert part.inference_time == pytest.approx(row["inference_time"])
        assert part.layers and sum(r["Op Cycles"] for r in part.layers) == part.cycles_total
    assert set(json.loads((tmp_path / "report.json").read_text())["partitions"][0]) >= {
        "cycles_npu", "cycles_total", "inference_time", "sram_memory_used_bytes", "nn_macs", "layers"}


def test_pte_does_not_depend_on_the_output_folder(two_partitions, tmp_path):
    """Two folders, and the same folder twice: byte-identical .pte (no folder, wall time or vela's
    process-wide layer numbers inside), and each folder gets its artifacts under the partition stems."""
    quantized, inputs = two_partitions
    a, b = tmp_path / "a", tmp_path / "b" / "deeper"
    ptes = [flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u55-128").dump_intermediate_artifacts_to(d))
            .to_executorch().buffer for d in (a, b, a)]
    assert ptes[0] == ptes[1] == ptes[2]
    assert str(tmp_path).encode() not in ptes[0]
    for folder in (a, b):
        assert {p.name for p in folder.glob("partition_*")} >= {
            f"partition_{i}{suffix}" for i in range(2)
            for suffix in (".tosa", "_vela.npz", "_per-layer.csv", "_summary_Ethos_U55_High_End_Embedded.csv")}
        assert [p["name"] for p in json.loads((folder / "report.json").read_text())["partitions"]] == [
            "partition_0", "partition_1"]


def test_report_from_every_form_of_the_program(two_partitions, tmp_path):
    quantized, inputs = two_partitions
    edge = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u85-256"))
    from_edge = ethosu_report(edge).to_json()
    program = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False))
    (tmp_path / "m.pte").write_bytes(program.buffer)
    for form in (program, program.buffer, tmp_path / "m.pte", str(tmp_path / "m.pte")):
        assert ethosu_report(form).to_json() == from_edge
    assert EthosUReport.from_json(from_edge).cycles_total == ethosu_report(edge).cycles_total
    with pytest.raises(ValueError, match="no EthosUBackend delegate"):
        ethosu_report(quantized_edge_without_delegate(quantized, inputs))
    with pytest.raises(FileNotFoundError):
        ethosu_report(tmp_path / "missing.pte")


def quantized_edge_without_delegate(quantized, inputs):
    from executorch.exir import EdgeCompileConfig, to_edge

    return to_edge(torch.export.export(quantized, inputs),
                   compile_config=EdgeCompileConfig(_check_ir_validity=False))


def test_memory_budget_fails_at_compile_time(two_partitions, tmp_path):
    quantized, inputs = two_partitions
    spec = EthosUCompileSpec("ethos-u55-128").set_memory_limit(sram_bytes=256)
    spec.dump_intermediate_artifacts_to(tmp_path)
    with pytest.raises(MemoryBudgetError) as err:
        flow.lower(quantized, inputs, spec)
    assert err.value.limit == 256 and err.value.needed > 256
    assert "limit is 256 bytes" in str(err.value) and "user limit" in str(err.value)
    # the numbers it failed on are on disk
    assert json.loads((tmp_path / "report.json").read_text())["partitions"]


def test_without_the_tosa_graph(two_partitions):
    quantized, inputs = two_partitions
    with_graph = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u85-256").include_host_graph())
    without = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u85-256"))  # the default
    for a, b in zip(ethosu_payloads(with_graph), ethosu_payloads(without), strict=True):
        sa, sb = parse_binstream(a), parse_binstream(b)
        assert "tosa_graph" not in sb.extra and len(b) < len(a)
        assert (sa.cmd_data, sa.weight_data, sa.inputs, sa.outputs) == (
            sb.cmd_data, sb.weight_data, sb.inputs, sb.outputs)  # the device sees the same stream
    assert ethosu_report(without).partitions[0].cycles_npu == ethosu_report(with_graph).partitions[0].cycles_npu
    with pytest.raises((ValueError, ReferenceModelError), match=r"include_host_graph\(\) \(arm-compile --host-graph"):
        run_on_reference_model(without, *inputs)


def test_reference_model_runs_both_partitions_bit_exactly(two_partitions):
    quantized, inputs = two_partitions
    edge = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u65-256").include_host_graph())
    assert len(ethosu_payloads(edge)) == 2
    with torch.no_grad():
        assert torch.equal(run_on_reference_model(edge, *inputs), quantized(*inputs))
