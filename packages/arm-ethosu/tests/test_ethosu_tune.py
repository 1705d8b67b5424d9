"""`--tune` (EthosUCompileSpec.enable_tune): every candidate compiled and recorded, the fewest NPU cycles
kept (never more than the plain compile's), bounded, deterministic, and the chosen form bit-exact on the
TOSA reference model."""

import arm_ethosu_test_flow as flow
import arm_ethosu_test_graphs as graphs
import pytest
import torch
from torch import nn

from arm_ethosu import EthosUCompileSpec, compile_with_vela, ethosu_payloads, ethosu_report
from arm_ethosu.backend import tosa_graph_of
from arm_ethosu.tune import TuneBounds, schedules, tune_partition
from arm_tosa_core import TosaCompileSpec, run_on_reference_model


def _mobile_block() -> tuple[nn.Module, tuple]:
    """A MobileNet-like stack: vela 5.2 on U55-128 schedules it in fewer NPU cycles without cascading."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU6(), nn.Conv2d(16, 16, 3, 1, 1, groups=16),
                          nn.ReLU6(), nn.Conv2d(16, 32, 1), nn.ReLU6(), nn.Conv2d(32, 32, 3, 1, 1, groups=32),
                          nn.Conv2d(32, 16, 1))
    return model.eval(), (torch.randn(1, 3, 32, 32),)


def test_tune_keeps_the_fewest_cycles_and_stays_bit_exact():
    model, inputs = _mobile_block()
    quantized = flow.quantize(model, inputs)
    spec = EthosUCompileSpec("ethos-u55-128").include_host_graph().enable_tune()
    edge = flow.lower(quantized, inputs, spec)
    (part,) = ethosu_report(edge).partitions
    record = part.tune
    names = [c["name"] for c in record["candidates"]]
    # the plain form (U55: its edge transposes collapsed) under every schedule, then the transposes as recorded
    # (the rank-4 NCHW input TRANSPOSE) while 12 last
    assert names[:len(schedules())] == [name for name, _ in schedules()] and len(names) == 12
    assert all(n.startswith("transpose=as-is/") for n in names[len(schedules()):]), names
    by_name = {c["name"]: c for c in record["candidates"]}
    chosen, default = by_name[record["chosen"]], by_name["default"]
    assert (chosen["cycles_npu"], chosen["cycles_total"]) == (part.cycles_npu, part.cycles_total)
    # the payload holds the chosen form's graph: compiled with no extra flag it gives that form's "default"
    # candidate (the plain form's is the plain compile)
    (payload,) = ethosu_payloads(edge)
    plain = compile_with_vela(tosa_graph_of(payload), "ethos-u55-128")
    form, _, _ = record["chosen"].rpartition("/")
    assert by_name[f"{form}/default" if form else "default"]["cycles_npu"] == plain.summary["cycles_npu"]
    assert part.cycles_npu <= default["cycles_npu"] and part.cycles_total <= default["cycles_total"]
    eligible = [c for c in record["candidates"] if c["fits"] and c["cycles_total"] <= default["cycles_total"]]
    assert part.cycles_npu == min(c["cycles_npu"] for c in eligible)
    assert part.cycles_npu < default["cycles_npu"]  # vela 5.2: no-cascading/no-buffering beat it here
    assert "--tune candidates (chosen: " in ethosu_report(edge).format_table()
    with torch.no_grad():
        assert torch.equal(run_on_reference_model(edge, *inputs), quantized(*inputs))


def test_tune_is_bounded_and_deterministic(tmp_path):
    spec = EthosUCompileSpec("ethos-u85-256").set_memory_limit(sram_bytes=1 << 16)
    forms = {"default": graphs.depthwise_rescale(h=16, w=16, c=8)}
    first = tune_partition(forms, spec, "p", tmp_path, TuneBounds(max_candidates=3, max_workers=2))
    again = tune_partition(forms, spec, "p", None, TuneBounds(max_candidates=3, max_workers=1))
    assert [c["name"] for c in first.record["candidates"]] == ["default", "optimise=Size", "no-cascading"]
    assert first.record["candidates"] == again.record["candidates"] and first.record["chosen"] == again.record["chosen"]
    assert first.result.cmd_data == again.result.cmd_data
    # only the chosen candidate's artifacts (vela's debug database gives the layer of each kick-off)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p_debug.xml", "p_per-layer.csv",
                                                          "p_summary_Ethos_U85_SYS_DRAM_Mid.csv", "p_vela.npz"]
    # with a user SRAM limit the last schedule sizes vela's arena cache to it
    assert schedules(1 << 16)[-1] == ("arena=sram-limit", ("--arena-cache-size", "65536"))
    with pytest.raises(ValueError, match="tune bounds must be positive"):
        TuneBounds(max_candidates=0)


def test_tune_settings_travel_in_the_compile_specs():
    spec = EthosUCompileSpec("ethos-u55-128").enable_tune(max_candidates=5, time_limit_s=30.0)
    back = TosaCompileSpec.from_list(spec.to_list())
    assert back.tune_bounds == TuneBounds(5, 30.0, 4)
    assert TosaCompileSpec.from_list(EthosUCompileSpec().to_list()).tune_bounds is None
    assert spec.enable_tune(False).tune_bounds is None
