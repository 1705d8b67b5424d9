"""The public-architecture zoo (issue 23) at bench sizes, built identically on the staging machine (to lower
and to compute the eager CPU reference) and on the device machine (eager CUDA, CUDA graph, torch.compile).

Batch 1; images 224 px; `transformers` models at a small config (hidden 256, 4 layers, 4 heads, 128
tokens) fed `inputs_embeds` / float features, so every model takes one float tensor (vkdg_runner feeds
one float input). Every model's input is vkdg_runner's own fixed pattern (`runner_input`), so no input
file travels.

Weights: `periodic_init` overwrites every floating parameter with one 251-value seeded pattern, tiled and
scaled per tensor (1/sqrt(fan_in) for matrices and kernels, small for biases; norm scales exactly 1).
The .pte files then compress to almost nothing (xz/gzip find the period), which keeps the bundle far below
the device tool's 64 MiB carry cap although ResNet-50 alone has 100 MB of fp32 weights; the arithmetic,
and so the timing, is that of the same architecture at any weights. The library versions differ between
the two machines (torchvision/timm/transformers): the CUDA rows' max_rel_err against the staged
reference shows that both built the same network.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

IMAGE = 224
TOKENS = 128
HIDDEN = 256


class FirstTensor(nn.Module):
    """The first output tensor (transformers: last_hidden_state; torchvision segmentation: "out")."""

    def __init__(self, model: nn.Module, **kwargs) -> None:
        super().__init__()
        self.model = model
        self.kwargs = kwargs

    def forward(self, x):
        out = self.model(x, **self.kwargs)
        return out["out"] if isinstance(out, dict) and "out" in out else out[0]


class Embeds(nn.Module):
    """A text model called with `inputs_embeds` (the float input vkdg_runner can feed) instead of ids."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(inputs_embeds=x)[0]


def _tv(name: str, **kw) -> Callable[[], tuple[nn.Module, tuple[int, ...]]]:
    def build():
        import torchvision.models as models
        return getattr(models, name)(weights=None, **kw), (1, 3, IMAGE, IMAGE)
    return build


def _tv_seg(name: str):
    def build():
        import torchvision.models.segmentation as seg
        model = getattr(seg, name)(weights=None, weights_backbone=None, num_classes=21)
        return FirstTensor(model), (1, 3, IMAGE, IMAGE)
    return build


def _timm(name: str, **kw):
    def build():
        import timm
        return timm.create_model(name, pretrained=False, **kw), (1, 3, IMAGE, IMAGE)
    return build


_CFG = dict(hidden_size=HIDDEN, num_hidden_layers=4, num_attention_heads=4, intermediate_size=4 * HIDDEN,
            vocab_size=1000)


def _hf(kind: str):
    def build():
        import transformers as t
        text = (1, TOKENS, HIDDEN)
        if kind == "bert":
            return Embeds(t.BertModel(t.BertConfig(**_CFG, max_position_embeddings=512))), text
        if kind == "distilbert":
            return Embeds(t.DistilBertModel(t.DistilBertConfig(vocab_size=1000, dim=HIDDEN, n_layers=4, n_heads=4,
                                                               hidden_dim=4 * HIDDEN))), text
        if kind == "gpt2":
            return Embeds(t.GPT2Model(t.GPT2Config(vocab_size=1000, n_embd=HIDDEN, n_layer=4, n_head=4,
                                                   n_positions=512, use_cache=False))), text
        if kind == "llama":
            return Embeds(t.LlamaModel(t.LlamaConfig(**_CFG, num_key_value_heads=2, max_position_embeddings=512,
                                                     use_cache=False))), text
        if kind == "t5_encoder":
            return Embeds(t.T5EncoderModel(t.T5Config(vocab_size=1000, d_model=HIDDEN, d_kv=64, d_ff=4 * HIDDEN,
                                                      num_layers=4, num_heads=4))), text
        if kind == "vit":
            config = t.ViTConfig(**{k: v for k, v in _CFG.items() if k != "vocab_size"}, image_size=IMAGE,
                                 patch_size=16)
            return FirstTensor(t.ViTModel(config)), (1, 3, IMAGE, IMAGE)
        if kind == "whisper_encoder":
            config = t.WhisperConfig(d_model=HIDDEN, encoder_layers=4, encoder_attention_heads=4,
                                     encoder_ffn_dim=4 * HIDDEN, decoder_layers=1, decoder_attention_heads=4,
                                     decoder_ffn_dim=4 * HIDDEN, num_mel_bins=80, max_source_positions=TOKENS,
                                     vocab_size=1000, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                     decoder_start_token_id=1)
            return FirstTensor(t.WhisperModel(config).get_encoder()), (1, 80, 2 * TOKENS)
        if kind == "wav2vec2":
            config = t.Wav2Vec2Config(hidden_size=HIDDEN, num_hidden_layers=4, num_attention_heads=4,
                                      intermediate_size=4 * HIDDEN, conv_dim=(128, 128, 128), conv_stride=(5, 4, 4),
                                      conv_kernel=(10, 4, 4), num_conv_pos_embeddings=32,
                                      num_conv_pos_embedding_groups=4, vocab_size=1000)
            return FirstTensor(t.Wav2Vec2Model(config)), (1, 16000)
        raise KeyError(kind)
    return build


#: name -> builder of (model, input shape); the order of the results table
ZOO: dict[str, Callable[[], tuple[nn.Module, tuple[int, ...]]]] = {
    "mobilenet_v2": _tv("mobilenet_v2"), "mobilenet_v3_small": _tv("mobilenet_v3_small"),
    "mobilenet_v3_large": _tv("mobilenet_v3_large"), "resnet18": _tv("resnet18"), "resnet50": _tv("resnet50"),
    "efficientnet_b0": _tv("efficientnet_b0"), "shufflenet_v2_x1_0": _tv("shufflenet_v2_x1_0"),
    "mnasnet1_0": _tv("mnasnet1_0"), "regnet_y_400mf": _tv("regnet_y_400mf"), "convnext_tiny": _tv("convnext_tiny"),
    "googlenet": _tv("googlenet", aux_logits=False, init_weights=False), "swin_t": _tv("swin_t"),
    "lraspp_mobilenet_v3_large": _tv_seg("lraspp_mobilenet_v3_large"),
    "deeplabv3_mobilenet_v3_large": _tv_seg("deeplabv3_mobilenet_v3_large"),
    "mobilevit_xxs": _timm("mobilevit_xxs"), "ghostnet_100": _timm("ghostnet_100"), "lcnet_050": _timm("lcnet_050"),
    "mobilenetv4_conv_small": _timm("mobilenetv4_conv_small"), "repvit_m1": _timm("repvit_m1"),
    "efficientformerv2_s0": _timm("efficientformerv2_s0"), "levit_128s": _timm("levit_128s"),
    "fastvit_t8": _timm("fastvit_t8"), "deit_tiny": _timm("deit_tiny_patch16_224"),
    **{k: _hf(k) for k in ("bert", "distilbert", "gpt2", "llama", "t5_encoder", "vit", "whisper_encoder",
                           "wav2vec2")},
}

#: (stem, zoo name, batch, fp16): the throughput row, besides the batch-1 fp32 zoo
THROUGHPUT = [("resnet50_b32_fp16", "resnet50", 32, True)]


def _qlinear(n: int, k: int, int8_act: bool):
    """One 4-bit linear (groups of 32) at a decode step's shape: linear_q (weight-only) or, with int8
    activations, linear_qi. Ours only (vulkan_delegate's quantizer): zoo_cuda.py skips it."""
    def build():
        from vulkan_delegate.quantizer import VulkanQuantizer

        linear = periodic_init(nn.Sequential(nn.Linear(k, n, bias=False)))
        return VulkanQuantizer(4, 32, dynamic_activations=int8_act).quantize(linear), (1, k)
    return build


#: name -> builder: our quantized-linear kernels alone at the Llama-3-8B MLP's shape (one token)
KERNELS = {"qlinear_w4_14336x4096": _qlinear(14336, 4096, False),
           "qlinear_w4a8_14336x4096": _qlinear(14336, 4096, True)}


def periodic_init(model: nn.Module) -> nn.Module:
    """Overwrite every floating parameter with a tiled 251-value pattern (module docstring: why)."""
    pattern = torch.randn(251, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    pattern = ((pattern - pattern.mean()) / pattern.std()).float()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not p.is_floating_point():
                continue
            tiled = pattern.repeat(p.numel() // 251 + 1)[: p.numel()].reshape(p.shape)
            if p.dim() >= 2:
                p.copy_(tiled * math.sqrt(1.0 / (p.numel() // p.shape[0])))
            elif name.endswith("bias"):
                p.copy_(tiled * 0.02)
            else:  # norm and layer scales: exactly 1, so a folded batch norm scales every channel alike and
                p.fill_(1.0)  # the folded kernels stay periodic (per-channel scales made them incompressible)
    return model


def runner_input(shape: tuple[int, ...]) -> torch.Tensor:
    """The fixed pattern vkdg_runner feeds when given no --input."""
    i = torch.arange(math.prod(shape), dtype=torch.int64)
    return (((i * 2654435761) % 1000).float() / 500.0 - 1.0).reshape(shape)


def build(name: str, batch: int = 1) -> tuple[nn.Module, torch.Tensor]:
    """(model in eval mode with periodic weights, runner-pattern input) for one zoo model."""
    torch.manual_seed(0)
    model, shape = {**ZOO, **KERNELS}[name]()
    return periodic_init(model.eval()), runner_input((batch, *shape[1:]))
