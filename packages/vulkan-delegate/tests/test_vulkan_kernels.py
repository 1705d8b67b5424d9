"""The tiled kernels (issue 19): register-blocked GEMM (matmul.comp) and implicit-GEMM convolution
(conv2d_gemm.comp) on shapes that hit every tile edge (64x64 output blocks, K in steps of 16, fp16 sums
in chunks of 8), the fused residual epilogue, and the per-dispatch GPU time profile. Eager PyTorch is
the reference: FP32 1e-4, FP16 1e-2 relative (conftest.check)."""

from __future__ import annotations

import pytest
import torch
from executorch.exir import to_edge
from torch import nn

from vulkan_delegate.lower import lower_program
from vulkan_delegate.ops import conv
from vulkan_delegate.ops.conv import F32_BIG_ENV, gemm_variant
from vulkan_delegate.payload import serialize
from vulkan_delegate.profile import profile_program
from vulkan_delegate.runtime import device_uses_coopmat2, device_uses_tensor_cores, selected_shader


def r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed + sum(shape)))


class MatMul(nn.Module):
    def forward(self, a, b):
        return a @ b


# (M, K, N): exact tiles, one past a tile on every axis, single rows/columns, K below one step; all of
# these give few 64x64 tiles, so they run on the 16x16 `small` tile, except (300, 40, 400): 35 tiles
# (the CI budget keeps two in the default suite; the rest run in `nox -s test-full`)
GEMM_SHAPES = [(65, 17, 129), (300, 40, 400)] + [pytest.param(*s, marks=pytest.mark.slow)
                                                 for s in [(64, 16, 64), (1, 1, 1), (3, 200, 70), (130, 5, 1)]]


@pytest.mark.parametrize("m,k,n", GEMM_SHAPES)
def test_gemm_tile_edges_fp32(m, k, n, vk_check):
    vk_check(MatMul().eval(), (r(m, k), r(k, n)))


@pytest.mark.parametrize("fp16", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_gemv_linear_bias_relu(fp16, vk_check):
    """One row (batch-1 linear): matmul_gemv, K = 300 (not a multiple of its 64 lanes), N = 70 (not of
    its 4 outputs per workgroup), bias and relu in its epilogue."""
    class LinearRelu(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(300, 70)

        def forward(self, x):
            return torch.relu(self.fc(x))

    vk_check(LinearRelu().eval(), (r(1, 300),), fp16=fp16)


def test_gemv_past_65535_workgroups_along_n(vk_check):
    """A one-row product with N > 4 * 65535 (matmul_gemv's 4 outputs per workgroup): the GEMV kernel, its
    dispatch split by base workgroup (outputs past the first 65535 workgroups left 0 would fail the
    comparison with eager)."""
    n = 4 * 65535 + 9
    model = MatMul().eval()
    a, b = r(1, 8), r(8, n)
    assert [d.shader for d in _lowered_graph(model, (a, b)).dispatches][0] == "matmul_gemv_f32"
    vk_check(model, (a, b))


def test_gemm_fp16_batched_transposed(vk_check):
    """bmm through strides (B transposed: no copy) with M, N, K off the tile grid, fp16 arithmetic."""
    class BT(nn.Module):
        def forward(self, a, b):
            return a @ b.transpose(-1, -2)

    vk_check(BT().eval(), (r(3, 70, 40), r(3, 66, 40)), fp16=True)


class Block(nn.Module):
    """A ResNet basic block: conv-bn-relu, conv-bn, + identity, relu (the add and relu fold into the
    second conv's epilogue)."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        for bn in (self.b1, self.b2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        return torch.relu(self.b2(self.c2(torch.relu(self.b1(self.c1(x))))) + x)


CONV_CASES = {
    # OC and OH*OW one past a 64 tile, K = 3*3*3 = 27 (not a multiple of 16), stride 2 + padding
    "conv_oc65_stride2": (nn.Conv2d(3, 65, 3, stride=2, padding=1), (r(2, 3, 17, 16),)),
    # 1x1 pointwise fast path, batch 2, C = 33 (K tail), 9x9 = 81 pixels
    "conv_pointwise_b2": (nn.Conv2d(33, 20, 1), (r(2, 33, 9, 9),)),
    # 1x1 with stride: the general addressing, not the pointwise path
    "conv_1x1_stride2": (nn.Conv2d(8, 16, 1, stride=2), (r(1, 8, 9, 9),)),
    "conv_dilated_rect": (nn.Conv2d(5, 7, (3, 2), dilation=(2, 1), padding=(2, 0)), (r(1, 5, 10, 12),)),
    "resnet_block": (Block(8).eval(), (r(1, 8, 10, 10),)),
    # 12 16x16 tiles, K = 40*9 = 360: split-K in 2 parts (conv2d_splitk adds them, bias, residual, relu)
    "resnet_block_split_k": (Block(40).eval(), (r(1, 40, 7, 7),)),
    # 48x48 = 2304 pixels: 36 64x64 tiles, the big tile (the cases above take the small one)
    "conv_big_tile": (nn.Conv2d(4, 8, 3, padding=1), (r(1, 4, 48, 48),)),
}


@pytest.mark.parametrize("name", [n if n in ("conv_oc65_stride2", "resnet_block_split_k", "conv_big_tile")
                                  else pytest.param(n, marks=pytest.mark.slow) for n in sorted(CONV_CASES)])
def test_conv_gemm_fp32(name, vk_check, monkeypatch):
    monkeypatch.setenv("VKDG_WINOGRAD", "0")  # 3x3 stride-1 ones too on the GEMM (test_vulkan_conv_winograd.py)
    model, inputs = CONV_CASES[name]
    vk_check(model.eval(), inputs)


@pytest.mark.parametrize("name", [pytest.param("conv_oc65_stride2", marks=pytest.mark.slow), "resnet_block_split_k",
                                  pytest.param("conv_big_tile", marks=pytest.mark.slow)])
def test_conv_gemm_fp16(name, vk_check):
    model, inputs = CONV_CASES[name]
    vk_check(model.eval(), inputs, fp16=True)


def _lowered_graph(model, inputs, fp16=False):
    """The compute graph `preprocess` would build for the whole model (one partition)."""
    ep = torch.export.export(model, inputs)
    return lower_program(to_edge(ep).exported_program(), fp16)


def test_residual_add_and_relu_fold_into_the_conv(monkeypatch):
    """The block lowers to two conv2d_gemm dispatches (then the copy to the output buffer): bn, add and
    both relus fused, each dispatch named by its module and op (on the GEMM: fp32 3x3 stride-1 convs take
    conv2d_wino by default, whose epilogue test_vulkan_conv_winograd.py checks)."""
    monkeypatch.setenv("VKDG_WINOGRAD", "0")
    model, inputs = CONV_CASES["resnet_block"]
    g = _lowered_graph(model, inputs)
    assert [d.shader for d in g.dispatches] == ["conv2d_gemm_f32small", "conv2d_gemm_f32small", "copy_f32_f32"]
    assert g.dispatches[1].push[19] == 1  # has_res
    assert [d.name for d in g.dispatches] == ["c1: convolution", "c2: convolution", "output"]
    assert serialize(g).count(b"c2: convolution") == 1


def test_split_k_where_the_output_gives_few_tiles(monkeypatch):
    monkeypatch.setenv("VKDG_WINOGRAD", "0")  # (the GEMM's split; conv2d_wino's own in test_vulkan_conv_winograd.py)
    model, inputs = CONV_CASES["resnet_block_split_k"]
    g = _lowered_graph(model, inputs)
    assert [d.shader for d in g.dispatches][:4] == ["conv2d_gemm_f32small", "conv2d_splitk_f32"] * 2
    assert g.dispatches[0].push[20] == 2 and g.dispatches[3].push[7] == 1  # 2 splits; residual in the sum


def test_gemm_tile_is_chosen_by_shape(monkeypatch):
    """Outputs that give fewer than 32 64x64 tiles (with K <= 2048) take the 16x16 `small` tile: a
    batch-2 linear layer, a 1x1 conv at 7x7 (when the pointwise kernel for at most 196 pixels is off); big
    outputs and long K keep the 64x64 one; a single row (batch-1 linear) the GEMV kernel. (3x3 stride-1 convs
    with VKDG_WINOGRAD=0: else conv2d_wino.)"""
    monkeypatch.setenv("VKDG_WINOGRAD", "0")
    small = [d.shader for d in _lowered_graph(nn.Linear(960, 1000).eval(), (r(2, 960),)).dispatches]
    assert small[0] == "matmul_f32small"
    one_row = [d.shader for d in _lowered_graph(nn.Linear(1280, 1000).eval(), (r(1, 1280),)).dispatches]
    assert one_row[0] == "matmul_gemv_f32"
    pointwise = nn.Conv2d(160, 960, 1).eval(), (r(1, 160, 7, 7),)
    assert _lowered_graph(*pointwise).dispatches[0].shader == "conv2d_1x1_small_f32"
    monkeypatch.setenv("VKDG_CONV1X1_SMALL", "0")
    assert _lowered_graph(*pointwise).dispatches[0].shader == "conv2d_gemm_f32small"
    monkeypatch.delenv("VKDG_CONV1X1_SMALL")
    big = _lowered_graph(*CONV_CASES["conv_big_tile"]).dispatches
    assert big[0].shader == "conv2d_gemm_f32"
    long_k = _lowered_graph(nn.Conv2d(512, 512, 3, padding=1).eval(), (r(1, 512, 7, 7),)).dispatches
    assert [d.shader for d in long_k][:2] == ["conv2d_gemm_f32", "conv2d_splitk_f32"]
    # 26 64x64 tiles but K = 128*9 = 1152: the 64x64 tile (ResNet-18's layer2 ran 2x slower on the small one)
    k1152 = _lowered_graph(nn.Conv2d(128, 128, 3, padding=1).eval(), (r(1, 128, 28, 28),)).dispatches
    assert k1152[0].shader == "conv2d_gemm_f32"


def test_few_workgroup_fp16_gemm_names_the_split_variant(vk_check):
    """An fp16 matmul on the 16x16 tile with at most SPLIT_MAX_GROUPS workgroups names `f16smallsplit`
    (on tensor cores its twin splits K over the subgroups; elsewhere, as on lavapipe here, it is the small
    tile); more workgroups keep `f16small` (the twin was slower there on the H100)."""
    def shader(m, k, n):
        graph = _lowered_graph(MatMul().eval(), (r(m, k), r(k, n)), fp16=True)
        return next(d.shader for d in graph.dispatches if d.shader.startswith("matmul"))

    assert shader(128, 256, 256) == "matmul_f16smallsplit"  # 8 x 16 = 128 workgroups (the Llama block's wq)
    assert shader(128, 256, 688) == "matmul_f16small"  # 344 (its w_gate)
    # M and N off the 16-grid, K off the 32-deep slices of the twin
    vk_check(MatMul().eval(), (r(20, 100), r(100, 30)), fp16=True)


def test_profile_names_every_dispatch_by_module(vk_lower, tmp_path):
    model, inputs = CONV_CASES["resnet_block"]
    edge = vk_lower(model, inputs)
    prof = profile_program(edge, *inputs, runs=3)
    assert [row.name for row in prof.rows] == ["c1: convolution", "c2: convolution", "output"]
    assert all(row.calls == 3 and row.mean_us > 0 for row in prof.rows)
    table = prof.format_table()
    assert "c2: convolution" in table and "total" in table
    png = prof.plot_png(tmp_path / "p.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_tensor_core_variant_is_chosen_by_the_device(vk_lower, monkeypatch):
    """fp16 GEMM on the 64x64 tile runs as its cooperative-matrix twin (f16coop) only where the
    device has VK_KHR_cooperative_matrix; lavapipe has none, so it (and VKDG_COOPMAT=0 anywhere) keeps
    the generic tile, which the profile names (the small tile and the convolution have no twin). The
    coop numerics are checked on the GPU (bench/vulkan_gpu)."""
    assert selected_shader("matmul_f16", True) == "matmul_f16coop"
    assert selected_shader("matmul_f16smallsplit", True) == "matmul_f16smallsplitcoop"
    assert selected_shader("matmul_f16smallsplit", False) == "matmul_f16smallsplit"
    # attention_flash's fp16 subgroup variant has a tensor-core twin (attention_flash_coop.glsl); its scalar and
    # fp32 ones do not
    assert selected_shader("attention_flash_f16sg", True) == "attention_flash_f16sgcoop"
    assert selected_shader("attention_flash_f16sg", False) == "attention_flash_f16sg"
    for name in ("matmul_f32", "conv2d_gemm_f16", "matmul_f16small", "conv2d_f16", "softmax_f16",
                 "attention_flash_f32sg", "attention_flash_f16", "reduce_row_f16sg"):
        assert selected_shader(name, True) == name
    assert selected_shader("matmul_f16", False) == "matmul_f16"
    assert selected_shader("no_such_shader_f16", True) == ""
    monkeypatch.setenv("VKDG_COOPMAT", "0")
    assert not device_uses_tensor_cores()
    monkeypatch.delenv("VKDG_COOPMAT")
    coop = device_uses_tensor_cores()
    model, inputs = MatMul().eval(), (r(300, 40), r(40, 400))  # 35 64x64 tiles: not the small tile
    prof = profile_program(vk_lower(model, inputs, fp16=True), *inputs, runs=1)
    assert [row.shader for row in prof.rows if row.shader.startswith("matmul")] == [
        "matmul_f16coop" if coop else "matmul_f16"]


def test_coopmat2_variant_only_where_the_device_has_it(vk_lower, monkeypatch):
    """matmul's 128x128 `f16big` runs as its VK_NV_cooperative_matrix2 twin (`f16bigcoop2`, a 128x256 workgroup-
    scope block) only where the device has that extension too (device.cpp's probe); no other shader has one.
    lavapipe has none: its big fp16 GEMM keeps the old kernel, as VKDG_COOPMAT2=0 does anywhere. The coop2
    numerics are checked on the GPU (bench/vulkan_gpu CHECKS)."""
    assert selected_shader("matmul_f16big", True, True) == "matmul_f16bigcoop2"
    assert selected_shader("matmul_f16big", True) == "matmul_f16bigcoop"
    assert selected_shader("matmul_f16big", False, True) == "matmul_f16big"  # coopmat2 needs coopmat
    for name in ("matmul_f16", "matmul_f16smallsplit", "matmul_f32big", "conv2d_gemm_f16big", "matmul_f16small"):
        assert selected_shader(name, True, True) == selected_shader(name, True)
    monkeypatch.setenv("VKDG_COOPMAT2", "0")
    assert not device_uses_coopmat2()
    monkeypatch.delenv("VKDG_COOPMAT2")
    coop, coop2 = device_uses_tensor_cores(), device_uses_coopmat2()
    model, inputs = BIG_CASES["batched"]()
    prof = profile_program(vk_lower(model.eval(), inputs, fp16=True), *inputs, runs=1)
    expect = "matmul_f16bigcoop2" if coop2 else "matmul_f16bigcoop" if coop else "matmul_f16big"
    assert [row.shader for row in prof.rows if row.shader.startswith("matmul")] == [expect]




class LinearNoBias(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = nn.Linear(k, n, bias=False)

    def forward(self, x):
        return self.fc(x)


class BT(nn.Module):
    """a @ b.T: B a column-major view (k contiguous)."""

    def forward(self, a, b):
        return a @ b.transpose(-1, -2)


# fp16 outputs of at least 264 128x128 tiles take the 128x128 `f16big` block: here (lavapipe) the 64x64
# tile over its quarters, on the GPU its tensor-core twin f16bigcoop (checked there: bench/vulkan_gpu
# CHECKS). M, N past the 128 and 64 grids, K past the 16-step.
BIG_CASES = {
    "batched": lambda: (MatMul(), (r(66, 130, 40), r(66, 40, 132))),  # batch offsets
    "rowmajor": lambda: (MatMul(), (r(2100, 40), r(40, 2052))),
    "bt": lambda: (BT(), (r(2050, 64), r(2060, 64))),  # B column-major
    "bt_k37": lambda: (BT(), (r(2100, 37), r(2049, 37))),
    "weights": lambda: (LinearNoBias(37, 2049), (r(2100, 37),)),  # the constant weight operand
}


@pytest.mark.parametrize("case", ["batched"] + [pytest.param(c, marks=pytest.mark.slow) for c in BIG_CASES
                                                if c != "batched"])
def test_big_gemm_tile(case, vk_check):
    model, inputs = BIG_CASES[case]()
    model.eval()
    assert "matmul_f16big" in [d.shader for d in _lowered_graph(model, inputs, fp16=True).dispatches]
    vk_check(model, inputs, fp16=True)


class TA(nn.Module):
    """a.T @ b: A a column-major view (m contiguous: element loads of A)."""

    def forward(self, a, b):
        return a.transpose(-1, -2) @ b


# fp32 outputs of at least F32_BIG_FROM 128x128 blocks take matmul's `f32big` (gemm_tile_big32.glsl: an 8x8
# register block per invocation, vec4 loads where the strides allow; forced here from 1 block): the cases
# above plus odd K with batch offsets (rows 37 apart: element loads) and a column-major A
BIG32_CASES = {**BIG_CASES,
               "batched_k37": lambda: (MatMul(), (r(66, 130, 37), r(66, 37, 131))),
               "ta": lambda: (TA(), (r(41, 2100), r(41, 2051)))}


@pytest.mark.parametrize("case", ["batched_k37"] + [pytest.param(c, marks=pytest.mark.slow)
                                                   for c in BIG32_CASES if c != "batched_k37"])
def test_big_gemm_tile_fp32(case, vk_check, monkeypatch):
    assert gemm_variant("f32", 4096, 4096, 1, 64, big=True) == "f32big"
    monkeypatch.setenv(F32_BIG_ENV, "0")  # the 64x64 tile, for timing it
    assert gemm_variant("f32", 4096, 4096, 1, 64, big=True) == "f32"
    monkeypatch.delenv(F32_BIG_ENV)
    monkeypatch.setattr(conv, "F32_BIG_FROM", 1)
    assert gemm_variant("f32", 4096, 4096, 1, 64) == "f32"  # a caller without it (conv2d_gemm)
    model, inputs = BIG32_CASES[case]()
    model.eval()
    assert "matmul_f32big" in [d.shader for d in _lowered_graph(model, inputs).dispatches]
    vk_check(model, inputs)


class ConvRelu(nn.Module):
    def __init__(self, c, oc, k, res=False):
        super().__init__()
        self.conv, self.res = nn.Conv2d(c, oc, k, padding=k // 2), res

    def forward(self, x):
        y = self.conv(x)
        return torch.relu(y + x if self.res else y)


@pytest.mark.parametrize("c,oc,res", [(16, 130, False)] + [
    pytest.param(*p, marks=pytest.mark.slow) for p in [(130, 130, True), (15, 130, False)]])
def test_big_conv_tile(c, oc, res, vk_check):
    """fp16 pointwise conv2d_gemm on the 128x128 block (352 tiles at 150x150): bias, residual and ReLU in
    emit(); a 3x3 conv of that size runs packed (test_vulkan_conv_packed.py)."""
    model, x = ConvRelu(c, oc, 1, res).eval(), r(1, c, 150, 150)
    assert "conv2d_gemm_f16big" in [d.shader for d in _lowered_graph(model, (x,), fp16=True).dispatches]
    vk_check(model, (x,), fp16=True)
    x16 = r(1, 16, 150, 150)
    conv3 = [d.shader for d in _lowered_graph(ConvRelu(16, 130, 3).eval(), (x16,), fp16=True).dispatches]
    assert conv3[1:3] == ["conv2d_pack_f16", "conv2d_gemm_f16big"]


def test_big_tile_is_chosen_by_shape_and_its_twin_by_the_device():
    """fp16, 264 128x128 tiles (2 per SM of a 132-SM H100) and up: the big tile; 263: the 64x64 one. It
    runs as f16bigcoop where the device has cooperative matrices."""
    assert gemm_variant("f16", 128 * 12, 128 * 22, 1, 64, big=True) == "f16big"
    assert gemm_variant("f16", 128 * 12, 128 * 22 - 1, 1, 64, big=True) == "f16big"
    assert gemm_variant("f16", 128 * 263, 128, 1, 64, big=True) == "f16"
    assert gemm_variant("f16", 128 * 12, 128 * 22, 1, 64) == "f16"  # a caller without the big tile
    assert gemm_variant("f16", 2048, 2048, 3, 64, big=True) == "f16big"  # batch counts
    # fp32: f32big from 792 blocks (4096^3 on the H100 1.5x faster; 2100 x 2056, 289 blocks, 1.2x slower)
    assert gemm_variant("f32", 4096, 4096, 1, 64, big=True) == "f32big"
    assert gemm_variant("f32", 2100, 2056, 1, 64, big=True) == "f32"
    assert selected_shader("matmul_f16big", True) == "matmul_f16bigcoop"
    assert selected_shader("conv2d_gemm_f16big", True) == "conv2d_gemm_f16bigcoop"
    assert selected_shader("matmul_f16big", False) == "matmul_f16big"
