"""Per-layer SQNR report: the planted badly-scaled layer ranks worst in isolation; deterministic."""

import math

import planted_model as pm
import torch

from arm_quantizer.accuracy import output_sqnr, quantization_error_report, quantized_layers, sqnr_db


def test_planted_layer_ranks_worst_isolated(tmp_path):
    model, samples = pm.build()
    report = quantization_error_report(pm.quantize(model, samples), samples)
    assert len(report.layers) == 5
    worst = report.worst(1)[0]
    assert worst.module == "b.0" and worst.label == "b.0 · conv2d"
    others = [r.isolated_db for r in report.layers if r is not worst]
    assert worst.isolated_db < min(others) - 10  # 6 bits lost: ~36 dB worse than its neighbours
    # cumulative error never beats the isolated one by much (noise only adds up)
    assert all(r.cumulative_db <= r.isolated_db + 1.0 for r in report.layers)
    assert report.format_table(3).splitlines()[2].startswith("b.0 · conv2d")
    assert report.write_csv(tmp_path / "a.csv").read_text().count("\n") == 6
    assert report.plot_png(tmp_path / "a.png").stat().st_size > 0


def test_float_pass_is_the_float_model_and_report_is_deterministic():
    model, samples = pm.build()
    quantized = pm.quantize(model, samples)
    from arm_quantizer.accuracy import float_output

    with torch.no_grad():
        for s in samples:  # activations' quantize/dequantize passed through: the float model, but
            # convert_pt2e folded the weights to int8, so their rounding stays (about 45 dB here)
            ref = model(*s).reshape(-1).double()
            err = (float_output(quantized, s) - ref)
            assert sqnr_db(float((ref ** 2).sum()), float((err ** 2).sum())) > 35.0
            assert err.abs().max() < 1e-2 * ref.abs().max()
    a = quantization_error_report(pm.quantize(*pm.build(seed=0)), samples).to_json()
    b = quantization_error_report(pm.quantize(*pm.build(seed=0)), samples).to_json()
    assert a == b


def test_int16_simulation_recovers_the_planted_layer():
    model, samples = pm.build()
    quantized = pm.quantize(model, samples)
    owners = {layer.name: layer.owner for layer in quantized_layers(quantized)}
    planted = next(n for n, o in owners.items() if o == "b")
    assert output_sqnr(quantized, samples, [planted]) > output_sqnr(quantized, samples) + 6
    assert sqnr_db(1.0, 0.0) == math.inf and abs(sqnr_db(100.0, 1.0) - 20.0) < 1e-12
