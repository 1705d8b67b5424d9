"""Stage the decode benchmark (issue 23's decoder tokens/s, issue 19's bandwidth goal) for the device.

    uv run python bench/vulkan_gpu/prepare_decode.py [OUT] [--config wide3|llama1b] [--layers L]
    # OUT default: out/vulkan-decode; the bundle: bundle.tar.xz (wide3), bundle_<config>.tar.xz otherwise

decode_models.CONFIGS[config]'s decoder (4-bit weights in groups of 32, tiled blocks) lowered fully to Vulkan as
`prefill` + `decode` (kv_decoder.lower_methods / methods_to_pte), decode_runner built as vkdg_decode, and
decode_cuda.py + decode_models.py for the eager reference and the CUDA rows. The eager fp32 reference of
the same quantized model is computed on the device (decode_cuda.py `ref`: TorchDecoder in fp32 on the
GPU, TF32 off), which `check_torch_decoder_matches` ties to LlamaDecoder here: in eager CPU fp32 every
step dequantizes ~1 G weights, minutes per token on this shared host. OUT gets run_decode.sh and bundle.tar.xz (the
weights' repeated blocks compress the .pte to a few MB). On the device: `bash OUT/run_decode.sh`.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import decode_models  # noqa: E402
from staging import stage_runtime  # noqa: E402


def quantized_linear(qweight: torch.Tensor, scales: torch.Tensor):
    """A QuantizedLinear over given 4-bit values and scales (no float weights: they would take GBs)."""
    from vulkan_delegate.quantizer import QuantizedLinear

    layer = QuantizedLinear.__new__(QuantizedLinear)
    nn.Module.__init__(layer)
    layer.register_buffer("qweight", qweight)
    layer.register_buffer("scales", scales)
    layer.bias = None
    layer.group_size, layer.dynamic_act, layer.bits = decode_models.GROUP, False, 4
    return layer


def vulkan_decoder(state: dict, cfg: dict):
    """kv_decoder.LlamaDecoder at `cfg` carrying `state` (its block linears quantized)."""
    from vulkan_delegate.kv_decoder import DecoderConfig, LlamaDecoder, _rope_tables

    dcfg = DecoderConfig(**cfg)
    with torch.device("meta"):
        model = LlamaDecoder(dcfg)
    for i, block in enumerate(model.blocks):
        for name in decode_models.LINEARS:
            parent, attr = (block.attn, name.split(".")[1]) if name.startswith("attn.") else (block, name)
            p = f"blocks.{i}.{name}"
            setattr(parent, attr, quantized_linear(state[p + ".qweight"], state[p + ".scales"]))
        kv = torch.zeros(1, dcfg.kv_heads, dcfg.max_len, dcfg.head_dim)
        block.attn.k_cache, block.attn.v_cache = kv, kv.clone()
    model.rope_cos, model.rope_sin = _rope_tables(dcfg)
    model.positions = torch.arange(dcfg.max_len)
    floats = {k: v for k, v in state.items() if not k.endswith((".qweight", ".scales"))}
    missing = model.load_state_dict(floats, strict=False, assign=True)
    assert not missing.unexpected_keys, missing
    return model.eval()


def check_torch_decoder_matches(cfg: dict) -> float:
    """TorchDecoder (what decode_cuda.py runs) against LlamaDecoder on a small config in fp32: the CUDA
    rows compute the same model. Returns max|diff| / max|ref| of prefill + 3 decode steps."""
    from vulkan_delegate.kv_decoder import step_inputs

    small = dict(cfg, dim=256, heads=4, kv_heads=2, hidden=512, layers=2)
    state = decode_models.decoder_state(small, seed=1)
    ref_model, mine = vulkan_decoder(state, small), decode_models.TorchDecoder(state, small, torch.float32, "cpu")
    worst = 0.0
    with torch.no_grad():
        for start, toks in ((0, decode_models.prompt_tokens(small["vocab"])), (8, torch.tensor([5])),
                            (9, torch.tensor([77])), (10, torch.tensor([1]))):
            a, b = ref_model(*step_inputs(start, toks)), mine(*step_inputs(start, toks))
            worst = max(worst, ((a - b).abs().max() / a.abs().max()).item())
    if not worst < 1e-5:
        raise AssertionError(f"TorchDecoder differs from LlamaDecoder: {worst}")
    return worst


def stage(work: Path, cfg: dict, name: str) -> None:
    from vulkan_delegate.kv_decoder import lower_methods, methods_to_pte

    t0 = time.time()
    torch_err = check_torch_decoder_matches(cfg)
    model = vulkan_decoder(decode_models.decoder_state(cfg), cfg)
    (work / "decoder.pte").write_bytes(methods_to_pte(lower_methods(model, decode_models.PROMPT)))
    meta = {"config_name": name, "config": cfg, "group": decode_models.GROUP, "prompt": decode_models.PROMPT, "steps": decode_models.STEPS,
            "weight_bytes_per_token": decode_models.weight_bytes_per_token(cfg), "torch_decoder_rel_err": torch_err,
            "pte_bytes": (work / "decoder.pte").stat().st_size, "lower_s": round(time.time() - t0, 1),
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)}
    (work / "decode.json").write_text(json.dumps(meta))
    print(json.dumps(meta), flush=True)
    stage_runtime(work, {"vkdg_decode": "decode_runner.cpp"})
    for f in ("decode_cuda.py", "decode_models.py"):
        shutil.copy(HERE / f, work)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", default="out/vulkan-decode")
    ap.add_argument("--config", choices=sorted(decode_models.CONFIGS), default="wide3")
    ap.add_argument("--layers", type=int, help="layers (default: the config's)")
    args = ap.parse_args()
    cfg = decode_models.CONFIGS[args.config]
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    for f in ("run_decode.sh", "device_env.sh"):
        shutil.copy(HERE / f, out)
    bundle = out / ("bundle.tar.xz" if args.config == "wide3" else f"bundle_{args.config}.tar.xz")
    with tempfile.TemporaryDirectory() as tmp:
        stage(Path(tmp), dict(cfg, layers=args.layers or cfg["layers"]), args.config)
        with tarfile.open(bundle, "w:xz", preset=1) as tar:  # 1 MiB window: the weights' 4-row period fits
            tar.add(tmp, arcname=".")
    print(bundle, bundle.stat().st_size)


if __name__ == "__main__":
    main()
