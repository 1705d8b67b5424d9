"""The four example models vs eager FP32: FP32 within 1e-4, FP16 within 1e-2 (max|err| / max|ref|; see
test_model_fp16 for MobileNetV2's exception);
dynamic batch / sequence length at several sizes from one payload."""

from __future__ import annotations

import copy

import pytest
import torch

from arm_tosa_core.example_models import get_example, llama_block
from arm_tosa_core.testing import compare_outputs
from vulkan_delegate import run_on_vulkan


def rel_err(y, ref):
    """max |y - ref| / max |ref|; inf where they disagree about NaN or inf."""
    comparison = compare_outputs(y.float(), ref.float())
    return comparison.max_error / max(comparison.max_magnitude, 1e-12)


SIZES = {"mobilenet_v2": 64, "resnet18": 64, "deit_tiny_block": 17, "llama_block": 16}


@pytest.mark.parametrize("name", sorted(SIZES))
def test_model_fp32(name, vk_check):
    model, inputs = get_example(name).build(input_size=SIZES[name])
    vk_check(model, inputs)


@pytest.mark.parametrize("name", sorted(SIZES))
def test_model_fp16(name, vk_check):
    """FP16 (force_fp16: fp16 storage of weights and activations, fp32 arithmetic in every shader) vs
    eager FP32, as max|y - ref| / max|ref|: within 1e-2, or within eager PyTorch FP16's own distance
    from FP32 where that is larger. It is larger only for MobileNetV2 with these seeded random weights
    (measured on lavapipe: ours 3.1e-2, eager fp16 3.5e-2, an fp32-math model with fp16-rounded weights
    and activations 3.4e-2; rounding the weights alone to fp16 already gives 2.3e-2): the network
    amplifies fp16 rounding ~60x, so no fp16-storage implementation reaches 1e-2 there."""
    model, inputs = get_example(name).build(input_size=SIZES[name])
    eager_fp16 = copy.deepcopy(model).half()(*[x.half() for x in inputs]).float()
    tol = max(1e-2, rel_err(eager_fp16, model(*inputs)))
    if name == "mobilenet_v2":
        assert tol > 1e-2  # the exception above, and only there
    vk_check(model, inputs, fp16=True, tol=tol)


def test_llama_block_grouped_query(vk_check):
    """4 query heads over 2 KV heads (repeat_interleave'd in the model, read directly by SDPA)."""
    torch.manual_seed(0)
    vk_check(llama_block(kv_heads=2, seq=16).eval(), (torch.randn(1, 16, 256),))


def test_dynamic_sequence_length(vk_lower):
    model, inputs = get_example("llama_block").build(input_size=32)
    seq = torch.export.Dim("seq", min=1, max=32)
    pte = vk_lower(model, inputs, dynamic_shapes=({1: seq},)).to_executorch()
    for n in (32, 3, 19):
        x = torch.randn(1, n, 256)
        y, ref = run_on_vulkan(pte, x), model(x)
        assert y.shape == ref.shape
        assert ((y - ref).abs().max() / ref.abs().max()).item() < 1e-4, n


def test_dynamic_batch(vk_lower):
    model, _ = get_example("resnet18").build(input_size=32)
    batch = torch.export.Dim("batch", min=1, max=3)
    pte = vk_lower(model, (torch.randn(2, 3, 32, 32),), dynamic_shapes=({0: batch},)).to_executorch()
    for n in (1, 3, 2):
        x = torch.randn(n, 3, 32, 32)
        y, ref = run_on_vulkan(pte, x), model(x)
        assert y.shape == (n, 1000)
        assert ((y - ref).abs().max() / ref.abs().max()).item() < 1e-4, n
