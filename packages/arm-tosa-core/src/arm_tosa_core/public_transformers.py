"""Small random-init configurations of public `transformers` models (and torchvision's Swin-T) for the
delegation tests and the benchmark: BERT, DistilBERT, GPT-2, Llama, the T5 encoder, ViT, wav2vec2 and
the Whisper encoder, one layer each, hidden size 32, 8 tokens (or a 32x32 image, 400 audio samples,
16 mel frames). No weights are downloaded: each model is built from its config with a fixed seed.

These models build attention masks and position ids with int64 and bool arithmetic from `arange`,
buffers and the input's shape (folded at compile time, `constant_folding.py`), and read token ids
through embeddings (their range is proved by `registry.int_range`), so each lowers as one partition.
`transformers` (and torchvision for Swin-T) is a test/benchmark dependency, imported when a model is built.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["PUBLIC_TRANSFORMERS", "build_public"]

SEQUENCE = 8
VOCAB = 100


class FirstOutput(torch.nn.Module):
    """The model's first output tensor (`last_hidden_state`), so the program has one tensor output."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        out = self.model(*inputs)
        return out if isinstance(out, torch.Tensor) else out[0]


def _token_ids(gen: torch.Generator) -> tuple[torch.Tensor]:
    return (torch.randint(0, VOCAB, (1, SEQUENCE), generator=gen),)


def _bert(t, gen):
    cfg = t.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                       intermediate_size=64, max_position_embeddings=32)
    return t.BertModel(cfg), _token_ids(gen)


def _distilbert(t, gen):
    cfg = t.DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=1, n_heads=2, hidden_dim=64, max_position_embeddings=32)
    return t.DistilBertModel(cfg), _token_ids(gen)


def _gpt2(t, gen):
    cfg = t.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=2, n_positions=32, bos_token_id=0,
                       eos_token_id=0)
    return t.GPT2Model(cfg), _token_ids(gen)


def _llama(t, gen):
    cfg = t.LlamaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        num_key_value_heads=1, intermediate_size=64, max_position_embeddings=32)
    return t.LlamaModel(cfg), _token_ids(gen)


def _t5_encoder(t, gen):
    cfg = t.T5Config(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=1, num_heads=2)
    return t.T5EncoderModel(cfg), _token_ids(gen)


def _vit(t, gen):
    cfg = t.ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=64)
    return t.ViTModel(cfg), (torch.randn(1, 3, 32, 32, generator=gen),)


def _wav2vec2(t, gen):
    cfg = t.Wav2Vec2Config(vocab_size=32, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
                           num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)
    return t.Wav2Vec2Model(cfg), (torch.randn(1, 400, generator=gen),)


def _whisper_encoder(t, gen):
    cfg = t.WhisperConfig(vocab_size=VOCAB, d_model=32, encoder_layers=1, encoder_attention_heads=2,
                          decoder_layers=1, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                          num_mel_bins=16, max_source_positions=16, pad_token_id=0, bos_token_id=1,
                          eos_token_id=2, decoder_start_token_id=1)
    return t.WhisperModel(cfg).get_encoder(), (torch.randn(1, 16, 32, generator=gen),)


def _swin_t(_, gen):
    import torchvision

    return torchvision.models.swin_t(), (torch.randn(1, 3, 64, 64, generator=gen),)


PUBLIC_TRANSFORMERS: dict[str, Callable] = {
    "bert": _bert, "distilbert": _distilbert, "gpt2": _gpt2, "llama": _llama, "t5_encoder": _t5_encoder,
    "vit": _vit, "wav2vec2": _wav2vec2, "whisper_encoder": _whisper_encoder, "swin_t": _swin_t,
}


def build_public(name: str, seed: int = 0) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """`(eval-mode module returning one tensor, example inputs)` for a model of `PUBLIC_TRANSFORMERS`,
    its weights drawn from `seed`."""
    if name not in PUBLIC_TRANSFORMERS:
        raise ValueError(f"unknown public transformer {name!r}; valid names: {', '.join(PUBLIC_TRANSFORMERS)}")
    import transformers

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model, inputs = PUBLIC_TRANSFORMERS[name](transformers, gen)
    return FirstOutput(model).eval(), inputs
