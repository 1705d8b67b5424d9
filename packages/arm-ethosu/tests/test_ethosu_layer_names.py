"""Every vela layer of the four bundled models carries its PyTorch module path and op."""

import csv

import arm_ethosu_test_flow as flow
import pytest

from arm_ethosu import EthosUCompileSpec, ethosu_report
from arm_ethosu.report import MemoryBudgetError
from arm_tosa_core.example_models import get_example

MODELS = {"mobilenet_v2": 32, "resnet18": 32, "deit_tiny_block": 16, "llama_block": 8}


@pytest.mark.parametrize("name", list(MODELS))
def test_every_layer_named(name, tmp_path):
    model, inputs = get_example(name).build(seed=0, input_size=MODELS[name])
    edge = flow.lower(flow.quantize(model, inputs), inputs, EthosUCompileSpec("ethos-u55-128"))
    report = ethosu_report(edge)
    rows = [r for p in report.partitions for r in p.layers]
    assert rows
    unnamed = [r["Name"] for r in rows if not r.get("TOSA Ops") or r["PyTorch"].startswith("(vela)")]
    assert unnamed == []
    # layers name their module (ops in a model's own forward, as DeiT's attention math, are top level)
    assert any("." in r["Module"] or r["Module"].isidentifier() for r in rows)
    csv_rows = list(csv.DictReader(report.write_layers_csv(tmp_path / "layers.csv").open()))
    assert [r["PyTorch"] for r in csv_rows] == [r["PyTorch"] for r in rows]
    assert report.plot_sram_png(tmp_path / "sram.png", 1000).stat().st_size > 0
    assert sum(n for _, n, _, _ in report.by_module()) == len(rows)


def test_named_conv_and_fused_rescale():
    model, inputs = get_example("mobilenet_v2").build(seed=0, input_size=32)
    edge = flow.lower(flow.quantize(model, inputs), inputs, EthosUCompileSpec("ethos-u55-128"))
    rows = [r for p in ethosu_report(edge).partitions for r in p.layers]
    first_conv = next(r for r in rows if r["NNG Operator"] == "Conv2D")
    assert first_conv["PyTorch"] == "features.0.0 · conv2d"
    # vela folded the conv's output RESCALE (and the ReLU6 clamp) into the same layer
    # (after the RESHAPE that ends U55's collapsed input transpose, which vela folds into it too)
    assert first_conv["TOSA Ops"].removeprefix("RESHAPE <- features.0.0 · conv2d; ").startswith(
        "CONV2D <- features.0.0 · conv2d; ")


def test_sram_limit_names_the_peak_layer():
    model, inputs = get_example("mobilenet_v2").build(seed=0, input_size=32)
    spec = EthosUCompileSpec("ethos-u55-128").set_memory_limit(sram_bytes=1024)
    with pytest.raises(Exception) as info:
        flow.lower(flow.quantize(model, inputs), inputs, spec)
    err = info.value
    while err is not None and not isinstance(err, MemoryBudgetError):
        err = err.__cause__ or err.__context__
    assert isinstance(err, MemoryBudgetError)
    assert "peak SRAM staging at layer features." in str(err) and " · conv2d [layer-" in str(err)
