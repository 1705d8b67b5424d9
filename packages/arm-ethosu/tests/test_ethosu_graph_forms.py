"""Graph forms where data moves, on Ethos-U: bit-exact on the TOSA reference model and cheaper for vela."""

import arm_ethosu_test_flow as flow
import pytest
import torch
from torch import nn

from arm_ethosu import EthosUCompileSpec, ethosu_payloads, ethosu_report
from arm_ethosu.backend import tosa_graph_of
from arm_tosa_core import run_on_reference_model
from arm_tosa_core.ops import conv, resize
from arm_tosa_core.tosa_inspect import tosa_op_counts


class ChannelShuffle(nn.Module):
    def __init__(self, channels: int = 32, groups: int = 2) -> None:
        super().__init__()
        self.a, self.b, self.groups = nn.Conv2d(channels, channels, 1), nn.Conv2d(channels, channels, 1), groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.a(x)
        b, c, h, w = x.shape
        x = x.view(b, self.groups, c // self.groups, h, w).transpose(1, 2).contiguous().view(b, c, h, w)
        return self.b(x)


def test_channel_shuffle_is_one_transpose_on_u55():
    torch.manual_seed(0)
    inputs = (torch.randn(1, 32, 16, 16),)
    quantized = flow.quantize(ChannelShuffle().eval(), inputs)
    edge = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u55-128").include_host_graph())
    (payload,) = ethosu_payloads(edge)
    assert tosa_op_counts(tosa_graph_of(payload))["TRANSPOSE"] == 3  # input edge, the shuffle, output edge
    (part,) = ethosu_report(edge).partitions
    # vela 5.2: 35,872 NPU cycles through NCHW and back (5 TRANSPOSEs), 19,232 with the shuffle in NHWC
    assert part.cycles_npu < 25_000, part.cycles_npu
    with torch.no_grad():
        assert torch.equal(run_on_reference_model(edge, *inputs), quantized(*inputs))


class Upsample(nn.Module):
    """conv -> bilinear (or nearest) k x (half-pixel, LRASPP's form) -> conv."""

    def __init__(self, k: int, channels: int = 3, width: int = 4, mode: str = "bilinear") -> None:
        super().__init__()
        self.a, self.b, self.k, self.mode = nn.Conv2d(channels, width, 1), nn.Conv2d(width, 4, 1), k, mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(nn.functional.interpolate(self.a(x), scale_factor=self.k, mode=self.mode))


def _upsample_on_u55_and_u85(k: int, forms: tuple[str | None, ...], shape=(1, 3, 5, 6), width: int = 4,
                             mode: str = "bilinear"):
    """(quantized model, inputs, U85's RESIZE output, {form: (U55 edge, its output)})."""
    torch.manual_seed(0)
    inputs = (torch.randn(*shape),)
    quantized = flow.quantize(Upsample(k, shape[1], width, mode).eval(), inputs)
    u85 = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u85-256").include_host_graph())
    (payload,) = ethosu_payloads(u85)
    assert tosa_op_counts(tosa_graph_of(payload))["RESIZE"] == 1
    u55 = {}
    for form in forms:
        with resize.bilinear_form(form):
            edge = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u55-128").include_host_graph())
        assert flow.cpu_compute(edge) == {}, flow.cpu_compute(edge)
        assert all(p.cpu_ops == 0 for p in ethosu_report(edge).partitions)
        with torch.no_grad():
            u55[form] = (edge, run_on_reference_model(edge, *inputs))
    with torch.no_grad():
        return quantized, inputs, run_on_reference_model(u85, *inputs), u55


@pytest.mark.parametrize("k", [4, pytest.param(2, marks=pytest.mark.slow), pytest.param(8, marks=pytest.mark.slow)])
def test_bilinear_upscale_on_u55_equals_the_resize_form(k):
    """U55 runs k x bilinear as NEAREST + depthwise conv, in every form `--tune` can pick (one (k+1)^2
    kernel, or (k+1)x1 and 1x(k+1) through int16); on the reference model each gives the very integers of
    the BILINEAR RESIZE form U85 compiles (whose accuracy the core's resize tests check)."""
    _, _, expected, u55 = _upsample_on_u55_and_u85(k, resize.BILINEAR_FORMS)
    for form, (edge, got) in u55.items():
        (payload,) = ethosu_payloads(edge)
        ops = tosa_op_counts(tosa_graph_of(payload))
        assert (ops["DEPTHWISE_CONV2D"], ops["RESIZE"]) == (2 if form == "separable" else 1, 1), (form, ops)
        assert torch.equal(got, expected), form
    assert resize.depthwise_form(k) == ("full" if k == 2 else "separable")  # the plain compile's rule


@pytest.mark.parametrize("k", [3, pytest.param(6, marks=pytest.mark.slow), pytest.param(16, marks=pytest.mark.slow)])
def test_other_integer_upscales_on_u55_equal_the_resize_form(k):
    """Integer factors vela has no NEAREST RESIZE for on U55 (odd 3x: copies and box(3) taps; 6x: a 2x
    RESIZE then 3x copies; DeepLabV3's 16x: 8x then 2x RESIZEs): the very integers of U85's RESIZE, in
    both depthwise forms, bilinear and nearest."""
    _, _, expected, u55 = _upsample_on_u55_and_u85(k, resize.BILINEAR_FORMS)
    for form, (_, got) in u55.items():
        assert torch.equal(got, expected), form
    _, _, expected, u55 = _upsample_on_u55_and_u85(k, (None,), mode="nearest")
    (edge, got), = u55.values()
    assert torch.equal(got, expected)
    (payload,) = ethosu_payloads(edge)
    assert tosa_op_counts(tosa_graph_of(payload))["DEPTHWISE_CONV2D"] == 0  # nearest is data movement only


def test_separable_upsample_halves_lraspps_8x_on_u55():
    """LRASPP's final 8x (21 channels, 16x16 -> 128x128): the separable form with the edge replicated
    before the upsample. vela 5.2, U55-128: 3,667,788 NPU cycles as one 9x9 kernel after two CONCATs,
    2,919,662 as one 9x9 kernel, 1,758,038 separable (the default for 8x)."""
    _, _, expected, u55 = _upsample_on_u55_and_u85(8, ("full", None), shape=(1, 21, 16, 16), width=21)
    cycles = {form: ethosu_report(edge).partitions[0].cycles_npu for form, (edge, _) in u55.items()}
    assert cycles[None] < 0.65 * cycles["full"] and cycles[None] < 2_000_000, cycles
    assert all(torch.equal(got, expected) for _, got in u55.values())


def test_tune_tries_both_upsample_forms():
    """--tune on U55 compiles the partition in both upsample forms (each bit-exact: the test above) and
    keeps the fewer NPU cycles; its result is the plain compile's integers."""
    torch.manual_seed(0)
    inputs = (torch.randn(1, 3, 5, 6),)
    quantized = flow.quantize(Upsample(8).eval(), inputs)
    spec = EthosUCompileSpec("ethos-u55-128").include_host_graph().enable_tune(max_candidates=14, max_workers=1)
    edge = flow.lower(quantized, inputs, spec)
    plain = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u55-128").include_host_graph())
    (part,) = ethosu_report(edge).partitions
    by_name = {c["name"]: c for c in part.tune["candidates"]}
    assert {"default", "bilinear=full/default"} <= set(by_name), sorted(by_name)
    assert by_name["default"]["cycles_npu"] < by_name["bilinear=full/default"]["cycles_npu"]
    with torch.no_grad():
        assert torch.equal(run_on_reference_model(edge, *inputs), run_on_reference_model(plain, *inputs))


class PaddedConvs(nn.Module):
    """Explicit zero pads before convolutions inside a network: symmetric, and timm's "same" padding for a
    stride-2 3x3 depthwise conv (0 before, 1 after)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(8, 8, 1)  # the pads sit inside the network, in NHWC (not on the NCHW input)
        self.a = nn.Conv2d(8, 16, 3)
        self.b = nn.Conv2d(16, 16, 3, stride=2, groups=16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.a(nn.functional.pad(self.stem(x), (1, 1, 1, 1)))
        return self.b(nn.functional.pad(torch.relu(x), (0, 1, 0, 1)))


def test_zero_pad_folds_into_the_convolution_on_u55(monkeypatch):
    """A PAD by the zero point before a convolution becomes the convolution's padding: no PAD (vela would
    copy the tensor), the same integers as the PAD + convolution form, fewer NPU cycles."""
    torch.manual_seed(0)
    inputs = (torch.randn(1, 8, 8, 8),)
    quantized = flow.quantize(PaddedConvs().eval(), inputs)
    outs, cycles, pads = {}, {}, {}
    for form in ("folded", "pad ops"):
        if form == "pad ops":  # the lowering before the fold, for comparison
            monkeypatch.setattr(conv, "absorb_zero_pad", lambda b, xt, pads, *rest: (xt, pads))
        edge = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u55-128").include_host_graph())
        (payload,) = ethosu_payloads(edge)
        pads[form] = tosa_op_counts(tosa_graph_of(payload)).get("PAD", 0)
        cycles[form] = ethosu_report(edge).partitions[0].cycles_npu
        with torch.no_grad():
            outs[form] = run_on_reference_model(edge, *inputs)
    assert pads == {"folded": 0, "pad ops": 2}, pads
    assert torch.equal(outs["folded"], outs["pad ops"])
    assert cycles["folded"] < cycles["pad ops"], cycles


class DilatedPastTheInput(nn.Module):
    """DeepLabV3's ASPP at a small input: 3x3 convs (dense and depthwise) whose dilation reaches past the
    6x5 map, so every off-centre tap reads padding; and one of dilation 2, whose taps all stay."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 1)
        self.aspp = nn.Conv2d(8, 8, 3, padding=12, dilation=12)
        self.dw = nn.Conv2d(8, 8, 3, padding=(6, 1), dilation=(6, 1), groups=8)
        self.near = nn.Conv2d(8, 4, 3, padding=2, dilation=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.near(self.dw(self.aspp(self.stem(x))))


def test_taps_that_read_only_padding_are_dropped():
    """vela runs a dilated kernel densely ((k-1)d+1 taps a side), so taps that only ever read padding are
    dropped first: the same integers (quantized eager within 1 LSB), far fewer NPU cycles."""
    torch.manual_seed(0)
    inputs = (torch.randn(1, 3, 6, 5),)
    quantized = flow.quantize(DilatedPastTheInput().eval(), inputs)
    edge = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u55-128").include_host_graph())
    assert flow.cpu_compute(edge) == {}, flow.cpu_compute(edge)
    (part,) = ethosu_report(edge).partitions
    # vela 5.2, U55-128: 27,635 NPU cycles with the taps (dense 25x25 and 13x3 kernels), 1,887 without
    assert part.cycles_npu < 10_000, part.cycles_npu
    with torch.no_grad():
        err = (run_on_reference_model(edge, *inputs) - quantized(*inputs)).abs().max().item()
    assert err <= flow.output_lsb(quantized) * 1.0001, err


# an NCHW image input (3 channels) and an NCHW output: a TRANSPOSE at each edge of the partition
STEM_FILE = ("import torch\nfrom torch import nn\n\ndef make_model():\n    torch.manual_seed(0)\n"
             "    return (nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 8, 3, 1, 1, groups=8), "
             "nn.Conv2d(8, 4, 1)).eval(), (torch.randn(1, 3, 32, 32),))\n")


def test_u55_collapses_the_edge_transposes_by_default_and_tune_tries_them_as_recorded(tmp_path, capsys):
    """On U55 the plain compile writes each TRANSPOSE collapsed (arm_tosa_core.transpose_forms: [3, 1024] ->
    [1024, 3] for the image input; `compile_spec.default_transpose_form`), which vela 5.2 runs in fewer NPU and
    total cycles than the rank-4 TRANSPOSE; --tune also compiles the transposes as recorded and keeps the
    collapsed form; vela's command stream for it runs bit-exact on the NPU simulator against the TOSA
    reference model. Measured: collapsed 9,040 NPU / 9,872 total cycles, as recorded 10,000 / 11,280."""
    from arm_tosa_core.compile_cli import main

    (tmp_path / "stem_model.py").write_text(STEM_FILE)
    pte = tmp_path / "stem.pte"
    rc = main([f"{tmp_path / 'stem_model.py'}:make_model", "-o", str(pte), "--target", "ethos-u55-128", "--tune",
               "--simulate", "--no-verify"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "simulator: bit-exact with the TOSA reference model" in out
    (part,) = ethosu_report(pte.read_bytes()).partitions
    by_name = {c["name"]: c for c in part.tune["candidates"]}
    assert not part.tune["chosen"].startswith("transpose=as-is/"), part.tune["chosen"]
    collapsed, as_is = by_name["default"], by_name["transpose=as-is/default"]
    assert collapsed["cycles_npu"] < as_is["cycles_npu"] and collapsed["cycles_total"] < as_is["cycles_total"]
    assert part.cycles_npu <= collapsed["cycles_npu"]


class _AddThenPermute(nn.Module):
    """An add (so the partition computes something) then a permute of its int8 result."""

    def __init__(self, perm: tuple[int, ...]) -> None:
        super().__init__()
        self.perm = perm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x + x).permute(*self.perm)


def _transposes(tosa: bytes) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(input shape, perm) of every TRANSPOSE in the main block."""
    from tosa.Op import Op
    from tosa.TosaGraph import TosaGraph
    from tosa.TransposeAttribute import TransposeAttribute

    block = TosaGraph.GetRootAs(tosa, 0).Regions(0).Blocks(0)
    shapes = {block.Tensors(i).Name(): tuple(block.Tensors(i).ShapeAsNumpy()) for i in range(block.TensorsLength())}
    out = []
    for op in (block.Operators(i) for i in range(block.OperatorsLength())):
        if op.Op() == Op.TRANSPOSE:
            table, attr = op.Attribute(), TransposeAttribute()
            attr.Init(table.Bytes, table.Pos)
            out.append((shapes[op.Inputs(0)], tuple(int(p) for p in attr.PermsAsNumpy())))
    return out


# the six cases of arm-tosa-core's test_transpose_forms, here through the Ethos-U U55 default
@pytest.mark.parametrize(("shape", "perm"), [((1, 3, 16, 16), (0, 2, 3, 1)), ((1, 16, 16, 3), (0, 3, 1, 2)),
                                             ((1, 6, 2, 5, 5), (0, 2, 1, 3, 4)), ((1, 1, 5, 1), (0, 2, 1, 3)),
                                             ((2, 3, 4, 5), (0, 2, 1, 3)), ((4, 1, 3, 2), (3, 1, 0, 2))])
def test_u55_default_transpose_form_is_collapsed_and_bit_exact(shape, perm):
    """EthosUCompileSpec on U55 writes every TRANSPOSE collapsed (`default_transpose_form`) without being asked:
    no TRANSPOSE of the graph vela compiles has more axes than its collapsed form, and the program equals the
    quantized model on the TOSA reference model (the edge layout transposes fold into the permute)."""
    from arm_tosa_core.transpose_forms import collapse_for_vela

    torch.manual_seed(0)
    inputs = (torch.randn(*shape),)
    quantized = flow.quantize(_AddThenPermute(perm).eval(), inputs)
    spec = EthosUCompileSpec("ethos-u55-128").include_host_graph()
    assert spec.transpose_form == "collapsed"
    edge = flow.lower(quantized, inputs, spec)
    assert flow.cpu_compute(edge) == {}, flow.cpu_compute(edge)
    (payload,) = ethosu_payloads(edge)
    for t_shape, t_perm in _transposes(tosa_graph_of(payload)):
        assert collapse_for_vela(t_shape, t_perm) is None, (t_shape, t_perm)  # nothing left to collapse
    with torch.no_grad():
        assert torch.equal(run_on_reference_model(edge, *inputs), quantized(*inputs))


@pytest.mark.parametrize(("pool", "shape"), [(nn.MaxPool2d(3, 1, 1, ceil_mode=True), (1, 16, 8, 8)),  # GoogLeNet's
                                             (nn.MaxPool2d(5, 1, 2), (1, 8, 9, 7)),
                                             (nn.MaxPool2d((3, 2), 1, (1, 0)), (1, 8, 6, 5))])
def test_u55_stride_one_max_pool_is_two_passes_and_bit_exact(pool, shape):
    """On U55 a stride-1 k x k max pool is written as k x 1 then 1 x k (`helpers.windows._max_pool`: fewer vela
    cycles); the same integers as the quantized model on the reference model. U85 keeps one pool."""
    torch.manual_seed(0)
    inputs = (torch.randn(*shape),)
    model = nn.Sequential(nn.Conv2d(shape[1], shape[1], 1), pool, nn.Conv2d(shape[1], 4, 1)).eval()
    quantized = flow.quantize(model, inputs)
    for target, pools in (("ethos-u55-128", 2), ("ethos-u85-256", 1)):
        edge = flow.lower(quantized, inputs, EthosUCompileSpec(target).include_host_graph())
        assert flow.cpu_compute(edge) == {}, flow.cpu_compute(edge)
        (payload,) = ethosu_payloads(edge)
        assert tosa_op_counts(tosa_graph_of(payload))["MAX_POOL2D"] == pools, target
        with torch.no_grad():
            assert torch.equal(run_on_reference_model(edge, *inputs), quantized(*inputs)), target


class TwoBranchesOfTheInput(nn.Module):
    """FastViT's stem and large-kernel blocks: two convolutions read the same input (PT2E gives each its own
    dequantize)."""

    def __init__(self, channels: int = 16) -> None:
        super().__init__()
        self.large = nn.Conv2d(channels, channels, 7, stride=2, padding=3, groups=channels)
        self.small = nn.Conv2d(channels, channels, 3, stride=2, padding=1, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.large(x) + self.small(x)


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u85-256"])
def test_a_value_read_by_two_consumers_is_transposed_once(target):
    """One TRANSPOSE of the input for both branches, not one per branch's dequantize (FastViT-T8 on U85
    paid 131 k NPU cycles for the second input transpose); the same bytes, so bit-exact as before."""
    torch.manual_seed(0)
    inputs = (torch.randn(1, 16, 16, 16),)
    quantized = flow.quantize(TwoBranchesOfTheInput().eval(), inputs, target=target)
    edge = flow.lower(quantized, inputs, EthosUCompileSpec(target).include_host_graph())
    (payload,) = ethosu_payloads(edge)
    assert tosa_op_counts(tosa_graph_of(payload))["TRANSPOSE"] == 2  # input edge, output edge (before: 3)
    with torch.no_grad():
        assert torch.equal(run_on_reference_model(edge, *inputs), quantized(*inputs))


class EmbeddingThenCastThenTable(nn.Module):
    """Llama's and T5's first RMS norm: `embed(ids).to(torch.float32).pow(2)` (a TABLE on the NPU)."""

    def __init__(self, vocab: int = 64, dim: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embed(ids).to(torch.float32).pow(2)


def _rescales_reading_a_gather(tosa: bytes) -> int:
    """RESCALEs whose input comes (through RESHAPEs) from a GATHER."""
    from tosa.Op import Op

    count = 0
    for block in flow._blocks(tosa):
        ops = [block.Operators(o) for o in range(block.OperatorsLength())]
        producer = {op.Outputs(j): op for op in ops for j in range(op.OutputsLength())}
        for op in ops:
            if op.Op() != Op.RESCALE:
                continue
            src = producer.get(op.Inputs(0))
            while src is not None and src.Op() == Op.RESHAPE:
                src = producer.get(src.Inputs(0))
            count += src is not None and src.Op() == Op.GATHER
    return count


def test_a_cast_after_an_embedding_adds_no_rescale_on_u85():
    """`x.to(torch.float32)` shares its input's qparams (annotated like the cast it lowers to): before, the
    TABLE's input observer requantized the GATHER's codes with a RESCALE (hf:llama on U85: +272 NPU cycles).
    Bit-exact against the quantized model on the TOSA reference model."""
    torch.manual_seed(0)
    inputs = (torch.randint(0, 64, (1, 8)),)
    quantized = flow.quantize(EmbeddingThenCastThenTable().eval(), inputs, target="ethos-u85-256")
    edge = flow.lower(quantized, inputs, EthosUCompileSpec("ethos-u85-256").include_host_graph())
    (payload,) = ethosu_payloads(edge)
    counts = tosa_op_counts(tosa_graph_of(payload))
    assert counts["GATHER"] == 1 and counts["TABLE"] == 1, counts
    assert _rescales_reading_a_gather(tosa_graph_of(payload)) == 0
    with torch.no_grad():
        assert torch.equal(run_on_reference_model(edge, *inputs), quantized(*inputs))
