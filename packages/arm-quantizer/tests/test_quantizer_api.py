"""TOSAQuantizer configuration: per-module configs, QAT, exported modules with _guards_fn, bad input."""

import pytest
import torch
from quant_harness import check_int, output_scales, quantize
from torch import nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e, prepare_qat_pt2e

from arm_quantizer import (
    CalibrationError,
    TOSAQuantizer,
    get_symmetric_a16w8_quantization_config,
    get_symmetric_quantization_config,
)
from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report, run_on_reference_model
from arm_tosa_core.testing import lower

INT = TosaCompileSpec("TOSA-1.0+INT")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(8 * 6 * 6, 4)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def _inputs():
    torch.manual_seed(0)
    return (torch.randn(2, 3, 6, 6),)


def _cpu_compute(report):
    return [c.target for c in report.cpu_nodes if "quantize" not in c.target]


def test_exported_module_with_guards_fn_quantizes():
    gm = torch.export.export(Net().eval(), _inputs()).module()
    assert any(n.op == "call_module" for n in gm.graph.nodes), "torch 2.13 export adds _guards_fn"
    quantizer = TOSAQuantizer(INT).set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(gm, quantizer)
    prepared(*_inputs())
    converted = convert_pt2e(prepared)
    assert any("quantize_per_tensor" in str(n.target) for n in converted.graph.nodes)


def test_set_module_name_none_keeps_that_module_in_float():
    quantizer = (TOSAQuantizer(INT).set_global(get_symmetric_quantization_config())
                 .set_module_name("head", None))
    converted = quantize(Net(), _inputs(), quantizer=quantizer)
    report = partition_report(lower(converted, _inputs(), TOSAPartitioner(INT)))
    cpu = _cpu_compute(report)
    assert any("addmm" in t or "linear" in t or "mm" in t for t in cpu), report
    assert not any("conv" in t for t in cpu), report
    out = run_on_reference_model(lower(converted, _inputs(), TOSAPartitioner(INT)), *_inputs())
    assert torch.allclose(out, converted(*_inputs()), atol=1e-5)


def test_set_module_type_selects_modules_by_class():
    quantizer = (TOSAQuantizer(INT).set_global(None)
                 .set_module_type(nn.Conv2d, get_symmetric_quantization_config()))
    converted = quantize(Net(), _inputs(), quantizer=quantizer)
    report = partition_report(lower(converted, _inputs(), TOSAPartitioner(INT)))
    delegated = [n for d in report.delegates for n in d.nodes]
    assert any("conv2d" in n for n in delegated), report
    assert any("addmm" in t or "linear" in t for t in _cpu_compute(report)), report


def test_per_tensor_weights_within_one_lsb():
    config = get_symmetric_quantization_config(is_per_channel=False)
    _, _, lsb, _ = check_int(Net(), _inputs(), config=config)
    assert lsb <= 1.0


def test_qat_training_steps_then_lower():
    torch.manual_seed(0)
    model = Net()
    x = _inputs()
    quantizer = TOSAQuantizer(INT).set_global(get_symmetric_quantization_config(is_qat=True))
    prepared = prepare_qat_pt2e(torch.export.export(model, x).module(), quantizer)
    optimizer = torch.optim.SGD(prepared.parameters(), lr=0.01)
    target = torch.randn(2, 4)
    losses = []
    for _ in range(4):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(prepared(*x), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses
    converted = convert_pt2e(prepared)
    edge = lower(converted, x, TOSAPartitioner(INT))
    assert not _cpu_compute(partition_report(edge))
    err = (run_on_reference_model(edge, *x) - converted(*x)).abs().max().item()
    assert err <= max(output_scales(converted)) * 1.0001


def test_int16_activations_need_the_int16_extension():
    with pytest.raises(ValueError, match="int16"):
        TOSAQuantizer(INT).set_global(get_symmetric_a16w8_quantization_config())
    TOSAQuantizer(TosaCompileSpec("TOSA-1.0+INT+int16")).set_global(get_symmetric_a16w8_quantization_config())


def test_fp_only_spec_refuses_quantization():
    with pytest.raises(ValueError, match="INT profile"):
        TOSAQuantizer(TosaCompileSpec("TOSA-1.0+FP")).set_global(get_symmetric_quantization_config())


def test_unknown_module_name_is_a_clear_error():
    quantizer = TOSAQuantizer(INT).set_global(get_symmetric_quantization_config()).set_module_name("nope", None)
    with pytest.raises(ValueError, match="no submodule named.*nope"):
        prepare_pt2e(torch.export.export(Net().eval(), _inputs()).module(), quantizer)


def test_set_node_name_wins_over_the_global_config_and_unknown_names_are_an_error():
    # mixed precision keeps single ops int8 inside a16w8 modules this way (arm_quantizer.int16_fallback)
    quantizer = TOSAQuantizer(INT).set_global(None).set_node_name("conv2d", get_symmetric_quantization_config())
    converted = quantize(Net(), _inputs(), quantizer=quantizer)
    report = partition_report(lower(converted, _inputs(), TOSAPartitioner(INT)))
    assert any("conv2d" in n for d in report.delegates for n in d.nodes), report
    assert any("addmm" in t or "linear" in t for t in _cpu_compute(report)), report
    quantizer = TOSAQuantizer(INT).set_node_name("nope", None)
    with pytest.raises(ValueError, match="no node named.*nope"):
        prepare_pt2e(torch.export.export(Net().eval(), _inputs()).module(), quantizer)


def test_convert_without_calibration_is_a_clear_error():
    quantizer = TOSAQuantizer(INT).set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(torch.export.export(Net().eval(), _inputs()).module(), quantizer)
    with pytest.raises(CalibrationError, match="before calibration"):
        convert_pt2e(prepared)


def test_partition_boundaries_never_leak_integers_into_float_consumers():
    """A dequantize shared by delegated and CPU consumers stays on the CPU: the program still matches."""

    class Split(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(8, 24)
            self.out = nn.Linear(8, 8)

        def forward(self, x):
            q, k, v = self.qkv(x).reshape(1, 5, 3, 8).permute(2, 0, 1, 3).unbind(0)
            return self.out(torch.softmax(q, -1) * k + v)  # softmax has no INT rule: CPU

    torch.manual_seed(0)
    x = (torch.randn(1, 5, 8),)
    converted = quantize(Split(), x)
    edge = lower(converted, x, TOSAPartitioner(INT))
    out = run_on_reference_model(edge, *x)
    pte = edge.to_executorch()
    out_pte = run_on_reference_model(pte.buffer, *x)
    scale = max(output_scales(converted))
    assert (out - converted(*x)).abs().max().item() <= scale * 1.0001
    assert torch.equal(out, out_pte)
