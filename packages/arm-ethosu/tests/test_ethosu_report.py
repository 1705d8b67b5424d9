"""EthosUReport (JSON, text table, PNG) and the memory-budget check."""

import json

import arm_ethosu_test_graphs as graphs
import pytest
from PIL import Image

from arm_ethosu import vela_config as vc
from arm_ethosu.report import EthosUReport, MemoryBudgetError, check_memory_budget
from arm_ethosu.vela_runner import compile_with_vela

TINY_INI = graphs.tiny_vela_ini("""
[Memory_Mode.Tiny_Sram]
const_mem_area=Axi1
arena_mem_area=Axi0
cache_mem_area=Axi0
arena_cache_size=512
""")


@pytest.fixture
def two_partitions(compiled):
    results = [
        compiled("conv2d_rescale", "ethos-u55-128"),
        compiled("add_rescaled", "ethos-u55-128"),
    ]
    return results, EthosUReport.from_vela(results, names=["conv", "add"])


def test_report_numbers_and_json(two_partitions):
    results, report = two_partitions
    conv, add = report.partitions
    assert conv.cycles_npu == results[0].summary["cycles_npu"]
    assert conv.cycles_total == results[0].summary["cycles_total"]
    assert conv.sram_memory_used_bytes == results[0].scratch_size  # vela's KiB -> bytes
    assert conv.off_chip_flash_memory_used_bytes == len(results[0].weight_data)
    assert (conv.nn_macs, add.nn_macs) == (18432, 0)
    assert (conv.cpu_ops, conv.npu_ops) == (0, 1)
    assert report.cycles_total == conv.cycles_total + add.cycles_total
    assert [{k: v for k, v in row.items() if k != "MAC Util"} for row in conv.layers] == results[0].per_layer
    data = json.loads(report.to_json())
    assert [p["name"] for p in data["partitions"]] == ["conv", "add"]
    assert data["partitions"][0]["layers"][0]["Op Cycles"] == conv.cycles_total
    assert EthosUReport.from_json(report.to_json()) == report


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
def test_mac_utilization_from_vela_macs_and_cycles(compiled, target):
    """Per layer: vela's MAC Count / (its Op Cycles x the NPU's MACs per cycle), and vela's own rounded
    Util% (MAC) agrees; per model: nn_macs / (NPU cycles x MACs per cycle)."""
    results = [compiled("conv2d_rescale", target), compiled("depthwise_rescale", target)]
    report = EthosUReport.from_vela(results, names=["conv", "dw"])
    per_cycle = int(target.rsplit("-", 1)[1])
    assert vc.macs_per_cycle(target) == per_cycle
    checked = 0
    for part, result in zip(report.partitions, results, strict=True):
        for row, vela_row in zip(part.layers, result.per_layer, strict=True):
            macs, cycles = vela_row["MAC Count"], vela_row["Op Cycles"]
            if macs and cycles:
                assert row["MAC Util"] == pytest.approx(macs / (cycles * per_cycle), rel=1e-12)
                assert 0 < row["MAC Util"] <= 1
                assert 100 * row["MAC Util"] == pytest.approx(float(vela_row["Util% (MAC)"]), abs=0.06)
                checked += 1
        assert part.mac_utilization == pytest.approx(
            result.summary["nn_macs"] / (result.summary["cycles_npu"] * per_cycle), rel=1e-12)
    assert checked >= 2
    conv, dw = report.partitions
    assert report.mac_utilization == pytest.approx(
        (conv.nn_macs + dw.nn_macs) / ((conv.cycles_npu + dw.cycles_npu) * per_cycle), rel=1e-12)
    assert json.loads(report.to_json())["mac_utilization"] == report.mac_utilization
    total_line = next(line for line in report.format_table().splitlines() if line.startswith("total"))
    assert f"{100 * report.mac_utilization:.1f}" in total_line.split()


def test_format_table(two_partitions):
    _, report = two_partitions
    conv, add = report.partitions
    text = report.format_table()
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["partition", "target", "npu", "cycles"]
    conv_line = next(line for line in lines if line.startswith("conv "))
    assert conv_line.split()[1:4] == ["ethos-u55-128", str(conv.cycles_npu), str(conv.cycles_total)]
    total_line = next(line for line in lines if line.startswith("total"))
    assert str(conv.cycles_total + add.cycles_total) in total_line.split()
    assert "conv (ethos-u55-128, Ethos_U55_High_End_Embedded, Shared_Sram): layers" in text
    assert any(line.split()[:3] == ["result-0", "Conv2D", "NPU"] for line in lines)
    assert any(line.split()[:3] == ["result-0", "Add", "NPU"] for line in lines)


def test_plot_png(two_partitions, tmp_path):
    _, report = two_partitions
    one = EthosUReport(report.partitions[:1]).plot_layers_png(tmp_path / "one.png")
    two = report.plot_layers_png(tmp_path / "two.png")
    assert two.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(one) as a, Image.open(two) as b:
        assert a.width == b.width == 800
        assert b.height > a.height  # one bar per layer: more layers, taller chart
    with pytest.raises(ValueError, match="no per-layer rows"):
        EthosUReport([]).plot_layers_png(tmp_path / "none.png")


def test_budget_passes_with_vela_numbers(compiled):
    shared = compiled("conv2d_rescale", "ethos-u55-128")
    use = check_memory_budget(shared, shared.limits, user_limit_bytes=768)
    assert use.sram_bytes == shared.summary["sram_memory_used"] * 1024 == 768
    dedicated = compiled("conv2d_rescale", "ethos-u65-256")
    use = check_memory_budget(EthosUReport.from_vela(dedicated), dedicated.limits)
    assert use.sram_bytes == dedicated.scratch_fast_size and use.sram_limit == 393216
    assert use.weight_bytes == len(dedicated.weight_data)


def test_budget_counts_weights_in_sram_only(compiled):
    r = compiled("conv2d_rescale", "ethos-u55-128", memory_mode="Sram_Only")
    use = check_memory_budget(r, r.limits)
    onchip = r.summary["on_chip_flash_memory_used"] * 1024  # vela's name for the SRAM consts
    assert use.sram_bytes == r.summary["sram_memory_used"] * 1024 + onchip
    assert use.sram_bytes == r.scratch_size + len(r.weight_data)


def test_budget_user_limit_error(compiled):
    r = compiled("conv2d_rescale", "ethos-u55-128")
    with pytest.raises(MemoryBudgetError) as err:
        check_memory_budget(r, r.limits, user_limit_bytes=700)
    assert (err.value.needed, err.value.limit) == (768, 700)
    assert "needs 768 bytes, limit is 700 bytes (over by 68)" in str(err.value)
    assert "Shared_Sram" in str(err.value)
    with pytest.raises(MemoryBudgetError, match="weights in OffChipFlash.*needs 480 bytes"):
        check_memory_budget(r, r.limits, user_weight_limit_bytes=100)
    other = vc.validate("ethos-u55-128", None, "Sram_Only")
    with pytest.raises(ValueError, match="compiled for ethos-u55-128/.*/Shared_Sram"):
        check_memory_budget(r, other)


def test_budget_error_from_custom_ini_sram_size(tmp_path):
    ini = tmp_path / "tiny.ini"
    ini.write_text(TINY_INI)
    r = compile_with_vela(graphs.conv2d_rescale(), "ethos-u55-128", "My_Sys", "Tiny_Sram", ini)
    assert r.limits == vc.validate("ethos-u55-128", "My_Sys", "Tiny_Sram", ini)
    with pytest.raises(MemoryBudgetError) as err:
        check_memory_budget(r, r.limits)
    assert (err.value.needed, err.value.limit) == (r.scratch_size, 512)
    assert "memory mode Tiny_Sram" in str(err.value)
