"""A Llama-style decoder with a static KV cache, exported as two methods (`prefill`: N tokens, `decode`:
one token), and the greedy loop that drives either its eager form or a loaded `.pte`.

The cache is a pair of registered buffers per layer, [1, heads, max_len, head_dim], written in place
(`index_copy_` or `cache[:, :, pos] = new`, which exports as index_put) at the positions `input_pos`
names. torch.export turns each write into a functional op plus a BUFFER_MUTATION output; the TOSA rule
lowers the op to SCATTER, the delegate returns the new cache, and the ExecuTorch runtime writes it back
into the program's buffer, so the next call (of either method, with `share_mutable_buffers`) reads it.
The attention mask is an input (`cache_mask`): a position attends to the cache entries at or before it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.nn import functional as F

if TYPE_CHECKING:
    from .report import PartitionReport

CACHE_UPDATES = ("index_copy", "index_put")


class RMSNorm(nn.Module):
    """x * rsqrt(mean(x^2) + eps) * weight, written with ops that have INT rules (mul, mean, add, rsqrt
    TABLE); `nn.RMSNorm` exports as one fused op the INT profile does not take."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * self.weight


class _CachedAttention(nn.Module):
    def __init__(self, dim: int, heads: int, max_len: int, update: str) -> None:
        super().__init__()
        self.heads, self.head_dim, self.update = heads, dim // heads, update
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.register_buffer("k_cache", torch.zeros(1, heads, max_len, self.head_dim))
        self.register_buffer("v_cache", torch.zeros(1, heads, max_len, self.head_dim))

    def _write(self, cache: torch.Tensor, pos: torch.Tensor, new: torch.Tensor) -> None:
        if self.update == "index_copy":
            cache.index_copy_(2, pos, new)
        else:
            cache[:, :, pos] = new

    def forward(self, x: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = (p(x).view(b, n, self.heads, self.head_dim).transpose(1, 2) for p in (self.q, self.k, self.v))
        self._write(self.k_cache, pos, k)
        self._write(self.v_cache, pos, v)
        y = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask)
        return self.o(y.transpose(1, 2).reshape(b, n, -1))


class _Block(nn.Module):
    def __init__(self, dim: int, heads: int, max_len: int, update: str) -> None:
        super().__init__()
        self.attn_norm, self.mlp_norm = RMSNorm(dim), RMSNorm(dim)
        self.attn = _CachedAttention(dim, heads, max_len, update)
        self.gate, self.up, self.down = nn.Linear(dim, 2 * dim, bias=False), nn.Linear(dim, 2 * dim, bias=False), \
            nn.Linear(2 * dim, dim, bias=False)

    def forward(self, x: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), pos, mask)
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class StaticCacheDecoder(nn.Module):
    """Token embedding + learned positions, `layers` pre-norm blocks with a static KV cache, LM head.

    forward(tokens [1, N] int64, input_pos [N] int64, cache_mask [1, 1, N, max_len] bool) -> logits
    [1, N, vocab]; `update` picks the cache write ("index_copy" or "index_put"). Seeded weights."""

    def __init__(self, vocab: int = 64, dim: int = 32, heads: int = 2, layers: int = 2, max_len: int = 48,
                 update: str = "index_copy", seed: int = 0) -> None:
        super().__init__()
        if update not in CACHE_UPDATES:
            raise ValueError(f"unknown cache update {update!r}; valid: {CACHE_UPDATES}")
        torch.manual_seed(seed)
        self.max_len = max_len
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(max_len, dim)
        self.blocks = nn.ModuleList(_Block(dim, heads, max_len, update) for _ in range(layers))
        self.norm, self.head = RMSNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor, cache_mask: torch.Tensor) -> torch.Tensor:
        x = self.tok(tokens) + self.pos(input_pos)
        for block in self.blocks:
            x = block(x, input_pos, cache_mask)
        return self.head(self.norm(x))

    def reset_cache(self) -> None:
        for name, buf in self.named_buffers():
            if name.endswith("_cache"):
                buf.zero_()


class CacheWrite(nn.Module):
    """The smallest in-place cache write: `index_copy_` of `new * 2` into a [1, 2, 6, 4] buffer at
    positions `pos`, then the cache read back (`+ 1`). Tests of the write's quantization and placement."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cache", torch.zeros(1, 2, 6, 4))

    def forward(self, pos: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        self.cache.index_copy_(2, pos, new * 2)
        return self.cache + 1


def step_inputs(start: int, tokens: torch.Tensor, max_len: int) -> tuple[torch.Tensor, ...]:
    """(tokens [1, N], input_pos [N], cache_mask [1, 1, N, max_len]) for N tokens starting at `start`."""
    n = tokens.shape[-1]
    pos = torch.arange(start, start + n, dtype=torch.int64)
    mask = (torch.arange(max_len)[None, :] <= pos[:, None]).view(1, 1, n, max_len)
    return tokens.view(1, n).to(torch.int64), pos, mask


def method_inputs(prompt_len: int, max_len: int) -> dict[str, tuple[torch.Tensor, ...]]:
    """Example inputs of `prefill` (prompt_len tokens at 0..) and `decode` (one token at prompt_len)."""
    return {"prefill": step_inputs(0, torch.zeros(prompt_len, dtype=torch.int64), max_len),
            "decode": step_inputs(prompt_len, torch.zeros(1, dtype=torch.int64), max_len)}


def export_methods(model: nn.Module, prompt_len: int, max_len: int) -> dict[str, torch.export.ExportedProgram]:
    """torch.export of `prefill` (prompt_len tokens at 0..) and `decode` (one token), each on a fresh cache
    (export runs the model, which writes the buffers)."""
    programs = {}
    for name, example in method_inputs(prompt_len, max_len).items():
        programs[name] = torch.export.export(model, example, strict=True)
        if hasattr(model, "reset_cache"):
            model.reset_cache()
    return programs


def greedy_decode(run: Callable[[str, tuple], torch.Tensor], prompt: torch.Tensor, steps: int, max_len: int
                  ) -> tuple[list[int], list[torch.Tensor]]:
    """Prefill `prompt`, then `steps` one-token decodes, each feeding back the argmax of the last logits.

    `run(method, inputs)` runs "prefill" or "decode" on the same cache (an eager model, a loaded .pte).
    Returns the generated tokens and each step's last-position logits."""
    if prompt.numel() + steps > max_len:
        raise ValueError(f"{prompt.numel()} prompt tokens + {steps} steps exceed the cache ({max_len} positions)")
    logits = run("prefill", step_inputs(0, prompt, max_len))[0, -1]
    tokens, history = [], [logits]
    for i in range(steps):
        tokens.append(int(torch.argmax(logits)))
        logits = run("decode", step_inputs(prompt.numel() + i, torch.tensor([tokens[-1]]), max_len))[0, -1]
        history.append(logits)
    return tokens, history


def forced_decode(run: Callable[[str, tuple], torch.Tensor], prompt: torch.Tensor, tokens: Sequence[int],
                  max_len: int) -> list[torch.Tensor]:
    """Prefill `prompt`, then one decode per token of `tokens` (given, not each model's own argmax: every
    model sees the same sequence, so their logits compare step by step). Returns each step's
    last-position logits (the prefill's, then one per decode)."""
    if prompt.numel() + len(tokens) > max_len:
        raise ValueError(f"{prompt.numel()} prompt tokens + {len(tokens)} steps exceed the cache ({max_len} positions)")
    history = [run("prefill", step_inputs(0, prompt, max_len))[0, -1]]
    for i, token in enumerate(tokens):
        history.append(run("decode", step_inputs(prompt.numel() + i, torch.tensor([token]), max_len))[0, -1])
    return history


def assert_greedy_decodes_alike(run: Callable[[str, tuple], torch.Tensor],
                                reference: Callable[[str, tuple], torch.Tensor], prompt: torch.Tensor, steps: int,
                                max_len: int, *, rel: float = 0.0, atol: float = 0.0) -> list[torch.Tensor]:
    """Greedy-decode `prompt` for `steps` with `run` (e.g. a `.pte`) and with `reference` (eager, or the
    fake-quant modules), each over its own cache, and assert equal tokens and every step's logits within
    `atol + rel * (the reference's largest |logit|)`, NaN-aware. Returns the reference's logits."""
    from .testing import compare_outputs

    want_tokens, want_logits = greedy_decode(reference, prompt, steps, max_len)
    tokens, logits = greedy_decode(run, prompt, steps, max_len)
    bound = atol + rel * max(float(w.abs().max()) for w in want_logits)
    for step, (got, want) in enumerate(zip(logits, want_logits, strict=True)):
        comparison = compare_outputs(got, want)
        assert comparison.within(bound), f"step {step}: {comparison.max_error} > {bound} {comparison.nonfinite}"
    assert tokens == want_tokens, f"tokens {tokens} != reference {want_tokens}"
    return want_logits


def assert_one_delegate_per_method(edge, boundary_text: str | None, methods: Sequence[str] = ("prefill", "decode")
                                   ) -> dict[str, PartitionReport]:
    """Assert each method of a lowered program is one delegate, and every node it leaves on the CPU gives
    `boundary_text` in its reason (the quantize/dequantize "at the float boundary of the program"); with
    None, no node may stay on the CPU. Returns each method's `partition_report`."""
    from .report import (
        partition_report,  # here: bench_decoder loads this file on its own, outside the package
    )

    reports = {}
    for method in methods:
        report = reports[method] = partition_report(edge.exported_program(method))
        assert len(report.delegates) == 1, f"{method}:\n{report}"
        assert all(boundary_text is not None and boundary_text in c.reason for c in report.cpu_nodes), \
            f"{method}:\n{report}"
    return reports


def methods_to_pte(edge) -> bytes:
    """The `.pte` of a lowered multi-method program whose methods share their mutable buffers (the
    cache): exir plans those buffers once for all methods (`share_mutable_buffers`), and the runtime
    gives every host-only method of a loaded program the same allocation, so `decode` reads what
    `prefill` wrote."""
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass

    planning = MemoryPlanningPass(alloc_mutable_buffers=True, share_mutable_buffers=True)
    with torch.no_grad():  # exir's passes run the graph; its in-place buffer write must not see autograd
        return edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=planning,
                                                          emit_mutable_buffer_names=True)).buffer


def pte_runner(pte: bytes) -> Callable[[str, tuple], torch.Tensor]:
    """`run(method, inputs)` over one loaded program (its methods keep their state between calls), for
    `greedy_decode`; needs runtime-cpp's backends."""
    from .pte_runtime import _runtime

    _, runtime = _runtime()
    program = runtime.load_program(pte)
    methods = {name: program.load_method(name) for name in sorted(program.method_names)}

    def run(method: str, inputs: tuple) -> torch.Tensor:
        return methods[method].execute([t.contiguous() for t in inputs])[0].clone()

    # A Method does not keep its Program (nor the Program its bytes) alive: without this the methods
    # read freed memory once `program` is collected ("Expected 0 inputs, got 3" was seen once).
    run.program = program
    return run


def eager_runner(model: nn.Module) -> Callable[[str, tuple], torch.Tensor]:
    """`run(method, inputs)` on an eager model (both methods are its forward), cache reset first."""
    model.reset_cache()

    def run(method: str, inputs: tuple) -> torch.Tensor:
        with torch.no_grad():
            return model(*inputs)

    return run


class FunctionalCacheDecoder(nn.Module):
    """`model` (a `StaticCacheDecoder`, the same weights) with no mutable buffer: the caches are inputs and
    the updated caches outputs (`cache.index_copy(2, pos, new)`, out of place), the form the competitor's
    Arm backend lowers (it cannot lower a cache written in place). `cache=False`: attention over the call's
    own tokens only (no cache).

    forward(tokens, input_pos, cache_mask, k_0, v_0, k_1, v_1, ...) -> (logits, k_0', v_0', ...)."""

    def __init__(self, model: StaticCacheDecoder, cache: bool = True) -> None:
        super().__init__()
        self.model, self.cache = model, cache

    def _attn(self, attn, x, pos, mask, kc, vc):
        b, n, _ = x.shape
        q, k, v = (p(x).view(b, n, attn.heads, attn.head_dim).transpose(1, 2) for p in (attn.q, attn.k, attn.v))
        if self.cache:
            kc, vc = kc.index_copy(2, pos, k), vc.index_copy(2, pos, v)
            y = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=n > 1)
        return attn.o(y.transpose(1, 2).reshape(b, n, -1)), kc, vc

    def forward(self, tokens, input_pos, cache_mask, *caches):
        m, out = self.model, []
        x = m.tok(tokens) + m.pos(input_pos)
        for i, block in enumerate(m.blocks):
            kc, vc = (caches[2 * i], caches[2 * i + 1]) if self.cache else (None, None)
            a, kc, vc = self._attn(block.attn, block.attn_norm(x), input_pos, cache_mask, kc, vc)
            x = x + a
            h = block.mlp_norm(x)
            x = x + block.down(F.silu(block.gate(h)) * block.up(h))
            out += [kc, vc] if self.cache else []
        return (m.head(m.norm(x)), *out)

    def cache_shapes(self) -> list[torch.Size]:
        """The shape of each cache input, in order (k_0, v_0, k_1, ...)."""
        return [b.shape for name, b in self.model.named_buffers() if name.endswith("_cache")]


def functional_runner(call: Callable[[str, tuple], tuple], cache_shapes: Sequence[torch.Size]
                      ) -> Callable[[str, tuple], torch.Tensor]:
    """`run(method, inputs)` for `greedy_decode` over a `FunctionalCacheDecoder` form: `call(method, inputs)`
    runs that method (eager, prepared or converted modules); the caches a call returns are the next call's
    inputs, and a prefill starts from zero caches."""
    caches: list[torch.Tensor] = []

    def run(method: str, inputs: tuple) -> torch.Tensor:
        nonlocal caches
        if method == "prefill":
            caches = [torch.zeros(shape) for shape in cache_shapes]
        logits, *caches = call(method, (*inputs, *caches))
        return logits

    return run
