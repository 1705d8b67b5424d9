"""A Llama-style decoder with a static KV cache for the Vulkan delegate, exported as two methods of
one program (`prefill`: N tokens, `decode`: one token), and the greedy loop that drives its eager form
or the loaded `.pte`.

Each layer's cache is a pair of registered buffers [1, kv_heads, max_len, head_dim] written in place by
`index_copy_` at the positions `input_pos` names. torch.export turns the write into a functional op
plus a BUFFER_MUTATION output; the delegate computes the new cache (`ops/cache_write.py`) and returns
it, and the ExecuTorch runtime writes it back into the program's buffer. `decoder_pte` plans the
buffers once for both methods (exir's `share_mutable_buffers`), so `decode` reads what `prefill` wrote.
The causal mask over the cache (`arange(max_len) <= input_pos`) and the RoPE angles (rows of a table
picked by `input_pos`) are computed in the program, on the device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from arm_tosa_core.kv_cache_models import eager_runner, methods_to_pte  # noqa: F401  (shared with the Arm flow)

from .quantizer import QuantizedLinear, VulkanQuantizer


@dataclass(frozen=True)
class DecoderConfig:
    vocab: int = 96
    dim: int = 64
    heads: int = 4
    kv_heads: int = 2  # grouped-query attention: heads / kv_heads query heads per cache head
    hidden: int = 128  # SwiGLU width
    layers: int = 2
    max_len: int = 48
    rope_theta: float = 10000.0

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads


def _rope_tables(cfg: DecoderConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [max_len, head_dim] (the half-split layout of Llama's rotate_half)."""
    inv = 1.0 / cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2).float() / cfg.head_dim)
    angles = torch.outer(torch.arange(cfg.max_len).float(), inv)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class _Attention(nn.Module):
    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        kv = cfg.kv_heads * cfg.head_dim
        self.q, self.k, self.v = nn.Linear(cfg.dim, cfg.dim, bias=False), nn.Linear(cfg.dim, kv, bias=False), \
            nn.Linear(cfg.dim, kv, bias=False)
        self.o = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.register_buffer("k_cache", torch.zeros(1, cfg.kv_heads, cfg.max_len, cfg.head_dim))
        self.register_buffer("v_cache", torch.zeros(1, cfg.kv_heads, cfg.max_len, cfg.head_dim))

    def forward(self, x: torch.Tensor, pos: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        c = self.cfg
        q = self.q(x).view(b, n, c.heads, c.head_dim).transpose(1, 2)
        k = self.k(x).view(b, n, c.kv_heads, c.head_dim).transpose(1, 2)
        v = self.v(x).view(b, n, c.kv_heads, c.head_dim).transpose(1, 2)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        y = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask,
                                           enable_gqa=c.kv_heads != c.heads)
        return self.o(y.transpose(1, 2).reshape(b, n, c.dim))


class _Block(nn.Module):
    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.attn_norm, self.mlp_norm = nn.RMSNorm(cfg.dim, eps=1e-5), nn.RMSNorm(cfg.dim, eps=1e-5)
        self.attn = _Attention(cfg)
        self.gate, self.up = nn.Linear(cfg.dim, cfg.hidden, bias=False), nn.Linear(cfg.dim, cfg.hidden, bias=False)
        self.down = nn.Linear(cfg.hidden, cfg.dim, bias=False)

    def forward(self, x, pos, cos, sin, mask):
        x = x + self.attn(self.attn_norm(x), pos, cos, sin, mask)
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class LlamaDecoder(nn.Module):
    """Token embedding, `layers` pre-norm blocks (RMSNorm, RoPE, grouped-query causal attention over the
    static cache, SwiGLU MLP), final RMSNorm, LM head. forward(tokens [1, N] int64, input_pos [N] int64)
    -> logits [1, N, vocab]. Seeded random weights (the RMSNorm gains too, so they are not all ones)."""

    def __init__(self, cfg: DecoderConfig = DecoderConfig(), seed: int = 0) -> None:
        super().__init__()
        if cfg.dim % cfg.heads or cfg.heads % cfg.kv_heads or cfg.head_dim % 2:
            raise ValueError(f"{cfg}: dim must split into heads of even size and heads into kv_heads groups")
        torch.manual_seed(seed)
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.dim)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.layers))
        self.norm, self.head = nn.RMSNorm(cfg.dim, eps=1e-5), nn.Linear(cfg.dim, cfg.vocab, bias=False)
        for m in self.modules():
            if isinstance(m, nn.RMSNorm):
                nn.init.uniform_(m.weight, 0.5, 1.5)
        cos, sin = _rope_tables(cfg)
        self.register_buffer("rope_cos", cos)
        self.register_buffer("rope_sin", sin)
        self.register_buffer("positions", torch.arange(cfg.max_len))

    def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        x = self.tok(tokens)
        cos, sin = self.rope_cos[input_pos], self.rope_sin[input_pos]  # [N, head_dim], broadcast over heads
        mask = self.positions[None, :] <= input_pos[:, None]  # [N, max_len]: the cache entries at or before
        for block in self.blocks:
            x = block(x, input_pos, cos, sin, mask)
        return self.head(self.norm(x))

    def reset_cache(self) -> None:
        for name, buf in self.named_buffers():
            if name.endswith("_cache"):
                buf.zero_()


def step_inputs(start: int, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens [1, N], input_pos [N]) for N tokens starting at position `start`."""
    n = tokens.numel()
    return tokens.reshape(1, n).to(torch.int64), torch.arange(start, start + n, dtype=torch.int64)


def export_methods(model: LlamaDecoder, prompt_len: int) -> dict[str, torch.export.ExportedProgram]:
    """torch.export of `prefill` (prompt_len tokens at 0..) and `decode` (one token at prompt_len), each
    from an empty cache (export runs the model, which writes its buffers)."""
    programs = {}
    for name, n, start in (("prefill", prompt_len, 0), ("decode", 1, prompt_len)):
        model.reset_cache()
        programs[name] = torch.export.export(model, step_inputs(start, torch.zeros(n, dtype=torch.int64)))
    model.reset_cache()
    return programs


def lower_methods(model: LlamaDecoder, prompt_len: int, fp16: bool = False):
    """The two methods lowered with the VulkanPartitioner (an EdgeProgramManager)."""
    from executorch.exir import to_edge_transform_and_lower

    from .partitioner import VulkanPartitioner

    return to_edge_transform_and_lower(export_methods(model, prompt_len),
                                       partitioner=[VulkanPartitioner({"force_fp16": fp16})])


@dataclass
class DecoderProgram:
    pte: bytes
    model: LlamaDecoder  # the eager model the .pte computes (quantized linears when bits is set)
    prompt_len: int
    weight_bytes_per_token: int  # bytes of weights one decode step reads (packed linears, fp32 rest)


def weight_bytes_per_token(model: nn.Module, bits: int | None) -> int:
    """Bytes of weights one decode step reads: each linear's packed weights and fp32 scales, the RMSNorm
    gains, and one embedding row (the table is indexed, not read whole)."""
    total = 0
    for m in model.modules():
        if isinstance(m, QuantizedLinear):
            total += m.qweight.numel() * (bits or 8) // 8 + m.scales.numel() * 4
        elif isinstance(m, nn.Linear):
            total += m.weight.numel() * 4
        elif isinstance(m, nn.RMSNorm):
            total += m.weight.numel() * 4
        elif isinstance(m, nn.Embedding):
            total += m.embedding_dim * 4
    return total


def build_decoder_pte(cfg: DecoderConfig = DecoderConfig(), bits: int | None = 4, group_size: int = 32,
                      prompt_len: int = 8, fp16: bool = False, seed: int = 0) -> DecoderProgram:
    """The decoder at `cfg`, its linears quantized by `VulkanQuantizer(bits, group_size)` (None: fp32),
    lowered fully to Vulkan as `prefill` + `decode`, as one `.pte` (the GPU bench's entry point:
    decode tokens/s, weight bytes read per token)."""
    model = LlamaDecoder(cfg, seed).eval()
    if bits is not None:
        model = VulkanQuantizer(bits=bits, group_size=group_size).quantize(model)
    pte = methods_to_pte(lower_methods(model, prompt_len, fp16))
    return DecoderProgram(pte, model, prompt_len, weight_bytes_per_token(model, bits))


def load_methods(pte: bytes) -> dict:
    """Every method of one freshly loaded program (they keep and share its mutable buffers between
    calls; `run_on_vulkan` is for stateless programs)."""
    from executorch.runtime import Runtime

    from .runtime import device_name

    device_name()  # loads (or builds) the Vulkan runtime
    program = Runtime.get().load_program(pte)
    methods = {name: program.load_method(name) for name in sorted(program.method_names)}
    methods["__program__"] = program  # keeps the program alive as long as its methods
    return methods


def pte_runner(pte: bytes) -> Callable[[str, tuple], torch.Tensor]:
    """`run(method, inputs)` -> the first output, over one freshly loaded program (see `load_methods`)."""
    methods = load_methods(pte)

    def run(method: str, inputs: tuple) -> torch.Tensor:
        return methods[method].execute([t.contiguous() for t in inputs])[0].clone()

    return run


def greedy_decode(run: Callable[[str, tuple], torch.Tensor], prompt: torch.Tensor, steps: int, max_len: int
                  ) -> tuple[list[int], list[torch.Tensor]]:
    """Prefill `prompt`, then `steps` one-token decodes, each feeding back the argmax of the last logits.
    Returns the generated tokens and every step's last-position logits."""
    if prompt.numel() + steps > max_len:
        raise ValueError(f"{prompt.numel()} prompt tokens + {steps} steps exceed the cache ({max_len} positions)")
    logits = run("prefill", step_inputs(0, prompt))[0, -1]
    tokens, history = [], [logits]
    for i in range(steps):
        tokens.append(int(torch.argmax(logits)))
        logits = run("decode", step_inputs(prompt.numel() + i, torch.tensor([tokens[-1]])))[0, -1]
        history.append(logits)
    return tokens, history
