"""Public architectures for the Ethos-U bench (`bench_ethosu_public.py`): torchvision and timm models at
random init (no download), seeded, so every process and both toolkits build the same model.

Names are `tv:<torchvision builder>`, `timm:<timm model name>` and `hf:<name>` (the small transformers
configs of `arm_tosa_core.public_transformers`: one layer, hidden size 32, 8 tokens, the input size
ignored); segmentation models return their "out" tensor. Nothing here imports either toolkit: the hf
builders are loaded from their file, not through the `arm_tosa_core` package (whose backends share class
names with the competitor's).
"""

from __future__ import annotations

from pathlib import Path

import torch

#: The issue's table (issue 22), in its order: the default list of the bench.
TORCHVISION_ISSUE = ("tv:mobilenet_v2", "tv:mobilenet_v3_small", "tv:mobilenet_v3_large", "tv:efficientnet_b0",
                     "tv:mnasnet1_0", "tv:squeezenet1_1", "tv:shufflenet_v2_x1_0",
                     "tv:lraspp_mobilenet_v3_large")
TORCHVISION_MORE = ("tv:resnet18", "tv:regnet_y_400mf", "tv:googlenet", "tv:deeplabv3_mobilenet_v3_large")
TIMM_MOBILE = ("timm:ghostnet_100", "timm:lcnet_050", "timm:mobilenetv4_conv_small", "timm:mobilevit_xxs",
               "timm:repvit_m0_9", "timm:fastvit_t8", "timm:efficientformerv2_s0", "timm:deit_tiny_patch16_224",
               "timm:levit_128s")
#: The transformers small configs of the decoder issue (`public_transformers.PUBLIC_TRANSFORMERS`).
TRANSFORMERS_SMALL = ("hf:bert", "hf:distilbert", "hf:gpt2", "hf:llama", "hf:t5_encoder", "hf:vit", "hf:wav2vec2",
                      "hf:whisper_encoder")
ALL = TORCHVISION_ISSUE + TORCHVISION_MORE + TIMM_MOBILE + TRANSFORMERS_SMALL


class _OutOnly(torch.nn.Module):
    """A segmentation model's dict output reduced to its "out" tensor (export wants tensors)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)["out"]


def is_public(name: str) -> bool:
    return name.startswith(("tv:", "timm:", "hf:"))


def _public_transformers():
    """`arm_tosa_core/public_transformers.py` as a standalone module (it imports only torch)."""
    import importlib.util

    package = importlib.util.find_spec("arm_tosa_core")  # locates the package without importing it
    path = Path(package.origin).parent / "public_transformers.py"
    spec = importlib.util.spec_from_file_location("bench_public_transformers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_public(name: str, seed: int = 0, input_size: int | None = None) -> tuple[torch.nn.Module, tuple]:
    """(model in eval mode, (one seeded NCHW input,)) at `input_size` (default 224)."""
    size = input_size or 224
    torch.manual_seed(seed)
    kind, _, arch = name.partition(":")
    if kind == "tv":
        import torchvision.models as tvm
        import torchvision.models.segmentation as seg

        if hasattr(seg, arch) and arch.startswith(("lraspp", "deeplab", "fcn")):
            model = _OutOnly(getattr(seg, arch)(weights=None, weights_backbone=None, aux_loss=None))
        elif arch == "googlenet":
            model = tvm.googlenet(weights=None, aux_logits=False, init_weights=True)
        else:
            model = getattr(tvm, arch)(weights=None)
    elif kind == "hf":
        return _public_transformers().build_public(arch, seed)
    elif kind == "timm":
        import timm

        kwargs = {"img_size": size} if arch.startswith(("deit", "levit", "mobilevit", "efficientformer")) else {}
        try:
            model = timm.create_model(arch, pretrained=False, **kwargs)
        except TypeError:  # a model without img_size
            model = timm.create_model(arch, pretrained=False)
    else:
        raise ValueError(f"public model {name!r}: use tv:<torchvision builder>, timm:<timm name> or hf:<name>")
    gen = torch.Generator().manual_seed(seed + 1)
    return model.eval(), (torch.randn(1, 3, size, size, generator=gen),)
