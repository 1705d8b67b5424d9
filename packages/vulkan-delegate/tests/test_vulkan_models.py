"""The four example models vs eager FP32: FP32 within 1e-4, FP16 within 1e-2 (max|err| / max|ref|; see
test_model_fp16 for MobileNetV2's exception);
dynamic batch / sequence length at several sizes from one payload."""

from __future__ import annotations

import copy

import pytest
import torch

from arm_tosa_core.example_models import get_example, llama_block
from arm_tosa_core.testing import compare_outputs
from vulkan_delegate import partition_report, run_on_vulkan


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
    eager FP32, as max|y - ref| / max|ref|: within 1e-2, or within 1.5x eager PyTorch FP16's own
    distance from FP32 where the network amplifies fp16 rounding (issue 23's bound: eager's own fp16
    distance depends on the host CPU's fp16 kernels, measured 3.5e-2 on one machine and 3.0e-2 on another). It is larger only for MobileNetV2 with these seeded random weights
    (measured on lavapipe: ours 3.1e-2, eager fp16 3.5e-2, an fp32-math model with fp16-rounded weights
    and activations 3.4e-2; rounding the weights alone to fp16 already gives 2.3e-2): the network
    amplifies fp16 rounding ~60x, so no fp16-storage implementation reaches 1e-2 there."""
    model, inputs = get_example(name).build(input_size=SIZES[name])
    eager_fp16 = copy.deepcopy(model).half()(*[x.half() for x in inputs]).float()
    eager_distance = rel_err(eager_fp16, model(*inputs))
    tol = max(1e-2, 1.5 * eager_distance)
    if name == "mobilenet_v2":
        assert eager_distance > 1e-2  # the exception above, and only there
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


def _run_and_compare(edge, model, x):
    y, ref = run_on_vulkan(edge.to_executorch(), x), model(x)
    assert y.shape == ref.shape
    assert ((y - ref).abs().max() / ref.abs().max()).item() < 1e-4


def test_unbounded_dynamic_dim_stays_on_cpu_with_reason(vk_lower):
    """torch.export.Dim without max: the arena cannot be planned, so the nodes stay on the CPU naming
    the fix (torch's int_oo bound reports is_finite, which used to crash the lowering)."""
    model = torch.nn.Sequential(torch.nn.ReLU()).eval()
    x = torch.randn(2, 8)
    edge = vk_lower(model, (x,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    reasons = [c.reason for c in partition_report(edge).cpu_nodes]
    assert reasons and all("no upper bound" in r and "max=" in r for r in reasons), reasons
    _run_and_compare(edge, model, x)


def test_non_polynomial_input_size_stays_on_cpu_with_reason(vk_lower):
    """A stride-2 conv of a dynamic height gives floor((h - 1) / 2) + 1 rows: the conv and the mean
    reading it stay on the CPU with the reason (the mean's input size used to crash the lowering)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, stride=2, padding=1), torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten()).eval()
    x = torch.randn(1, 3, 16, 16)
    edge = vk_lower(model, (x,), dynamic_shapes=({2: torch.export.Dim("h", min=4, max=32)},))
    report = partition_report(edge)
    assert {c.target for c in report.cpu_nodes} >= {"aten.convolution.default", "aten.mean.dim"}, str(report)
    assert all("not a polynomial" in c.reason for c in report.cpu_nodes), str(report)
    _run_and_compare(edge, model, torch.randn(1, 3, 11, 16))


def _hf_model(name: str) -> torch.nn.Module:
    """A small random-init Hugging Face model returning last_hidden_state (no hub download)."""
    transformers = pytest.importorskip("transformers")
    if name == "bert":
        cfg = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=64, max_position_embeddings=32)
        model = transformers.BertModel(cfg)
    elif name == "distilbert":
        cfg = transformers.DistilBertConfig(vocab_size=100, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                                            max_position_embeddings=32)
        model = transformers.DistilBertModel(cfg)
    elif name == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=32,
                                      bos_token_id=0, eos_token_id=0)
        model = transformers.GPT2Model(cfg)
    else:
        cfg = transformers.LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
        model = transformers.LlamaModel(cfg)
    decoder = name in ("gpt2", "llama")

    class LastHidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids):
            kw = {"use_cache": False} if decoder else {}
            return self.model(input_ids=input_ids, **kw).last_hidden_state

    return LastHidden().eval()


@pytest.mark.parametrize("name", ["bert", "distilbert", pytest.param("gpt2", marks=pytest.mark.slow),
                                  pytest.param("llama", marks=pytest.mark.slow)])
def test_hf_model_fully_delegated_and_matches_eager(name, vk_lower):
    """BERT / DistilBERT / GPT-2 / Llama (small configs, int64 token ids): one Vulkan partition, within
    1e-4 of eager. The token embedding reads int64 ids narrowed to int32 at upload; the position ids,
    token types and attention masks derived from aranges and buffers fold into payload constants.
    (BERT's lowering used to raise for aten.embedding; until int/bool tensors it ran 92 of 100 nodes.)"""
    torch.manual_seed(0)
    model = _hf_model(name)
    ids = torch.randint(0, 100, (1, 8))
    edge = vk_lower(model, (ids,))
    report = partition_report(edge)
    assert not report.cpu_nodes and len(report.delegates) == 1, str(report)
    _run_and_compare(edge, model, ids)
