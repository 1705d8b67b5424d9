"""Static KV cache on Vulkan: cache writes (index_copy_, index_put_ with one index tensor, slice
assignment) into a mutable buffer, whose new value the delegate returns and the ExecuTorch runtime
writes back, so the next call reads it; and the Llama-style decoder (`vulkan_delegate.kv_decoder`:
RoPE, RMSNorm, grouped-query causal SDPA over the cache, SwiGLU, 4-bit grouped linears) exported as
`prefill` + `decode` from one export, fully delegated, greedy tokens equal to eager's."""

from __future__ import annotations

import re

import pytest
import torch
from executorch.exir import to_edge_transform_and_lower

from arm_tosa_core.testing import compare_outputs
from vulkan_delegate import VulkanPartitioner, VulkanQuantizer, partition_report
from vulkan_delegate.kv_decoder import (
    DecoderConfig,
    LlamaDecoder,
    eager_runner,
    greedy_decode,
    load_methods,
    lower_methods,
    methods_to_pte,
    pte_runner,
    step_inputs,
)
from vulkan_delegate.lower import lower_program

PROMPT = torch.tensor([3, 1, 4, 1, 5, 9])


class CacheWrites(torch.nn.Module):
    """Each cache-write form into its own [1, 2, 8, 4] buffer; returns every buffer read back."""

    def __init__(self) -> None:
        super().__init__()
        for name in ("a", "b", "c"):
            self.register_buffer(name, torch.zeros(1, 2, 8, 4))

    def forward(self, pos: torch.Tensor, new: torch.Tensor) -> tuple[torch.Tensor, ...]:
        self.a.index_copy_(2, pos, new * 2)
        self.b[:, :, pos] = new - 1
        self.c[:, :, 2:4] = self.c[:, :, 2:4] + new  # slice assignment: a running sum in rows 2..3
        return self.a + 1, self.b * 3, self.c.clone()


def _lower(model, inputs):
    return to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[VulkanPartitioner()])


def test_cache_writes_persist_across_calls_through_the_runtime():
    """Three calls of one loaded program at different positions: each call's output must hold every
    earlier call's writes (the state lives in the program's buffers, written back from the delegate)."""
    model = CacheWrites().eval()
    calls = [(torch.tensor([1, 2]), torch.randn(1, 2, 2, 4, generator=torch.Generator().manual_seed(i)))
             for i in range(3)]
    calls[1] = (torch.tensor([5, 7]), calls[1][1])
    edge = _lower(model, calls[0])
    report = partition_report(edge)
    assert not report.cpu_nodes and len(report.delegates) == 1, str(report)
    methods = load_methods(methods_to_pte(edge))  # holds the program: a Method alone does not
    forward = methods["forward"]
    model = CacheWrites().eval()
    for step, (pos, new) in enumerate(calls):
        outs = forward.execute([pos, new])
        with torch.no_grad():
            want = model(pos, new)
        for o, w in zip(outs, want, strict=True):
            comparison = compare_outputs(o, w)
            assert comparison.max_error <= 1e-6 * max(comparison.max_magnitude, 1.0), f"call {step}: {comparison}"
    assert float(want[2].abs().sum()) > 0  # the running sum is not trivially zero


def _check_decoder(cfg: DecoderConfig, steps: int, bits: int | None = 4, group_size: int = 16):
    """Lower prefill + decode, assert both fully delegated, run `steps` greedy decodes through the .pte
    and eagerly: the same tokens, logits within 1e-4 of eager's largest. Returns the .pte, eager logits and
    the lowered program."""
    model = LlamaDecoder(cfg).eval()
    if bits is not None:
        model = VulkanQuantizer(bits=bits, group_size=group_size).quantize(model)
    edge = lower_methods(model, PROMPT.numel())
    for method in ("prefill", "decode"):
        report = partition_report(edge.exported_program(method))
        assert not report.cpu_nodes and len(report.delegates) == 1, f"{method}:\n{report}"
    pte = methods_to_pte(edge)
    eager_tokens, eager_logits = greedy_decode(eager_runner(model), PROMPT, steps, cfg.max_len)
    tokens, logits = greedy_decode(pte_runner(pte), PROMPT, steps, cfg.max_len)
    assert tokens == eager_tokens
    assert len(set(tokens)) > 1, tokens  # a constant stream would not test the feedback
    bound = 1e-4 * max(float(e.abs().max()) for e in eager_logits)
    for step, (got, want) in enumerate(zip(logits, eager_logits, strict=True)):
        comparison = compare_outputs(got, want)
        assert comparison.within(bound), f"step {step}: {comparison.max_error} > {bound} {comparison.nonfinite}"
    return pte, eager_logits, edge


TINY = DecoderConfig(vocab=64, dim=32, heads=4, kv_heads=2, hidden=64, layers=1, max_len=40)


def test_decoder_32_greedy_tokens_equal_eager_and_the_cache_carries_state():
    """The tiny 4-bit decoder: 32 greedy steps through the .pte give eager's tokens. Decoding the first
    generated token on a freshly loaded program (an empty cache, no prefill) gives other logits: the
    match rests on the cache prefill wrote."""
    pte, eager_logits, _ = _check_decoder(TINY, steps=32)
    first = int(eager_logits[0].argmax())
    fresh = pte_runner(pte)("decode", step_inputs(PROMPT.numel(), torch.tensor([first])))[0, -1]
    assert (fresh - eager_logits[1]).abs().max() > 1e-2 * eager_logits[1].abs().max()


#: 4-bit weights in groups of 32 and K a multiple of 32: the block linears run `linear_q_gemv`
GEMV_CFG = DecoderConfig(vocab=64, dim=64, heads=4, kv_heads=2, hidden=96, layers=1, max_len=40)


def test_decode_step_is_fused_and_its_32_greedy_tokens_equal_eager():
    """The decode step of a 4-bit decoder whose linears run `linear_q_gemv`: 32 greedy tokens equal eager's
    (logits within 1e-4), and the step is one dispatch per job: RoPE one `rope` per q/k (not slices, neg,
    cat copies, muls, add), the head reshapes views (no permute copies), silu, SwiGLU's product and both
    residual adds in the GEMV epilogues, every RMS norm inside the GEMVs that read it (no norm_row), the
    attention over the cache one `attention_decode` (not matmul, mask, softmax, matmul)."""
    edge = _check_decoder(GEMV_CFG, steps=32, group_size=32)[2]
    decode = edge.exported_program("decode").graph_module.lowered_module_0.original_module
    shaders = [re.sub(r"_(f32|i32).*", "", d.shader) for d in lower_program(decode, fp16=False).dispatches]
    body = [s for s in shaders if s not in ("take", "compare", "copy")]  # embedding, rope tables, mask, output
    assert body == ["linear_q_gemv", "linear_q_gemv", "linear_q_gemv", "rope", "rope", "index_write",
                    "index_write", "attention_decode", "linear_q_gemv", "linear_q_gemv",
                    "linear_q_gemv", "linear_q_gemv", "linear_q_gemv"], shaders
    assert shaders.count("copy") == 3, shaders  # only the logits and both caches into their output buffers


@pytest.mark.slow
@pytest.mark.parametrize("bits", [4, None])
def test_decoder_two_layers_32_greedy_tokens_equal_eager(bits):
    _check_decoder(DecoderConfig(), steps=32, bits=bits, group_size=32)


def test_cache_write_forms_that_do_not_lower_stay_on_the_cpu_with_a_reason():
    """index_put with accumulate=True or two index tensors is left on the CPU, named; the rest lowers."""

    class Unsupported(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("cache", torch.zeros(2, 8, 4))

        def forward(self, pos: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
            self.cache.index_put_((torch.tensor([0, 1]), pos), new, accumulate=True)
            y = self.cache.index_put((torch.tensor([0, 1]), pos), new)
            return self.cache * 2 + y

    report = partition_report(_lower(Unsupported(), (torch.tensor([1, 2]), torch.ones(2, 4))))
    reasons = sorted(c.reason for c in report.cpu_nodes if "index_put" in c.target)
    assert reasons == ["index_put with accumulate=True (the Vulkan delegate overwrites; only a cache write is lowered)",
                       "index_put with several index tensors (one is lowered, e.g. cache[:, :, pos] = v)"], str(report)
