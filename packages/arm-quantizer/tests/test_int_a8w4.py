"""4-bit weights (a8w4: `get_symmetric_a8w4_quantization_config`): int8 activations, weights -7..7 per
output channel, lowered as TOSA INT4 under "+int4" (EXT-INT4: CONV2D, DEPTHWISE_CONV2D, TRANSPOSE_CONV2D,
CONV3D take int8 x int4; `linear` lowers to CONV2D) and as int8 holding the same values without it.

On the reference model within 1 LSB of `run_exactly` (in practice 0), the graph valid for its spec
(tosa-opt strict), the weight codes 4-bit. Bad configs name the valid ones.
"""

import glob

import pytest
import torch
from quant_harness import check_int, quantize
from torch import nn

from arm_quantizer import (
    QuantizationConfig,
    TOSAQuantizer,
    get_symmetric_a8w4_quantization_config,
    get_symmetric_quantization_config,
    run_exactly,
)
from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, run_on_reference_model
from arm_tosa_core.profile_check import validate_tosa
from arm_tosa_core.testing import lower
from arm_tosa_core.tosa_inspect import tosa_constant_types

A8W4 = get_symmetric_a8w4_quantization_config(is_per_channel=True, is_qat=False, is_dynamic=False)
INT4 = "TOSA-1.0+INT+int4"

CASES = [
    ("linear", nn.Linear(16, 8), (4, 16)),
    ("depthwise", nn.Conv2d(6, 6, 3, padding=1, groups=6), (1, 6, 7, 7)),
    pytest.param("conv", nn.Conv2d(3, 8, 3, padding=1), (1, 3, 8, 8), marks=pytest.mark.slow),
    pytest.param("conv_transpose", nn.ConvTranspose2d(4, 6, 3, stride=2), (1, 4, 5, 5), marks=pytest.mark.slow),
    pytest.param("conv1d", nn.Conv1d(4, 8, 3), (1, 4, 10), marks=pytest.mark.slow),
    pytest.param("conv3d", nn.Conv3d(2, 4, 3), (1, 2, 4, 5, 5), marks=pytest.mark.slow),
]


def _weight_codes(converted) -> list[torch.Tensor]:
    """The int8 weight tensors convert_pt2e folded (the constants feeding a per-channel dequantize)."""
    codes = []
    for node in converted.graph.nodes:
        if node.op == "call_function" and "dequantize_per_channel" in str(node.target):
            value = getattr(converted, node.args[0].target)
            if value.dtype == torch.int8:  # not the int32 bias
                codes.append(value)
    return codes


@pytest.mark.parametrize("name,module,shape", CASES)
def test_a8w4_op_is_int4_and_within_one_lsb(name, module, shape, tmp_path):
    torch.manual_seed(0)
    inputs = (torch.randn(shape),)
    _, _, lsb, converted = check_int(module, inputs, spec=INT4, config=A8W4, case=name)
    codes = _weight_codes(converted)
    assert codes and all(int(c.abs().max()) <= 7 for c in codes), [int(c.abs().max()) for c in codes]
    lower(converted, inputs, TOSAPartitioner(TosaCompileSpec(INT4).dump_intermediate_artifacts_to(tmp_path)))
    (graph,) = glob.glob(str(tmp_path / "*.tosa"))
    assert "INT4" in tosa_constant_types(graph).values(), tosa_constant_types(graph)
    assert validate_tosa(graph, INT4) == []


@pytest.mark.slow
def test_a8w4_without_the_int4_extension_stores_int8_and_gives_the_same_codes(tmp_path):
    """Under plain "TOSA-1.0+INT" the 4-bit values ride in INT8 weights: no INT4 tensor, same outputs."""
    torch.manual_seed(0)
    module, inputs = nn.Sequential(nn.Linear(16, 12), nn.ReLU(), nn.Linear(12, 8)), (torch.randn(3, 16),)
    converted = quantize(module, inputs, config=A8W4)
    outs = {}
    for spec in ("TOSA-1.0+INT", INT4):
        folder = tmp_path / spec.replace("+", "_")
        edge = lower(converted, inputs, TOSAPartitioner(TosaCompileSpec(spec).dump_intermediate_artifacts_to(folder)))
        (graph,) = glob.glob(str(folder / "*.tosa"))
        assert ("INT4" in tosa_constant_types(graph).values()) == (spec == INT4)
        outs[spec] = run_on_reference_model(edge, *inputs)
    assert torch.equal(outs["TOSA-1.0+INT"], outs[INT4])
    exact = run_exactly(converted, *inputs)
    scale = float([n for n in converted.graph.nodes if n.op == "output"][0].args[0][0].args[1])
    assert (outs[INT4] - exact).abs().max().item() <= scale * 1.0001


def test_a8w4_costs_accuracy_against_a8w8():
    """4-bit weights are coarser: the a8w4 model's SQNR vs the float module is below a8w8's.

    (`output_sqnr` would not show it: its float reference keeps the folded int8 weights.)"""
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 16)).eval()
    samples = [(torch.randn(8, 32),) for _ in range(2)]
    sqnr = {}
    for name, config in (("a8w8", get_symmetric_quantization_config()), ("a8w4", A8W4)):
        converted = quantize(module, samples[0], config=config, calibration=samples)
        with torch.no_grad():
            ref, out = module(*samples[0]), converted(*samples[0])
        sqnr[name] = 10 * torch.log10(ref.pow(2).mean() / (out - ref).pow(2).mean()).item()
    assert 5.0 < sqnr["a8w4"] < sqnr["a8w8"] - 6.0, sqnr


def test_a8w4_configs_weights_and_arguments():
    per_tensor = get_symmetric_a8w4_quantization_config(is_per_channel=False)
    assert per_tensor.weight.qscheme == torch.per_tensor_symmetric
    assert (A8W4.weight.quant_min, A8W4.weight.quant_max, A8W4.weight.qscheme) == (-7, 7, torch.per_channel_symmetric)
    assert (A8W4.weight_bits, get_symmetric_quantization_config().weight_bits) == (4, 8)
    assert A8W4.activation_dtype == torch.int8
    assert get_symmetric_a8w4_quantization_config(is_dynamic=True).output_activation is None
    a8w8 = get_symmetric_quantization_config()
    assert (a8w8.weight.quant_min, a8w8.weight.quant_max) == (-127, 127)  # unchanged


def test_per_group_weights_are_refused_naming_the_valid_choices():
    with pytest.raises(ValueError, match=r"group_size=32 .*per output channel.*group_size=None"):
        get_symmetric_a8w4_quantization_config(group_size=32)


def test_4bit_activations_are_refused_naming_the_valid_configs():
    weight = A8W4.weight
    act4 = type(A8W4.input_activation)(dtype=torch.int8, quant_min=-8, quant_max=7, qscheme=torch.per_tensor_affine,
                                       observer_or_fake_quant_ctr=A8W4.input_activation.observer_or_fake_quant_ctr)
    with pytest.raises(ValueError, match=r"-8\.\.7.*4-bit activations.*get_symmetric_a8w4_quantization_config"):
        QuantizationConfig(act4, act4, weight)
    wide = type(weight)(dtype=torch.int16, quant_min=-32767, quant_max=32767, qscheme=torch.per_channel_symmetric,
                        ch_axis=0, observer_or_fake_quant_ctr=weight.observer_or_fake_quant_ctr)
    with pytest.raises(ValueError, match=r"weights quantized as torch.int16.*Valid configs"):
        QuantizationConfig(A8W4.input_activation, A8W4.output_activation, wide)
    TOSAQuantizer(TosaCompileSpec(INT4)).set_global(A8W4)  # the valid one is taken
