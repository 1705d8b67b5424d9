"""transformers' own StaticCache (`TorchExportableModuleWithStaticCache`, a random-init Llama) exported with
`hf_static_cache.export_hf_methods`: `prefill` and `decode` over one cache, strict and non-strict."""

import pytest
import torch

from arm_tosa_core.hf_static_cache import build_hf_static_cache_llama, export_hf_methods


def _mutated_buffers(program):
    return sorted(program.graph_signature.buffers_to_mutate.values())


@pytest.mark.parametrize("strict", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_static_cache_exports_prefill_and_decode_writing_its_buffers(strict):
    """Non-strict export failed in run_decompositions ("expected compiled_fn to be GraphModule") while the
    cache layers held tensors other than the wrapper's buffers; now both methods write the cache as buffer
    mutations and the exported decode, run after the exported prefill on the same buffers, gives eager's logits."""
    model = build_hf_static_cache_llama(layers=1, max_len=12)
    programs = export_hf_methods(model, prompt_len=4, strict=strict)
    expected = ["cumulative_length_0", "key_cache_0", "value_cache_0"]
    for name, program in programs.items():
        assert _mutated_buffers(program.run_decompositions({})) == expected, name
    prompt = (torch.tensor([[3, 1, 4, 1]]), torch.arange(4))
    step = (torch.tensor([[5]]), torch.tensor([4]))
    with torch.no_grad():
        model(*prompt)
        want = model(*step)
        model.reset_cache()
        prefill, decode = programs["prefill"].module(), programs["decode"].module()
        for buf in expected:  # the two exported modules share one cache, as the .pte's methods do
            setattr(decode, buf, getattr(prefill, buf))
        prefill(*prompt)
        got = decode(*step)
    assert torch.isfinite(got).all()
    assert (got - want).abs().max() <= 1e-5 * want.abs().max()
