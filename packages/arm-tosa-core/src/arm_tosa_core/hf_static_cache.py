"""`transformers`' own static KV cache (`StaticCache` through `TorchExportableModuleWithStaticCache`) on a
small random-init Llama, exported as `prefill` (N tokens) and `decode` (one token) over one shared cache:
the recipe the tests and the README use.

Why the wrapper below rebinds the cache tensors on every call: `TorchExportableModuleWithStaticCache`
registers each `StaticLayer`'s `keys` / `values` / `cumulative_length` as buffers of the wrapper, but
the layer keeps reading and writing its own attributes. Non-strict `torch.export` swaps the wrapper's
buffer *attributes* for traced tensors; the layers still hold the original eager tensors, so export
lifts them as constants (named after the attention module that first reads them) and the cache's
`index_copy_` becomes a write into a constant, which aot_autograd cannot functionalize into a graph
("AssertionError: expected compiled_fn to be GraphModule" in `run_decompositions`). Pointing each layer
at the wrapper's buffers at the start of `forward` makes the traced write a BUFFER_MUTATION, in strict
and non-strict export alike (eagerly it is the same tensor, so nothing changes).

The program's inputs are `(input_ids [1, N] int64, cache_position [N] int64)`; the wrapper copies
`cache_position[0]` into each layer's `cumulative_length` and the model builds its positions, causal
mask and cache indices from it. `hf_runner` adapts an eager model or a `.pte` runner to
`kv_cache_models.greedy_decode` (which also passes a mask; transformers builds its own).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

__all__ = ["HF_PROMPT_LEN", "build_hf_static_cache_llama", "export_hf_methods", "hf_eager_runner", "hf_runner",
           "hf_step_inputs"]

HF_PROMPT_LEN = 6


def build_hf_static_cache_llama(vocab: int = 64, hidden: int = 32, layers: int = 2, heads: int = 2,
                                kv_heads: int = 1, max_len: int = 48, seed: int = 0) -> nn.Module:
    """A random-init `LlamaForCausalLM` (seeded; no download) wrapped with transformers' StaticCache of
    `max_len` positions; `forward(input_ids, cache_position) -> logits`, `.max_len`, `.reset_cache()`."""
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM
    from transformers.integrations.executorch import TorchExportableModuleWithStaticCache

    class StaticCacheLM(TorchExportableModuleWithStaticCache):
        def forward(self, input_ids: torch.Tensor, cache_position: torch.Tensor) -> torch.Tensor:
            for i, layer in enumerate(self.static_cache.layers):  # see the module docstring
                layer.keys, layer.values = getattr(self, f"key_cache_{i}"), getattr(self, f"value_cache_{i}")
                layer.cumulative_length = getattr(self, f"cumulative_length_{i}")
            return super().forward(input_ids=input_ids, cache_position=cache_position)

        def reset_cache(self) -> None:
            for name, buf in self.named_buffers():
                if name.startswith(("key_cache_", "value_cache_", "cumulative_length_")):
                    buf.zero_()

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=max_len,
                         attn_implementation="sdpa")
    model = LlamaForCausalLM(config).eval()
    model.generation_config = GenerationConfig(use_cache=True, cache_implementation="static",
                                               cache_config={"batch_size": 1, "max_cache_len": max_len})
    wrapper = StaticCacheLM(model, batch_size=1, max_cache_len=max_len).eval()
    wrapper.max_len = max_len
    return wrapper


def hf_step_inputs(start: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Example `(input_ids [1, n], cache_position [n])` for n tokens from position `start`."""
    return torch.zeros(1, n, dtype=torch.int64), torch.arange(start, start + n, dtype=torch.int64)


def export_hf_methods(model: nn.Module, prompt_len: int = HF_PROMPT_LEN, strict: bool = False
                      ) -> dict[str, torch.export.ExportedProgram]:
    """torch.export of `prefill` (prompt_len tokens at 0..) and `decode` (one token at prompt_len), under
    no_grad (the parameters of a `from_config` model require grad), cache reset after each."""
    programs = {}
    for name, (start, n) in (("prefill", (0, prompt_len)), ("decode", (prompt_len, 1))):
        with torch.no_grad():
            programs[name] = torch.export.export(model, hf_step_inputs(start, n), strict=strict)
        model.reset_cache()
    return programs


def hf_runner(run: Callable[[str, tuple], torch.Tensor]) -> Callable[[str, tuple], torch.Tensor]:
    """Adapt a `run(method, (input_ids, cache_position))` to `greedy_decode`'s `(tokens, pos, mask)`
    inputs: the mask is dropped (the model builds it from `cache_position`)."""
    return lambda method, inputs: run(method, (inputs[0], inputs[1]))


def hf_eager_runner(model: nn.Module) -> Callable[[str, tuple], torch.Tensor]:
    """`greedy_decode`'s runner over the eager wrapper (cache reset first)."""
    from .kv_cache_models import eager_runner

    return hf_runner(eager_runner(model))
