"""The small models (arm_tosa_core.small_models) compile for ethos-u55-128 as one vela partition with
no CPU compute: standalone batch norms (ConvMixer), 2x bilinear upsampling (U-Net decoder, lowered as
nearest + depthwise for U55), squeeze-excite with hardswish (MobileNetV3), a GRU (CRNN)."""

import arm_ethosu_test_flow as flow
import pytest

from arm_tosa_core.small_models import SMALL_MODELS, build_small

MAX_LSB = {"convmixer": 3, "unet_decoder": 3}  # see arm-quantizer's test_models_int_small


@pytest.mark.parametrize("name", list(SMALL_MODELS))
def test_u55_one_partition(name):
    flow.check_on_npu_alone(*build_small(name), "ethos-u55-128", MAX_LSB.get(name, 1))
