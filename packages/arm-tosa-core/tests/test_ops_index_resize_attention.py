"""Op tables: indexing (GATHER), tensor factories, resize (RESIZE) and scaled_dot_product_attention (FP)
vs eager on the TOSA reference model."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from arm_tosa_core import registry
from arm_tosa_core.compile_spec import TosaCompileSpec
from arm_tosa_core.ops import attention
from arm_tosa_core.partitioner import TOSAPartitioner
from arm_tosa_core.testing import FnModule as Fn
from arm_tosa_core.testing import check_lowering, lower

torch.manual_seed(0)
FP = TosaCompileSpec("TOSA-1.0+FP").tosa_spec


TOSA_OPT = Path(sys.executable).with_name("tosa-opt")


def assert_valid_pro_fp(result, tmp_path: Path) -> None:
    """Every delegate payload passes tosa-opt's strict TOSA 1.0 validation for the FP profile alone
    (e.g. int32 RESHAPE/TILE of indices would need the INT profile)."""
    ep = result.edge.exported_program()
    payloads = [bytes(getattr(ep.graph_module, n.target).processed_bytes) for n in ep.graph.nodes
                if n.op == "get_attr" and "lowered_module" in str(n.target)]
    assert payloads
    (tmp_path / "empty.mlir").write_text("")
    for i, payload in enumerate(payloads):
        graph = tmp_path / f"g{i}.tosa"
        graph.write_bytes(payload)
        run = subprocess.run([str(TOSA_OPT), f"--tosa-deserialize=tosa-flatbuffer-filename={graph}",
                              str(tmp_path / "empty.mlir"),
                              "--tosa-attach-target=specification_version=1.0 profiles=pro_fp level=8k",
                              "--tosa-validate=strict-op-spec-alignment"], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr[-2000:]


def conv(cin: int, cout: int) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, 3, padding=1)


# -- indexing ---------------------------------------------------------------------------------------
class Embed(nn.Module):
    def __init__(self, vocab: int, dim: int):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)

    def forward(self, ids):
        return self.emb(ids) * 2


def token_ids(vocab: int, *shape: int, dtype=torch.int64) -> torch.Tensor:
    return torch.randint(0, vocab, shape, dtype=dtype)


EMBEDDING = [
    ("tokens_2x3_int64", 10, 4, token_ids(10, 2, 3)),
    ("tokens_7_int64_edges", 50, 16, torch.tensor([0, 49, 3, 3, 48, 0, 1])),
    ("tokens_3d_int32", 12, 5, token_ids(12, 2, 2, 3, dtype=torch.int32)),
]


@pytest.mark.parametrize("name,vocab,dim,ids", EMBEDDING, ids=[c[0] for c in EMBEDDING])
def test_embedding_runtime_token_ids(name, vocab, dim, ids, tmp_path):
    """Token ids are a runtime input (int64 crosses the delegate boundary as INT32)."""
    result = check_lowering(Embed(vocab, dim), (ids,), case=name)
    assert result.report.delegates[0].ops.get("GATHER") == 1
    assert_valid_pro_fp(result, tmp_path)


INDEXING = [
    ("index_select_runtime_dim1", lambda s, x, i: torch.index_select(x, 1, i) + 1,
     (torch.randn(2, 5, 3), torch.tensor([0, 3, 3, 4]))),
    ("index_select_runtime_last", lambda s, x, i: x.index_select(-1, i) * 2,
     (torch.randn(3, 4, 6), torch.tensor([5, 0], dtype=torch.int32))),
    ("index_select_const_dim0", lambda s, x: torch.index_select(x, 0, s.i) - 1,
     (torch.randn(6, 3),)),
    ("index_tensor_const_negative", lambda s, x: x[:, torch.tensor([0, -1, 2])] * 3, (torch.randn(2, 5, 3),)),
    ("index_tensor_const_2d", lambda s, x: x[torch.tensor([[1, 0], [2, 2]])] + 1, (torch.randn(3, 4),)),
    ("factories", lambda s, x: (x + torch.arange(x.shape[-1]) + torch.full((4,), 2.5) + torch.ones(4),
                                x * torch.zeros_like(x) + torch.ones_like(x), torch.arange(1, 9, 2) * x),
     (torch.randn(2, 4),)),
]


@pytest.mark.parametrize("name,fn,inputs", INDEXING, ids=[c[0] for c in INDEXING])
def test_indexing(name, fn, inputs, tmp_path):
    result = check_lowering(Fn(fn, i=torch.tensor([5, 1, 1, 0])), inputs, case=name)
    if name.startswith("index"):
        assert_valid_pro_fp(result, tmp_path)


def test_index_select_on_nhwc_value_adds_no_transpose():
    """Gathering channels of a conv output works in its NHWC layout."""
    model = Fn(lambda s, x: torch.index_select(s.conv(x), 1, s.i), i=torch.tensor([3, 0, 2]))
    model.conv = conv(3, 4)
    result = check_lowering(model, (torch.randn(1, 3, 5, 6),), case="nhwc_gather")
    assert result.report.delegates[0].ops.get("TRANSPOSE", 0) == 2  # only at the boundary


def test_runtime_index_tensor_stays_on_cpu_with_reason():
    result = check_lowering(Fn(lambda s, x, i: x[i] + 1), (torch.randn(5, 3), torch.tensor([4, -1, 0])),
                            case="runtime_index", expect_full=False)
    assert any("runtime index tensor" in c.reason for c in result.report.cpu_nodes), result.report


def test_out_of_range_constant_index_stays_on_the_cpu_naming_the_fix():
    """The trial lowering sees the real constant indices: the node stays on the CPU (where torch raises
    too) with a reason naming the bad index and the fix, never a crash of to_edge_transform_and_lower."""
    from arm_tosa_core.report import partition_report

    edge = lower(Fn(lambda s, x: torch.index_select(x, 1, s.i), i=torch.tensor([1, 7])), (torch.randn(2, 5),))
    (cpu,) = partition_report(edge).cpu_nodes
    assert cpu.target == "aten.index_select.default"
    assert "index 7 is out of range for a dimension of size 5" in cpu.reason
    assert "fix the constant indices in the model" in cpu.reason


# -- resize -----------------------------------------------------------------------------------------
RESIZE = [
    ("nearest_x2", dict(scale_factor=2, mode="nearest"), (1, 3, 4, 5)),
    ("nearest_size_up_down", dict(size=(7, 3), mode="nearest"), (2, 2, 4, 5)),
    ("nearest_fractional_scales", dict(scale_factor=(1.5, 3.0), mode="nearest"), (1, 2, 4, 3)),
    ("nearest_exact_size", dict(size=(9, 4), mode="nearest-exact"), (1, 2, 5, 6)),
    ("nearest_exact_scale", dict(scale_factor=1.7, mode="nearest-exact"), (1, 2, 5, 6)),
    ("bilinear_x2", dict(scale_factor=2, mode="bilinear"), (1, 3, 4, 5)),
    ("bilinear_size", dict(size=(9, 7), mode="bilinear"), (1, 2, 5, 3)),
    ("bilinear_downscale", dict(scale_factor=0.5, mode="bilinear"), (1, 2, 8, 6)),
    ("bilinear_mixed_scales", dict(scale_factor=(0.6, 2.5), mode="bilinear"), (1, 2, 5, 6)),
    ("bilinear_align_corners_size", dict(size=(7, 9), mode="bilinear", align_corners=True), (1, 2, 4, 5)),
    ("bilinear_align_corners_x2", dict(scale_factor=2, mode="bilinear", align_corners=True), (2, 1, 3, 4)),
    ("bilinear_from_1x1", dict(size=(3, 4), mode="bilinear"), (1, 2, 1, 1)),
]


@pytest.mark.parametrize("name,kwargs,shape", RESIZE, ids=[c[0] for c in RESIZE])
def test_resize(name, kwargs, shape, tmp_path):
    result = check_lowering(Fn(lambda s, x: F.interpolate(x, **kwargs)), (torch.randn(shape),), case=name)
    assert result.report.delegates[0].ops.get("RESIZE") == 1
    assert_valid_pro_fp(result, tmp_path)


def test_resize_between_convs_stays_nhwc():
    model = nn.Sequential(conv(3, 4), nn.Upsample(scale_factor=2, mode="bilinear"), conv(4, 2))
    result = check_lowering(model, (torch.randn(1, 3, 5, 4),), case="conv_resize_conv")
    assert result.report.delegates[0].ops.get("TRANSPOSE", 0) == 2


def test_resize_without_exact_tosa_parameters_stays_on_cpu():
    """align_corners=True down to one row from 40 would need a border beyond -16 * scale."""
    module = Fn(lambda s, x: F.interpolate(x * 2, size=(1, 4), mode="bilinear", align_corners=True) + 1)
    result = check_lowering(module, (torch.randn(1, 2, 40, 4),), case="no_params", expect_full=False)
    reasons = [c.reason for c in result.report.cpu_nodes]
    assert any("no exact TOSA RESIZE parameters" in r and "H=40" in r for r in reasons), reasons


# -- attention --------------------------------------------------------------------------------------
class KeepSDPA(TOSAPartitioner):
    """The partitioner plus what keeping SDPA whole needs (see ops/attention.py's docstring): the
    stride-safe rewrite before exir decomposes, and SDPA in the ops not to decompose."""

    def ops_to_not_decompose(self, ep):
        attention.prepare_for_preservation(ep)
        ops, keep = super().ops_to_not_decompose(ep)
        return ops + [op for op in (SDPA,) if op not in ops], keep


SDPA = torch.ops.aten.scaled_dot_product_attention.default


def keep_sdpa() -> KeepSDPA:
    return KeepSDPA(TosaCompileSpec("TOSA-1.0+FP"))


def qkv(b, h, length, s, e, hkv=None, ev=None):
    hkv = hkv or h
    return torch.randn(b, h, length, e), torch.randn(b, hkv, s, e), torch.randn(b, hkv, s, ev or e)


def sdpa(**kwargs):
    return Fn(lambda s, q, k, v, *mask: F.scaled_dot_product_attention(q, k, v, *mask, **kwargs))


def kept_whole(result, masked_rows: bool = False) -> None:
    """Assert the delegate holds one SDPA node lowered as two MATMULs and one softmax (and, with
    `masked_rows`, the check of a runtime mask for rows masked entirely)."""
    ep = result.edge.exported_program()
    inner = [getattr(ep.graph_module, n.target) for n in ep.graph.nodes
             if n.op == "get_attr" and "lowered_module" in str(n.target)]
    kept = [n for lm in inner for n in lm.original_module.graph.nodes if n.target is not None
            and "scaled_dot_product_attention" in str(n.target)]
    assert len(kept) == 1, kept
    ops = result.report.delegates[0].ops
    assert ops.get("MATMUL") == 2 and ops.get("EXP") == 1 and ops.get("REDUCE_MAX") == 1, ops
    # no trace of torch's decomposition (mask built from arange/compare, masked-row fix-up)
    assert not any(k.startswith(("LOGICAL", "GREATER", "EQUAL", "REDUCE_ANY")) for k in ops) or masked_rows, ops


def bool_mask(*shape):
    mask = torch.rand(*shape) > 0.3
    mask[..., 0] = True  # every query row attends to something (rows masked entirely: test_sdpa_masked_rows)
    return mask


ATTENTION = [
    ("plain", sdpa(), qkv(1, 2, 4, 4, 8)),
    ("cross_lengths_value_dim", sdpa(), qkv(2, 3, 5, 7, 4, ev=6)),
    ("causal", sdpa(is_causal=True), qkv(1, 2, 6, 6, 8)),
    ("causal_short_query", sdpa(is_causal=True), qkv(2, 1, 3, 5, 4)),
    ("scale", sdpa(scale=0.3), qkv(1, 2, 4, 6, 8)),
    ("float_mask_runtime", sdpa(), (*qkv(2, 2, 4, 5, 8), torch.randn(2, 1, 4, 5))),
    ("bool_mask_runtime", sdpa(), (*qkv(1, 2, 4, 5, 8), bool_mask(1, 2, 4, 5))),
    ("gqa_causal", sdpa(is_causal=True, enable_gqa=True), qkv(2, 4, 5, 5, 8, hkv=2)),
    ("gqa_float_mask", sdpa(enable_gqa=True), (*qkv(1, 6, 3, 4, 4, hkv=2), torch.randn(1, 6, 3, 4))),
    ("const_bool_mask", Fn(lambda s, q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=s.m),
                           m=torch.tril(torch.ones(4, 6, dtype=torch.bool), diagonal=2)), qkv(1, 2, 4, 6, 8)),
]


@pytest.mark.parametrize("name,module,inputs", ATTENTION, ids=[c[0] for c in ATTENTION])
def test_attention_kept_whole(name, module, inputs, tmp_path):
    result = check_lowering(module, inputs, case=name, partitioner=keep_sdpa())
    # a runtime mask may mask a row entirely: its rows are checked (REDUCE_ANY) while running
    kept_whole(result, masked_rows=name in ("bool_mask_runtime", "float_mask_runtime", "gqa_float_mask"))
    assert_valid_pro_fp(result, tmp_path)


class SelfAttention(nn.Module):
    """The usual block: projections, heads split by view + permute, SDPA, heads merged by
    transpose + reshape (the pattern that needs `prepare_for_preservation`)."""

    def __init__(self, dim=16, heads=4):
        super().__init__()
        self.heads, self.qkv, self.out = heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, n, d))


def test_self_attention_block_kept_whole():
    kept_whole(check_lowering(SelfAttention(), (torch.randn(2, 5, 16),), case="mha", partitioner=keep_sdpa()))


@pytest.mark.parametrize("name", ["causal", "gqa_float_mask"])
def test_attention_decomposed_by_default_is_fully_delegated(name):
    """With the stock partitioner (preserve off for now) exir decomposes SDPA; that must lower too."""
    _, module, inputs = next(c for c in ATTENTION if c[0] == name)
    check_lowering(module, inputs, case=name)


def test_self_attention_block_decomposed_by_default():
    check_lowering(SelfAttention(), (torch.randn(2, 5, 16),), case="mha_default")


def test_attention_support_rule_reasons():
    """Variants the rule refuses (the node then decomposes, so its reason is checked on the export graph)."""
    cases = [
        (dict(dropout_p=0.1), qkv(1, 2, 4, 4, 8), "dropout_p=0.1"),
        (dict(), (torch.randn(2, 4, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 8)), "rank-4"),
        (dict(), (*qkv(1, 2, 4, 4, 8), torch.randn(4, 4)), None),
    ]
    for kwargs, inputs, expected in cases:
        ep = torch.export.export(sdpa(**kwargs), inputs)
        node = next(n for n in ep.graph.nodes if "scaled_dot_product_attention" in str(n.target))
        reason = registry.unsupported_reason(node, FP)
        assert (reason is None) if expected is None else (reason is not None and expected in reason), reason


# -- query rows masked entirely ------------------------------------------------------------------
# torch 2.13 returns 0 for such a row, for every mask form (its safe softmax): a bool mask False on the
# whole row (also a (B, H, L, 1) mask), and an additive mask of -inf on the whole row. A row of finite
# large negatives (HF's finfo.min) is not masked: torch gives the row's average of V, and so do we.
# Each case runs kept whole (our rule) and decomposed by exir (torch's decomposition), NaN-aware
# against eager (a NaN where torch gives 0 fails), with fully and partly masked rows side by side.

NEG_INF = float("-inf")


def _bool_mask(*shape):
    mask = torch.rand(*shape, generator=torch.Generator().manual_seed(0)) > 0.4
    mask[..., 0] = True
    mask[0, 0, 1] = False  # head 0, row 1: masked entirely
    return mask


def _additive_mask(*shape):
    mask = torch.randn(*shape, generator=torch.Generator().manual_seed(1)) * 0.5
    mask[0, 0, 2] = NEG_INF  # masked entirely
    mask[0, -1, 0, 1:] = NEG_INF  # masked but for one entry
    return mask


def _rows_mask():
    mask = torch.ones(1, 2, 4, 1, dtype=torch.bool)
    mask[0, 1, 2] = False  # (1, H, L, 1): row 2 of head 1 masked entirely
    return mask


def _finfo_min_mask():
    mask = torch.zeros(1, 2, 4, 5)
    mask[0, 0, 3] = torch.finfo(torch.float32).min  # finite: torch averages the row
    mask[0, 1, 0, :2] = torch.finfo(torch.float32).min
    return mask


def _runtime(**kw):
    return Fn(lambda s, q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw))


def _constant(mask, **kw):
    return Fn(lambda s, q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=s.m, **kw), m=mask)


MASKED_ROWS = [  # name, module, inputs, whether a row of the output is 0 because it is masked entirely
    ("bool_runtime", _runtime(), (*qkv(1, 2, 4, 5, 8), _bool_mask(1, 2, 4, 5)), True),
    ("bool_rows_runtime", _runtime(), (*qkv(1, 2, 4, 5, 8), _rows_mask()), True),
    ("additive_runtime", _runtime(), (*qkv(1, 2, 4, 5, 8), _additive_mask(1, 2, 4, 5)), True),
    ("bool_constant", _constant(_bool_mask(1, 2, 4, 5)), qkv(1, 2, 4, 5, 8), True),
    ("additive_constant", _constant(_additive_mask(1, 2, 4, 5)), qkv(1, 2, 4, 5, 8), True),
    ("gqa_bool_runtime", _runtime(enable_gqa=True), (*qkv(1, 4, 4, 5, 8, hkv=2), _bool_mask(1, 4, 4, 5)), True),
    ("finfo_min_runtime", _runtime(), (*qkv(1, 2, 4, 5, 8), _finfo_min_mask()), False),
    ("causal_short_keys", Fn(lambda s, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
     qkv(1, 2, 6, 3, 8), False),
]


def _expected(module, inputs, zero_row: bool):
    with torch.no_grad():
        expected = module(*inputs)
    zero = (expected == 0).all(-1)
    assert bool(zero.any()) == zero_row and torch.isfinite(expected).all()  # torch's answer, stated
    return expected


@pytest.mark.parametrize("name,module,inputs,zero_row", MASKED_ROWS, ids=[c[0] for c in MASKED_ROWS])
def test_masked_rows_kept_whole(name, module, inputs, zero_row):
    _expected(module, inputs, zero_row)
    result = check_lowering(module, inputs, case=name, partitioner=keep_sdpa())
    kept_whole(result, masked_rows=True)


@pytest.mark.parametrize("name,module,inputs,zero_row", MASKED_ROWS, ids=[c[0] for c in MASKED_ROWS])
def test_masked_rows_decomposed_by_exir(name, module, inputs, zero_row):
    _expected(module, inputs, zero_row)
    check_lowering(module, inputs, case=name)
