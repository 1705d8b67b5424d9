"""The small models (arm_tosa_core.small_models) compile for ethos-u55-128 as one vela partition with
no CPU compute: standalone batch norms (ConvMixer), 2x bilinear upsampling (U-Net decoder, lowered as
nearest + depthwise for U55), squeeze-excite with hardswish (MobileNetV3), a GRU (CRNN)."""

import arm_ethosu_test_flow as flow
import pytest
import torch
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

from arm_ethosu import EthosUCompileSpec, EthosUQuantizer
from arm_tosa_core import run_on_reference_model
from arm_tosa_core.small_models import SMALL_MODELS, build_small

MAX_LSB = {"convmixer": 3, "unet_decoder": 3}  # see arm-quantizer's test_models_int_small


@pytest.mark.parametrize("name", list(SMALL_MODELS))
def test_u55_one_partition(name):
    flow.check_on_npu_alone(*build_small(name), "ethos-u55-128", MAX_LSB.get(name, 1))


#: On U85 a global average pool keeps its input's qparams (one AVG_POOL2D: fewer NPU cycles, see
#: arm-ethosu's README). Its one rounding at the input's coarser step, which the classifier after it
#: amplifies, puts these outputs this many LSB from the fake-quant model (measured at seed 0: MobileNetV3-small
#: 5, ConvMixer 6); the pool with its own qparams (U55/U65, TOSA INT) keeps them within `MAX_LSB` (measured:
#: 0 and 3, ConvMixer's 3 from RESCALE rounding ties, see arm-quantizer's test_models_int_small).
U85_SHARED_POOL_LSB = {"mobilenet_v3_small": 5, "convmixer": 6}


def _lsb_from_fake_quant(name: str, shares_qparams: bool) -> float:
    model, inputs = build_small(name)
    spec = EthosUCompileSpec("ethos-u85-256").include_host_graph()
    quantizer = EthosUQuantizer(spec)
    quantizer.global_average_shares_qparams = shares_qparams
    prepared = prepare_pt2e(torch.export.export(model.eval(), inputs).module(), quantizer)
    with torch.no_grad():
        prepared(*inputs)
    quantized = convert_pt2e(prepared)
    edge = flow.lower(quantized, inputs, spec)
    with torch.no_grad():
        err = (run_on_reference_model(edge, *inputs) - quantized(*inputs)).abs().max().item()
    return err / flow.output_lsb(quantized)


# ConvMixer: 319 s at load 20 on the 2-core machine (MobileNetV3-small 114 s there)
@pytest.mark.parametrize("name", ["mobilenet_v3_small", pytest.param("convmixer", marks=pytest.mark.slow)])
def test_u85_shared_qparams_global_pool_costs_pinned(name):
    """The price of U85's global-average-pool form, pinned both ways so that a change shows: the shared
    form is at most `U85_SHARED_POOL_LSB` from fake-quant and more than the own-qparams form, which stays
    within `MAX_LSB`."""
    shared, own = _lsb_from_fake_quant(name, True), _lsb_from_fake_quant(name, False)
    print(f"{name}: U85 shared-qparams pool {shared:.2f} LSB, own qparams {own:.2f} LSB")
    assert own <= MAX_LSB.get(name, 1) + 1e-3
    assert MAX_LSB.get(name, 1) < shared <= U85_SHARED_POOL_LSB[name] + 1e-3
