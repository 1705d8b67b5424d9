"""Static KV cache under TOSA-1.0+FP: a Llama-style decoder (`kv_cache_models.StaticCacheDecoder`) with its
cache as registered buffers written by index_copy_ / index_put_, exported as `prefill` (N tokens) and
`decode` (one token), each lowered as one partition (the cache writes are SCATTERs), run as one `.pte`
through the ExecuTorch runtime (runtime_cpp's TOSABackend): greedy tokens equal eager's, logits within
1e-5 of eager's largest, and the cache prefill wrote is what decode reads."""

import pytest
import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report
from arm_tosa_core.kv_cache_models import (
    StaticCacheDecoder,
    assert_greedy_decodes_alike,
    assert_one_delegate_per_method,
    eager_runner,
    export_methods,
    methods_to_pte,
    pte_runner,
    step_inputs,
)

PROMPT = torch.tensor([3, 1, 4, 1, 5, 9])


def _lower(model, spec="TOSA-1.0+FP"):
    programs = export_methods(model, PROMPT.numel(), model.max_len)
    return to_edge_transform_and_lower(programs, partitioner=[TOSAPartitioner(TosaCompileSpec(spec))],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))


def _check_decode(model, steps):
    edge = _lower(model)
    for report in assert_one_delegate_per_method(edge, None).values():
        assert report.delegates[0].ops.get("SCATTER", 0) == 2 * len(model.blocks), report
    pte = methods_to_pte(edge)
    return pte, assert_greedy_decodes_alike(pte_runner(pte), eager_runner(model), PROMPT, steps, model.max_len, rel=1e-5)


def test_decoder_index_put_cache_runs_through_the_pte():
    """A few steps (the 32-step runs are slow-marked below). Decoding the same token on a freshly loaded
    program (an empty cache) gives other logits: the state prefill wrote is what the match rests on."""
    model = StaticCacheDecoder(vocab=32, dim=16, heads=2, layers=1, max_len=12, update="index_put").eval()
    pte, eager_logits = _check_decode(model, steps=3)
    fresh = pte_runner(pte)("decode", step_inputs(PROMPT.numel(), torch.tensor([int(eager_logits[0].argmax())]),
                                                  model.max_len))[0, -1]
    assert (fresh - eager_logits[1]).abs().max() > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("update", ["index_copy", "index_put"])
def test_decoder_32_greedy_steps_equal_eager(update):
    model = StaticCacheDecoder(layers=2, max_len=40, update=update).eval()
    _check_decode(model, steps=32)


def test_a_cache_write_that_cannot_lower_stays_on_the_cpu_with_a_reason():
    """index_put with accumulate=True (SCATTER overwrites) is left on the CPU, named."""

    class Accumulate(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("cache", torch.zeros(1, 2, 8, 4))

        def forward(self, pos, new):
            self.cache.index_put_((torch.tensor(0), torch.tensor(0), pos), new, accumulate=True)
            return self.cache * 2

    edge = to_edge_transform_and_lower(
        torch.export.export(Accumulate(), (torch.tensor([1, 2]), torch.ones(2, 4))),
        partitioner=[TOSAPartitioner(TosaCompileSpec("TOSA-1.0+FP"))],
        compile_config=EdgeCompileConfig(_check_ir_validity=False))
    reasons = {c.target: c.reason for c in partition_report(edge).cpu_nodes}
    assert any("accumulate=True" in r or "several index tensors" in r for t, r in reasons.items()
               if "index_put" in t), reasons


def test_stateful_intermediates_carry_the_cache_between_methods():
    """`StatefulIntermediateRunner` runs `write` then `read` (two methods, one cache buffer) with every
    delegate node exposed: each call equals the eager module's same call (the second reads what the first
    wrote), before and after `to_executorch` (which turns the returned buffer into an in-place copy_),
    and the exposed index_copy is the cache the eager module holds after that call."""
    from arm_tosa_core.intermediates import StatefulIntermediateRunner
    from arm_tosa_core.kv_cache_models import CacheWrite

    gen = torch.Generator().manual_seed(0)
    calls = [("write", (torch.tensor([1, 4]), torch.randn(1, 2, 2, 4, generator=gen))),
             ("read", (torch.tensor([0, 4]), torch.randn(1, 2, 2, 4, generator=gen)))]
    programs = {m: torch.export.export(CacheWrite(), c) for m, c in calls}
    edge = to_edge_transform_and_lower(programs, partitioner=[TOSAPartitioner(TosaCompileSpec("TOSA-1.0+FP"))],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    for form in ("edge", "to_executorch"):
        if form == "to_executorch":
            methods_to_pte(edge)
        eager, runner = CacheWrite(), StatefulIntermediateRunner(edge, ["write", "read"], lambda n: True)
        for method, inputs in calls:
            want = eager(*inputs)
            got, seen = runner.run(method, inputs)
            writes = [v for n, v in seen.items() if "index_copy" in n.name or "index_put" in n.name]
            assert torch.allclose(got, want, atol=1e-6), (form, method)
            assert writes and all(torch.allclose(w.float(), eager.cache, atol=1e-6) for w in writes), (form, method)
