"""Issue 23's public-architecture zoo: models nobody here wrote, at random init (no hub), under
`VulkanPartitioner()` on lavapipe: fully delegated (one partition), FP32 within 1e-4 of eager
(max|err| / max|out|); FP16 (`force_fp16`, and `model.half()` programs) within 1e-2 of eager fp32, or
1.5x eager CPU fp16's own distance from fp32. Small inputs keep it cheap; the default session runs a
cross-section (a CNN, a vision transformer, a `transformers` text encoder; in fp16 a CNN and the text
encoder), `nox -s test-full` every model. Models not fully
delegated are listed, with each CPU node's reason, in the package README, and asserted here to leave
exactly those targets on the CPU, so a change either way is noticed.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from arm_tosa_core.testing import compare_outputs
from vulkan_delegate import partition_report, run_on_vulkan


class FirstTensor(torch.nn.Module):
    """A model returning its first output tensor (`transformers`: last_hidden_state; torchvision
    segmentation: "out")."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x):
        out = self.model(x)
        # torchvision segmentation returns {"out": ...}; transformers a ModelOutput (a dict too), by position
        return out["out"] if isinstance(out, dict) and "out" in out else out[0]


def _tv(name: str, size: int = 64, **kw):
    def build():
        import torchvision.models as models
        return getattr(models, name)(weights=None, **kw), (torch.randn(1, 3, size, size),)
    return build


def _tv_seg(name: str, size: int = 64):
    def build():
        import torchvision.models.segmentation as seg
        return (FirstTensor(getattr(seg, name)(weights=None, weights_backbone=None, num_classes=4)),
                (torch.randn(1, 3, size, size),))
    return build


def _timm(name: str, size: int = 64, **kw):
    def build():
        import timm
        return timm.create_model(name, pretrained=False, **kw), (torch.randn(1, 3, size, size),)
    return build


_SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=100)


def _hf(kind: str):
    def build():
        import transformers as t
        ids = torch.randint(0, 100, (1, 8), generator=torch.Generator().manual_seed(1))
        if kind == "bert":
            model = t.BertModel(t.BertConfig(**_SMALL, max_position_embeddings=32))
        elif kind == "distilbert":
            model = t.DistilBertModel(t.DistilBertConfig(vocab_size=100, dim=32, n_layers=2, n_heads=2,
                                                         hidden_dim=64, max_position_embeddings=32))
        elif kind == "gpt2":
            model = t.GPT2Model(t.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=32,
                                             use_cache=False))
        elif kind == "llama":
            model = t.LlamaModel(t.LlamaConfig(**_SMALL, num_key_value_heads=1, max_position_embeddings=32,
                                               use_cache=False))
        elif kind == "t5_encoder":
            model = t.T5EncoderModel(t.T5Config(vocab_size=100, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                                                num_heads=2))
        elif kind == "vit":
            model = t.ViTModel(t.ViTConfig(**{k: v for k, v in _SMALL.items() if k != "vocab_size"},
                                           image_size=32, patch_size=8))
            return FirstTensor(model), (torch.randn(1, 3, 32, 32),)
        elif kind == "whisper_encoder":
            config = t.WhisperConfig(d_model=32, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=64,
                                     decoder_layers=1, decoder_attention_heads=2, decoder_ffn_dim=64,
                                     num_mel_bins=16, max_source_positions=16, vocab_size=100, pad_token_id=0,
                                     bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
            return FirstTensor(t.WhisperModel(config).get_encoder()), (torch.randn(1, 16, 32),)
        elif kind == "wav2vec2":
            config = t.Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2),
                                      conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                                      num_conv_pos_embedding_groups=4, vocab_size=100)
            return FirstTensor(t.Wav2Vec2Model(config)), (torch.randn(1, 800),)
        else:
            raise KeyError(kind)
        return FirstTensor(model), (ids,)
    return build


ZOO = {
    "mobilenet_v2": _tv("mobilenet_v2"), "mobilenet_v3_small": _tv("mobilenet_v3_small"),
    "mobilenet_v3_large": _tv("mobilenet_v3_large"), "resnet18": _tv("resnet18"), "resnet50": _tv("resnet50"),
    "efficientnet_b0": _tv("efficientnet_b0"), "shufflenet_v2_x1_0": _tv("shufflenet_v2_x1_0"),
    "mnasnet1_0": _tv("mnasnet1_0"), "regnet_y_400mf": _tv("regnet_y_400mf"),
    "convnext_tiny": _tv("convnext_tiny", size=32),
    "googlenet": _tv("googlenet", aux_logits=False, init_weights=False), "swin_t": _tv("swin_t", size=64),
    "lraspp_mobilenet_v3_large": _tv_seg("lraspp_mobilenet_v3_large"),
    "deeplabv3_mobilenet_v3_large": _tv_seg("deeplabv3_mobilenet_v3_large"),
    "mobilevit_xxs": _timm("mobilevit_xxs"), "ghostnet_100": _timm("ghostnet_100"), "lcnet_050": _timm("lcnet_050"),
    "mobilenetv4_conv_small": _timm("mobilenetv4_conv_small"), "repvit_m1": _timm("repvit_m1"),
    "efficientformerv2_s0": _timm("efficientformerv2_s0", img_size=64), "levit_128s": _timm("levit_128s", img_size=64),
    "fastvit_t8": _timm("fastvit_t8"), "deit_tiny": _timm("deit_tiny_patch16_224", size=32, img_size=32),
    **{k: _hf(k) for k in ("bert", "distilbert", "gpt2", "llama", "t5_encoder", "vit", "whisper_encoder",
                           "wav2vec2")},
}

#: the cross-section the default session runs (the rest: `nox -s test-full`)
DEFAULT = {"lcnet_050", "distilbert", "deit_tiny"}
#: models that stay partly on the CPU: name -> the CPU node targets (see the README's zoo section)
PARTLY_ON_CPU: dict[str, set[str]] = {}


@pytest.mark.parametrize("name", [n if n in DEFAULT else pytest.param(n, marks=pytest.mark.slow) for n in ZOO])
def test_zoo_model_fp32(name, vk_lower):
    torch.manual_seed(0)
    model, inputs = ZOO[name]()
    model = model.eval()
    edge = vk_lower(model, inputs)
    report = partition_report(edge)
    if name in PARTLY_ON_CPU:
        assert {c.target for c in report.cpu_nodes} == PARTLY_ON_CPU[name], str(report)
    else:
        assert not report.cpu_nodes and len(report.delegates) == 1, str(report)
    y = run_on_vulkan(edge.to_executorch(), *inputs)
    with torch.no_grad():
        ref = model(*inputs)
        # a network whose random init washes the input out (GoogLeNet's own init: features ~1e-30, the
        # logits are the fc bias) would pass any comparison: the eager output must depend on the input
        other = model(*[x.flip(-1) if x.is_floating_point() else (x + 1) % 100 for x in inputs])
    assert not torch.allclose(ref, other, rtol=1e-3, atol=1e-3 * float(ref.abs().max())), "output ignores input"
    comparison = compare_outputs(y, ref)  # NaN-aware: a NaN or inf where eager is finite fails
    assert comparison.max_error <= 1e-4 * comparison.max_magnitude, f"{comparison}\n{report}"


def test_t5_position_bias_at_64_tokens_is_delegated(vk_lower):
    """T5's relative position bias is an SDPA mask gathered from an embedding by bucket indices that
    depend only on shapes. At 64 keys or more the flash rule folds the mask: on the partition-time
    trial's stand-in weights that fold raised IndexError, so every SDPA stayed on the CPU, which has
    no SDPA kernel, and `to_executorch` failed ("Missing out variants") for T5 at 128 tokens."""
    import transformers as t

    torch.manual_seed(0)
    model = FirstTensor(t.T5EncoderModel(t.T5Config(vocab_size=100, d_model=32, d_kv=16, d_ff=64, num_layers=1,
                                                    num_heads=2))).eval()
    ids = torch.randint(0, 100, (1, 64), generator=torch.Generator().manual_seed(1))
    edge = vk_lower(model, (ids,))
    report = partition_report(edge)
    assert not report.cpu_nodes and len(report.delegates) == 1, str(report)
    y = run_on_vulkan(edge.to_executorch(), ids)
    with torch.no_grad():
        ref = model(ids)
    comparison = compare_outputs(y, ref)
    assert comparison.within(1e-4 * float(ref.abs().max())), comparison


#: the two ways a user gets fp16 (README "Dtypes"): `force_fp16` on an fp32 program (fp32 at the
#: boundary), or a `model.half()` program (fp16 inputs and outputs; integer inputs stay as they are)
FP16_WAYS = ("force_fp16", "half")


def _half_inputs(inputs: tuple) -> tuple:
    return tuple(x.half() if x.is_floating_point() else x for x in inputs)


def _settle_batch_norms(model: torch.nn.Module, inputs: tuple) -> None:
    """Give BatchNorm the running statistics of the data, as training would. At random init they are
    (0, 1) and leave activations shrinking layer by layer: LCNet's logits come out near 4e-8, below
    fp16's smallest subnormal, so eager fp16 and ours both return zeros and any fp16 comparison would
    pass. One forward of 4 random samples (batch statistics need more than one value per channel)."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a cumulative average: one batch sets the statistics
        norm.train()
    if norms:
        with torch.no_grad():
            model(*[torch.cat([x, *(torch.randn_like(x) for _ in range(3))]) for x in inputs])
        model.eval()


def _fp16_bound(eager_distance: float) -> float:
    """Issue 23's FP16 goal: within 1e-2 of eager fp32, or within 1.5x eager fp16's own distance from
    fp32 where the network amplifies fp16 rounding. A non-finite eager fp16 (its own overflow) excuses
    nothing: the bound is then 1e-2."""
    return max(1e-2, 1.5 * eager_distance) if math.isfinite(eager_distance) else 1e-2


#: the default session's fp16 cross-section: convolutions (LCNet) one way, attention and layer norm
#: (DistilBERT) the other; the rest (DeiT-tiny alone takes 2 minutes a way on lavapipe): `nox -s test-full`
DEFAULT_FP16 = {("lcnet_050", "force_fp16"), ("distilbert", "half")}
#: (model, way) -> the CPU node targets it leaves (README "Model zoo"): T5's fp16-only overflow guard
#: (`clamp(h, +-where(isinf(h).any(), max - 1000, max))`) has no Vulkan kernel yet
PARTLY_ON_CPU_FP16 = {("t5_encoder", "half"): {"aten.isinf.default", "aten.any.default", "aten.clamp.Tensor"}}


@pytest.mark.parametrize("name,way", [
    (n, w) if (n, w) in DEFAULT_FP16 else pytest.param(n, w, marks=pytest.mark.slow)
    for w in FP16_WAYS for n in ZOO])
def test_zoo_model_fp16(name, way, vk_lower, vk_rel_err):
    """FP16 against eager fp32 (max|err| / max|out|), fully delegated, NaN-aware; the bound and eager
    CPU fp16's own distance from fp32 are both in the message (measured table: README "Model zoo")."""
    torch.manual_seed(0)
    model, inputs = ZOO[name]()
    model = model.eval()
    _settle_batch_norms(model, inputs)
    with torch.no_grad():
        ref = model(*inputs)
        half = copy.deepcopy(model).half()
        eager_distance = vk_rel_err(half(*_half_inputs(inputs)), ref)
    # an output fp16 cannot hold (under- or overflow: eager fp16 ~1 away) would let any answer pass
    assert eager_distance <= 0.5, f"{name}: eager fp16 is {eager_distance:.3g} from fp32; nothing to compare"
    if way == "half":
        edge = vk_lower(half, _half_inputs(inputs))
    else:
        edge = vk_lower(model, inputs, fp16=True)
    report = partition_report(edge)
    if (name, way) in PARTLY_ON_CPU_FP16:
        assert {c.target for c in report.cpu_nodes} == PARTLY_ON_CPU_FP16[name, way], str(report)
    else:
        assert not report.cpu_nodes and len(report.delegates) == 1, str(report)
    y = run_on_vulkan(edge.to_executorch(), *(_half_inputs(inputs) if way == "half" else inputs))
    assert y.dtype == (torch.float16 if way == "half" else torch.float32), y.dtype
    comparison = compare_outputs(y.float(), ref)  # a NaN or inf where eager fp32 is finite fails
    assert not comparison.nonfinite, f"{name} {way}: {comparison.nonfinite}\n{report}"
    ours, bound = vk_rel_err(y, ref), _fp16_bound(eager_distance)
    print(f"zoo-fp16 {name} {way}: ours {ours:.3g} eager-fp16 {eager_distance:.3g}")
    assert ours <= bound, (f"{name} {way}: rel err {ours:.3g} > {bound:.3g} (eager CPU fp16 is {eager_distance:.3g} "
                           f"from fp32; bound max(1e-2, 1.5x that))\n{report}")
