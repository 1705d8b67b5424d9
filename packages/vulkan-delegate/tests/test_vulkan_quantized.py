"""Quantized linear (VulkanQuantizer) vs its own dequantized reference: within 1e-3 relative; with
dynamic int8 activations, vs the same integer arithmetic done in torch: within 1e-5 relative (only the
final float scaling rounds), on both integer kernels (the packed int8 dot product and the int32
multiply-add fallback)."""

from __future__ import annotations

import csv

import pytest
import torch
from torch import nn

from arm_tosa_core.testing import compare_outputs
from vulkan_delegate import VulkanQuantizer, partition_report, payload, run_on_vulkan
from vulkan_delegate.payload import VERSION
from vulkan_delegate.runtime import clear_method_cache

INT_TOL = 1e-5  # integer dot products are exact: only the final float scaling may round


def rel_err(y: torch.Tensor, ref: torch.Tensor) -> float:
    """max |y - ref| / max |ref|, NaN-aware (inf where one side is NaN/inf and the other is not)."""
    c = compare_outputs(y.float(), ref.float())
    return c.max_error / max(c.max_magnitude, 1e-12)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 48)
        self.fc2 = nn.Linear(48, 16, bias=False)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.mark.parametrize("bits,group,dynamic", [(8, None, False), (4, 16, False), (8, 16, True), (4, None, True)])
def test_quantized_linear(vk_check, bits, group, dynamic):
    torch.manual_seed(bits + (group or 0))
    q = VulkanQuantizer(bits=bits, group_size=group, dynamic_activations=dynamic).quantize(MLP().eval())
    x = torch.randn(2, 5, 64)
    vk_check(q, (x,), tol=1e-3)
    w = q.fc1.qweight
    assert w.min() >= -(2 ** (bits - 1)) and w.max() <= 2 ** (bits - 1) - 1


@pytest.mark.parametrize("dynamic", [False, True])
def test_quantized_linear_fp16(vk_check, dynamic):
    q = VulkanQuantizer(bits=8, group_size=16, dynamic_activations=dynamic).quantize(MLP().eval())
    vk_check(q, (torch.randn(3, 64),), fp16=True)


def test_4bit_odd_sizes(vk_check):
    """An odd weight count: the last byte holds one nibble."""
    torch.manual_seed(0)
    q = VulkanQuantizer(bits=4).quantize(nn.Sequential(nn.Linear(33, 7)).eval())
    vk_check(q, (torch.randn(3, 33),), tol=1e-3)


def test_4bit_weights_take_half_the_bytes(vk_lower):
    lin = nn.Sequential(nn.Linear(256, 128, bias=False)).eval()
    x = (torch.randn(1, 256),)
    sizes = {b: partition_report(vk_lower(VulkanQuantizer(bits=b).quantize(lin), x)).delegates[0].payload_bytes for b in (4, 8)}
    # 4-bit: two weights per byte (less a few bytes: its one-row program names the longer linear_q_gemv,
    # with one more binding and push word, its epilogue's)
    assert sizes[8] - sizes[4] >= 256 * 128 // 2 - 64, sizes


def _payload_version(pte: bytearray, version: int) -> bytes:
    at = pte.find(b"VKDG")
    assert at >= 0 and int.from_bytes(pte[at + 4:at + 8], "little") == VERSION
    pte[at + 4:at + 8] = version.to_bytes(4, "little")
    return bytes(pte)


@pytest.mark.parametrize("old", [1, 2])
def test_older_payload_versions_still_load_and_newer_is_refused(vk_lower, monkeypatch, old):
    """A payload written in an older version's layout (version 1: 8-bit weights as then; version 2:
    no host dtypes in the io section) still loads and runs; a version this runtime does not know is
    an error at load time, not a crash or a wrong answer."""
    q = VulkanQuantizer(bits=8).quantize(MLP().eval())
    x = torch.randn(2, 64)
    pte = bytearray(vk_lower(q, (x,)).to_executorch().buffer)
    with monkeypatch.context() as m:
        m.setattr(payload, "VERSION", old)
        old_pte = bytes(vk_lower(q, (x,)).to_executorch().buffer)
    at = old_pte.find(b"VKDG")
    assert int.from_bytes(old_pte[at + 4:at + 8], "little") == old
    y = run_on_vulkan(old_pte, x)
    assert ((y - q(x)).abs().max() / q(x).abs().max()).item() <= 1e-3
    with pytest.raises(RuntimeError):
        run_on_vulkan(_payload_version(bytearray(pte), VERSION + 1), x)


def integer_linear_reference(x: torch.Tensor, layer) -> torch.Tensor:
    """What the integer kernel computes, in torch: each row of x quantized to int8 (symmetric, one
    scale per row, as the eager op), exact int32 dot products per weight group, then the scales."""
    s = x.abs().amax(-1, keepdim=True).clamp_min(1e-12) / 127.0
    xq = torch.clamp(torch.round(x / s), -127, 127).to(torch.int32)
    n, k = layer.qweight.shape
    g = layer.group_size
    dots = (xq.reshape(-1, 1, k // g, g) * layer.qweight.to(torch.int32).reshape(1, n, k // g, g)).sum(-1)
    assert dots.abs().max() < 2**24  # exact as float32 too: the comparison is about the kernel alone
    y = (dots.to(torch.float32) * layer.scales[None]).sum(-1) * s.reshape(-1, 1)
    y = y.reshape(*x.shape[:-1], n)
    return y + layer.bias if layer.bias is not None else y


def run_integer_variants(pte: bytes, x: torch.Tensor, tmp_path, monkeypatch) -> dict[str, torch.Tensor]:
    """The program's output per integer kernel: the runtime's own choice on this device and the forced
    int32 fallback (VKDG_INT_DOT=0), each checked (per-dispatch profile) to have run that shader."""
    out = {}
    for force_fallback in (False, True):
        profile = tmp_path / f"profile_{force_fallback}.csv"
        monkeypatch.setenv("VKDG_PROFILE", str(profile))
        if force_fallback:
            monkeypatch.setenv("VKDG_INT_DOT", "0")
        clear_method_cache()  # the variant is chosen at load
        y = run_on_vulkan(pte, x)
        shaders = {row["shader"] for row in csv.DictReader(profile.open())}
        kernel = next(s.rsplit("_", 1)[0] for s in shaders if s.startswith("linear_qi"))
        assert not force_fallback or kernel == "linear_qi", shaders
        out[kernel] = y
    clear_method_cache()
    return out


INT_CASES = [  # bits, group (None: per channel), K, bias, input shape (K last)
    pytest.param(8, None, 64, True, (2, 5), id="8bit-per-channel-3d"),
    pytest.param(4, 16, 48, False, (3,), id="4bit-grouped-nobias"),
    pytest.param(4, None, 33, True, (4,), id="4bit-K33", marks=pytest.mark.slow),
    pytest.param(8, 6, 30, True, (2, 3), id="8bit-group6", marks=pytest.mark.slow),
    pytest.param(4, 12, 36, False, (5,), id="4bit-group12", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("bits,group,k,bias,lead", INT_CASES)
def test_integer_linear_matches_integer_reference(vk_lower, tmp_path, monkeypatch, bits, group, k, bias, lead):
    """Dynamic int8 activations x 8/4-bit weights in integers, on both kernels: K not a multiple of 4,
    8 or the group, with and without bias, 3-D input, an all-zero row (its scale is the 1e-12 floor:
    zeros out, no NaN)."""
    torch.manual_seed(k + bits)
    layer = nn.Linear(k, 24, bias=bias)
    q = VulkanQuantizer(bits=bits, group_size=group, dynamic_activations=True).quantize(nn.Sequential(layer).eval())
    x = torch.randn(*lead, k)
    x.reshape(-1, k)[1] = 0.0
    pte = vk_lower(q, (x,)).to_executorch().buffer
    ref = integer_linear_reference(x, q[0])
    outputs = run_integer_variants(pte, x, tmp_path, monkeypatch)
    assert set(outputs) == {"linear_qi_dot", "linear_qi"}  # lavapipe has the int8 dot product
    for kernel, y in outputs.items():
        assert rel_err(y, ref) <= INT_TOL, kernel
        assert rel_err(y, q(x)) <= 1e-5, kernel  # the dequantized eager op: the same values in float
        assert torch.equal(y.reshape(-1, 24)[1], (q[0].bias if bias else torch.zeros(24)).detach()), kernel


def run_gemv_kernels(pte: bytes, x: torch.Tensor, tmp_path, monkeypatch) -> dict[str, tuple[torch.Tensor, list[str]]]:
    """The program's output and its dispatches' shaders per 4-bit GEMV choice: the runtime's on this device
    ("default": lavapipe has subgroup arithmetic, so a `linear_q_gemv_words` the lowering named runs as such)
    and the chunk kernel everywhere ("chunks", VKDG_GEMV_SG=0: every GEMV checked, per-dispatch profile, to
    have run `linear_q_gemv`)."""
    out = {}
    for chunks in (False, True):
        profile = tmp_path / f"profile_{chunks}.csv"
        monkeypatch.setenv("VKDG_PROFILE", str(profile))
        monkeypatch.setenv("VKDG_GEMV_SG", "0" if chunks else "1")
        clear_method_cache()  # the variant is chosen at load
        y = run_on_vulkan(pte, x)
        shaders = [row["shader"] for row in csv.DictReader(profile.open())]
        gemv = [s for s in shaders if s.startswith("linear_q_gemv")]
        assert gemv and not (chunks and any(s.startswith("linear_q_gemv_words") for s in gemv)), shaders
        out["chunks" if chunks else "default"] = (y, shaders)
    clear_method_cache()
    return out


@pytest.mark.parametrize("k,group,lead,fp16", [
    pytest.param(4160, 64, (1,), False, id="decode-row-K4160-group64"),  # 130 chunks: threads loop twice
    pytest.param(1056, 96, (1,), False, id="K1056-group96"),  # groups of 3 chunks; 33 chunks, one pass
    pytest.param(160, 32, (1, 3), True, id="3rows-fp16", marks=pytest.mark.slow),
    pytest.param(2048, 2048, (1,), False, id="one-group-per-row", marks=pytest.mark.slow),
])
def test_4bit_gemv_matches_dequantized_reference(vk_lower, tmp_path, monkeypatch, k, group, lead, fp16):
    """Few rows of 4-bit weights in 32-element chunks run `linear_q_gemv` (split-K over a workgroup, 128-bit
    weight loads): N = 21 is not a multiple of its 8 outputs per workgroup, with bias; vs the eager op."""
    torch.manual_seed(k)
    q = VulkanQuantizer(bits=4, group_size=group).quantize(nn.Sequential(nn.Linear(k, 21)).eval())
    x = torch.randn(*lead, k)
    pte = vk_lower(q, (x,), fp16=fp16).to_executorch().buffer
    profile = tmp_path / "profile.csv"
    monkeypatch.setenv("VKDG_PROFILE", str(profile))
    y = run_on_vulkan(pte, x)
    kernels = {row["shader"].rsplit("_", 1)[0] for row in csv.DictReader(profile.open())}
    assert "linear_q_gemv" in kernels and "linear_q" not in kernels, kernels
    assert rel_err(y, q(x)) <= (1e-2 if fp16 else 1e-5)


class NormedWide(nn.Module):
    """An RMS norm (with a gain) feeding one wide 4-bit linear with a bias."""

    def __init__(self, k: int, n: int) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(k, eps=1e-5)
        nn.init.uniform_(self.norm.weight, 0.5, 1.5)
        self.lin = nn.Linear(k, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(self.norm(x))


def test_4bit_gemv_word_body_for_wide_outputs(vk_lower, tmp_path, monkeypatch):
    """N = 8197 >= GEMV_WORDS_MIN_N with K = 1056 <= GEMV_WORDS_MAX_K: `linear_q_gemv_words` (132 words per
    row: the tail step's second word past K for all but 4 lanes; 8197 not a multiple of 8 rows; groups of
    96 = 12 words), with a folded RMS norm and a bias; vs eager, and the chunk kernel likewise."""
    torch.manual_seed(3)
    q = VulkanQuantizer(bits=4, group_size=96).quantize(NormedWide(1056, 8197).eval())
    x = 3.0 * torch.randn(1, 1056) + 0.5
    pte = vk_lower(q, (x,)).to_executorch().buffer
    with torch.no_grad():
        ref = q(x)
    for kernel, (y, shaders) in run_gemv_kernels(pte, x, tmp_path, monkeypatch).items():
        assert [s for s in shaders if s.startswith("linear_q")] == [
            "linear_q_gemv_f32" if kernel == "chunks" else "linear_q_gemv_words_f32"], shaders
        assert rel_err(y, ref) <= 1e-5, kernel


class NormedLinears(nn.Module):
    """An RMS norm feeding two 4-bit linears (q/k of a decode step, the second with a SwiGLU-style silu);
    `also_residual` reads the normed row once more, so the norm's own dispatch must stay."""

    def __init__(self, k: int, gain: bool, also_residual: bool) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(k, eps=1e-5, elementwise_affine=gain)
        if gain:
            nn.init.uniform_(self.norm.weight, 0.5, 1.5)
        self.a, self.b = nn.Linear(k, 21), nn.Linear(k, 21, bias=False)
        self.also_residual = also_residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        y = self.a(h) * torch.nn.functional.silu(self.b(h))
        return torch.cat([y, h[..., :21]], -1) if self.also_residual else y


@pytest.mark.parametrize("k,group,lead,gain,also_residual,fp16", [
    pytest.param(4160, 64, (1,), True, False, False, id="K4160-group64-gain"),  # 130 chunks: two passes
    pytest.param(160, 32, (1, 3), False, True, False, id="3rows-no-gain-norm-kept", marks=pytest.mark.slow),
    pytest.param(4096, 32, (1,), True, False, True, id="K4096-fp16", marks=pytest.mark.slow),
])
def test_rms_norm_folds_into_4bit_gemv(vk_lower, tmp_path, monkeypatch, k, group, lead, gain, also_residual, fp16):
    """`linear_q_gemv` computes the RMS norm its activations come from (sum of squares of the staged row,
    the gain on the staged values, 1 / rms on the dot product): the norm's own dispatch is gone when only
    GEMVs read it, kept when another op does; outputs vs eager with the norm's 1e-5 x 1e-5 in the mix."""
    torch.manual_seed(k + len(lead))
    model = NormedLinears(k, gain, also_residual).eval()
    q = VulkanQuantizer(bits=4, group_size=group).quantize(model)
    x = 3.0 * torch.randn(*lead, k) + 0.5  # rms far from 1: a missing 1 / rms shows
    pte = vk_lower(q, (x,), fp16=fp16).to_executorch().buffer
    profile = tmp_path / "profile.csv"
    monkeypatch.setenv("VKDG_PROFILE", str(profile))
    y = run_on_vulkan(pte, x)
    kernels = [row["shader"].rsplit("_", 1)[0] for row in csv.DictReader(profile.open())]
    assert kernels.count("linear_q_gemv") == 2, kernels
    assert bool({"norm", "norm_row", "norm_row_wide"} & set(kernels)) == also_residual, kernels
    with torch.no_grad():
        ref = q(x)
    assert rel_err(y, ref) <= (1e-2 if fp16 else 1e-5)
