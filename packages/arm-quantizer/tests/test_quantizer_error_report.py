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


def _lowered(quantized, sample):
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    from arm_tosa_core import TosaCompileSpec, TOSAPartitioner

    return to_edge_transform_and_lower(torch.export.export(quantized, sample),
                                       partitioner=[TOSAPartitioner(TosaCompileSpec("TOSA-1.0+INT"))],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))


def test_tosa_stage_ranks_the_planted_layer_worst_and_tracks_fake_quant(tmp_path):
    """The lowered INT graph on the reference model, per layer: the planted layer is the worst in
    every stage, and each TOSA number is within 1 dB of its fake-quant twin except where integer
    arithmetic really differs (isolated layers reading the planted layer's coarse codes)."""
    model, samples = pm.build()
    quantized = pm.quantize(model, samples)
    report = quantization_error_report(quantized, samples, lowered=_lowered(quantized, samples[0]),
                                       target_note="the reference model is the target")
    assert report.stages() == ["isolated_db", "cumulative_db", "tosa_isolated_db", "tosa_cumulative_db"]
    for stage in report.stages():
        worst = report.worst(1, by=stage)[0]
        others = [getattr(r, stage) for r in report.layers if r is not worst]
        assert worst.module == "b.0" and getattr(worst, stage) < min(others) - 2.0, stage
    for r in report.layers:
        assert abs(r.tosa_cumulative_db - r.cumulative_db) < 1.0, r
        if r.module != "c.0":  # c reads b's 64x-wide codes: accumulator (input x weight) scale 64x coarser
            assert abs(r.tosa_isolated_db - r.isolated_db) < 1.0, r
    assert abs(report.output_db["tosa_reference"] - report.output_db["fake_quant"]) < 1.0
    table = report.format_table(5)
    assert "tosa iso dB" in table and "target column: the reference model is the target" in table
    header = report.write_csv(tmp_path / "a.csv").read_text().splitlines()[0]
    assert "tosa_isolated_db" in header and "tosa_cumulative_db" in header
    assert report.plot_png(tmp_path / "a.png").stat().st_size > 0
