"""Bundled example models: shapes, seeded determinism, sane output magnitude, exportability."""

import pytest
import torch

from arm_tosa_core.example_models import EXAMPLE_MODELS, ExampleModel, get_example

# Small sizes keep the suite fast; the default sizes are checked for shape only on the cheap models.
CASES = [
    ("mobilenet_v2", 64, (1, 3, 64, 64), (1, 1000)),
    ("resnet18", 64, (1, 3, 64, 64), (1, 1000)),
    ("deit_tiny_block", 17, (1, 17, 192), (1, 17, 192)),
    ("llama_block", None, (1, 32, 256), (1, 32, 256)),
]


def _run(ex: ExampleModel, seed: int, size: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    model, inputs = ex.build(seed=seed, input_size=size)
    with torch.no_grad():
        return inputs[0], model(*inputs)


def test_registry_names() -> None:
    assert set(EXAMPLE_MODELS) == {"mobilenet_v2", "resnet18", "deit_tiny_block", "llama_block"}
    for name, ex in EXAMPLE_MODELS.items():
        assert ex.name == name and ex.description


def test_unknown_name_lists_valid_names() -> None:
    with pytest.raises(ValueError, match="valid names: deit_tiny_block, llama_block"):
        get_example("mobilenet_v3")


def test_too_small_image_is_refused() -> None:
    with pytest.raises(ValueError, match="too small"):
        get_example("resnet18").build(input_size=8)


@pytest.mark.parametrize("name,size,in_shape,out_shape", CASES)
def test_shapes_magnitude_determinism(name, size, in_shape, out_shape) -> None:
    ex = get_example(name)
    x0, y0 = _run(ex, 0, size)
    assert tuple(x0.shape) == in_shape
    assert tuple(y0.shape) == out_shape
    assert torch.isfinite(y0).all()
    # O(1) activations: neither vanished nor blown up through the depth.
    assert 0.1 < y0.std().item() < 10.0, y0.std()
    assert y0.abs().max().item() < 100.0
    x1, y1 = _run(ex, 0, size)
    assert torch.equal(x0, x1) and torch.equal(y0, y1)
    _, y2 = _run(ex, 1, size)
    assert (y0 - y2).abs().max().item() > 1e-2


@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet18"])
def test_batchnorm_is_not_identity(name) -> None:
    model, _ = get_example(name).build(seed=0, input_size=32)
    assert not model.training
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert bns
    for bn in bns:
        assert (bn.running_mean.abs() > 1e-3).any()
        assert ((bn.running_var - 1.0).abs() > 1e-2).any()


def test_default_image_input_is_224() -> None:
    model, (x,) = get_example("mobilenet_v2").build(seed=0)
    assert tuple(x.shape) == (1, 3, 224, 224)
    with torch.no_grad():
        assert tuple(model(x).shape) == (1, 1000)


def test_llama_grouped_kv_heads() -> None:
    from arm_tosa_core.example_models import llama_block

    block = llama_block(dim=64, heads=4, kv_heads=2, seq=8, hidden=96).eval()
    assert block.wk.out_features == 32
    assert tuple(block(torch.randn(1, 8, 64)).shape) == (1, 8, 64)
    with pytest.raises(ValueError, match="heads % kv_heads"):
        llama_block(dim=64, heads=4, kv_heads=3)


@pytest.mark.parametrize("name,size,in_shape,out_shape", CASES)
def test_torch_export(name, size, in_shape, out_shape) -> None:
    model, inputs = get_example(name).build(seed=0, input_size=size)
    ep = torch.export.export(model, inputs)
    out = ep.module()(*inputs)
    with torch.no_grad():
        ref = model(*inputs)
    assert tuple(out.shape) == out_shape
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
