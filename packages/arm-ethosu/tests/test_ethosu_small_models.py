"""The small models (arm_tosa_core.small_models) compile for ethos-u55-128 as one vela partition with
no CPU compute: standalone batch norms (ConvMixer), 2x bilinear upsampling (U-Net decoder, lowered as
nearest + depthwise for U55), squeeze-excite with hardswish (MobileNetV3), a GRU (CRNN)."""

import arm_ethosu_test_flow as flow
import pytest
import torch

from arm_ethosu import EthosUCompileSpec, ethosu_report
from arm_tosa_core import run_on_reference_model
from arm_tosa_core.small_models import SMALL_MODELS, build_small

MAX_LSB = {"convmixer": 3, "unet_decoder": 3}  # see arm-quantizer's test_models_int_small


@pytest.mark.parametrize("name", list(SMALL_MODELS))
def test_u55_one_partition(name):
    model, inputs = build_small(name)
    quantized = flow.quantize(model, inputs)
    edge = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u55-128").include_host_graph())
    assert flow.cpu_compute(edge) == {}, flow.cpu_compute(edge)
    vela = ethosu_report(edge)
    assert len(vela.partitions) == 1 and vela.partitions[0].cpu_ops == 0 and vela.partitions[0].cycles_npu > 0
    with torch.no_grad():
        err = (run_on_reference_model(edge, *inputs) - quantized(*inputs)).abs().max().item()
    assert err <= MAX_LSB.get(name, 1) * flow.output_lsb(quantized) * 1.0001
