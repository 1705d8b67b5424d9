"""The bundled example models are fully delegated under TOSA-1.0+FP and match eager on the reference
model within 1e-4 of the output's max magnitude (image models at reduced resolution to keep CI fast;
`nox -s bench` runs them at 224)."""

import pytest
import torch

from arm_tosa_core.example_models import get_example
from arm_tosa_core.testing import check_lowering

MODELS = [("mobilenet_v2", 64), ("resnet18", 64), ("deit_tiny_block", None), ("llama_block", None)]


@pytest.mark.parametrize("name,size", MODELS, ids=[m[0] for m in MODELS])
def test_model_fully_delegated_and_accurate(name, size):
    example = get_example(name)
    model, inputs = example.build(input_size=size) if size else example.build()
    result = check_lowering(model, inputs, case=name, rtol=1e-4)
    assert len(result.report.delegates) == 1
    assert result.report.delegated_share == 1.0
    assert result.max_error <= 1e-4 * result.max_magnitude  # NaN-aware: inf on any NaN/inf mismatch
    assert all(torch.isfinite(y).all() for y in torch.utils._pytree.tree_leaves(result.outputs))
