"""The decode benchmark's decoder (issue 23 benchmark, issue 19's bandwidth goal): a few wide Llama-like
layers (kv_decoder.LlamaDecoder's architecture) whose 4-bit weights are hundreds of MB, so one decode
step is bound by reading them. Torch only: `prepare_decode.py` builds the Vulkan program from
`decoder_state` here, and `decode_cuda.py` runs `TorchDecoder` (the same arithmetic, fp16 weights) on the
device for the CUDA baselines.

The big linears' integer weights and scales are one seeded random block of TILE_ROWS rows repeated down
the output rows, so the staged `.pte` (hundreds of MB, two methods) compresses to a few MB for the 64 MiB
carry cap; the GPU still reads every byte. Embedding, norms and the LM head are fully random (no tied
logits for the greedy argmax).
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

#: LlamaDecoder's DecoderConfig fields (Llama-3-8B's layer width, 3 layers, few KV heads: the cache that
#: travels with every call stays small)
CONFIG = dict(vocab=256, dim=4096, heads=32, kv_heads=2, hidden=14336, layers=3, max_len=48)
#: the configs the bench stages by name: `wide3` (CONFIG) and `llama1b`, Llama-3.2-1B's blocks (dim 2048,
#: 16 layers, 32 / 8 heads, SwiGLU 8192) at random init, with the same small vocab: its 128256-row fp32 LM
#: head would be 1 GB of random data, past the 64 MiB the staged bundle may take (its bytes are not counted)
CONFIGS = {"wide3": CONFIG,
           "llama1b": dict(vocab=256, dim=2048, heads=32, kv_heads=8, hidden=8192, layers=16, max_len=48)}
GROUP = 32  # 4-bit weights, one fp32 scale per 32 (VulkanQuantizer(bits=4, group_size=32))
PROMPT, STEPS = 8, 32
TILE_ROWS = 4
LINEARS = ("attn.q", "attn.k", "attn.v", "attn.o", "gate", "up", "down")


def linear_shapes(cfg: dict) -> dict[str, tuple[int, int]]:
    """[out, in] of each block linear."""
    d, kv = cfg["dim"], cfg["kv_heads"] * cfg["dim"] // cfg["heads"]
    return {"attn.q": (d, d), "attn.k": (kv, d), "attn.v": (kv, d), "attn.o": (d, d),
            "gate": (cfg["hidden"], d), "up": (cfg["hidden"], d), "down": (d, cfg["hidden"])}


def _tiled(block: torch.Tensor, rows: int) -> torch.Tensor:
    return block.repeat(-(-rows // block.shape[0]), 1)[:rows].contiguous()


def decoder_state(cfg: dict = CONFIG, seed: int = 0) -> dict[str, torch.Tensor]:
    """Parameters by LlamaDecoder name; each block linear as `<name>.qweight` (int8 in [-8, 7]) and
    `<name>.scales` (fp32 [out, in / GROUP]), the LM head as a float `head.weight`."""
    g = torch.Generator().manual_seed(seed)
    d, v = cfg["dim"], cfg["vocab"]
    state = {"tok.weight": torch.randn(v, d, generator=g), "norm.weight": torch.rand(d, generator=g) + 0.5,
             "head.weight": torch.randn(v, d, generator=g) / math.sqrt(d)}
    for i in range(cfg["layers"]):
        p = f"blocks.{i}."
        state[p + "attn_norm.weight"] = torch.rand(d, generator=g) + 0.5
        state[p + "mlp_norm.weight"] = torch.rand(d, generator=g) + 0.5
        for name, (n, k) in linear_shapes(cfg).items():
            q = torch.randint(-8, 8, (TILE_ROWS, k), generator=g, dtype=torch.int8)
            # int values have std ~4.6: scales give the weights std ~1 / sqrt(k), activations stay O(1)
            s = (torch.rand(TILE_ROWS, k // GROUP, generator=g) + 0.5) / (4.6 * math.sqrt(k))
            state[p + name + ".qweight"], state[p + name + ".scales"] = _tiled(q, n), _tiled(s, n)
    return state


def weight_bytes_per_token(cfg: dict = CONFIG) -> int:
    """Bytes one decode step reads: every 4-bit weight and fp32 scale, the fp32 norm gains, the fp32 LM
    head and one embedding row (as kv_decoder.weight_bytes_per_token counts)."""
    per_layer = sum(n * k // 2 + n * k // GROUP * 4 for n, k in linear_shapes(cfg).values()) + 2 * cfg["dim"] * 4
    return cfg["layers"] * per_layer + cfg["dim"] * 4 * (1 + cfg["vocab"]) + cfg["dim"] * 4


def prompt_tokens(vocab: int, n: int = PROMPT) -> torch.Tensor:
    """The runner's prompt (decode_runner.cpp): token i = (7 i + 3) % vocab."""
    return (torch.arange(n) * 7 + 3) % vocab


class TorchDecoder:
    """LlamaDecoder's forward in plain torch over `decoder_state` (dequantized weights in `dtype`), with
    its own static cache: what eager CUDA and the CUDA graph run."""

    def __init__(self, state: dict, cfg: dict = CONFIG, dtype=torch.float16, device="cuda") -> None:
        self.cfg, self.hd = cfg, cfg["dim"] // cfg["heads"]
        self.w = {}
        for name, t in state.items():
            if name.endswith(".scales"):
                continue
            if name.endswith(".qweight"):
                base = name.removesuffix(".qweight")
                s = state[base + ".scales"].repeat_interleave(GROUP, dim=1)
                self.w[base] = (t.float() * s).to(dtype).to(device)
            else:
                self.w[name] = t.to(dtype).to(device)
        inv = 1.0 / 10000.0 ** (torch.arange(0, self.hd, 2).float() / self.hd)
        ang = torch.outer(torch.arange(cfg["max_len"]).float(), inv)
        ang = torch.cat([ang, ang], -1)
        self.cos, self.sin = ang.cos().to(dtype).to(device), ang.sin().to(dtype).to(device)
        self.positions = torch.arange(cfg["max_len"], device=device)
        shape = (1, cfg["kv_heads"], cfg["max_len"], self.hd)
        self.cache = [(torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device))
                      for _ in range(cfg["layers"])]

    def _rms(self, x, w):
        return F.rms_norm(x, (x.shape[-1],), w, eps=1e-5)

    def __call__(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        c, w, hd = self.cfg, self.w, self.hd
        x = w["tok.weight"][tokens]
        n = tokens.shape[1]
        cos, sin = self.cos[pos], self.sin[pos]
        mask = self.positions[None, :] <= pos[:, None]

        def rope(t):
            h = t.shape[-1] // 2
            return t * cos + torch.cat([-t[..., h:], t[..., :h]], -1) * sin

        for i, (kc, vc) in enumerate(self.cache):
            p = f"blocks.{i}."
            h = self._rms(x, w[p + "attn_norm.weight"])
            q = (h @ w[p + "attn.q"].T).view(1, n, c["heads"], hd).transpose(1, 2)
            k = (h @ w[p + "attn.k"].T).view(1, n, c["kv_heads"], hd).transpose(1, 2)
            v = (h @ w[p + "attn.v"].T).view(1, n, c["kv_heads"], hd).transpose(1, 2)
            q, k = rope(q), rope(k)
            kc.index_copy_(2, pos, k)
            vc.index_copy_(2, pos, v)
            y = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask, enable_gqa=c["kv_heads"] != c["heads"])
            x = x + y.transpose(1, 2).reshape(1, n, c["dim"]) @ w[p + "attn.o"].T
            h = self._rms(x, w[p + "mlp_norm.weight"])
            x = x + (F.silu(h @ w[p + "gate"].T) * (h @ w[p + "up"].T)) @ w[p + "down"].T
        return self._rms(x, w["norm.weight"]) @ w["head.weight"].T
