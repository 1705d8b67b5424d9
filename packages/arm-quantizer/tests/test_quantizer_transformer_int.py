"""INT profile for the transformer ops: softmax, log_softmax, layer/group norm, division and
scaled_dot_product_attention are decomposed by TOSAQuantizer.transform_for_annotation into ops with
integer rules (arm_quantizer.decompose_for_int), so each lowers fully for TOSA-1.0+INT.

Tolerance: the TOSA INT result against the PT2E fake-quantized module (convert_pt2e's output), in
LSBs of the output scale. Every intermediate of a decomposition has its own Q/DQ and each integer rule
reproduces its fake-quant op exactly up to RESCALE's round-half-up against torch's round-half-even,
so a case may differ by 1 LSB on a rounding tie; measured: 0 LSB for every case here.
"""

import pytest
import torch
import torch.nn.functional as F
from quant_harness import check_int, quantize
from torch import nn

from arm_quantizer import TOSAQuantizer, get_symmetric_quantization_config
from arm_quantizer.const_fold import fold_constants
from arm_quantizer.decompose_for_int import DECOMPOSED, decompose_for_int, prepare_for_int
from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, run_on_reference_model
from arm_tosa_core.testing import FnModule as Fn
from arm_tosa_core.testing import compare_outputs, lower

aten = torch.ops.aten
torch.manual_seed(0)


def _sdpa(**kw):
    return Fn(lambda s, q, k, v: F.scaled_dot_product_attention(q, k, v, **kw))


def _qkv(b=1, h=2, length=8, e=16, hkv=None):
    return (torch.randn(b, h, length, e), torch.randn(b, hkv or h, length, e), torch.randn(b, hkv or h, length, e))


_MASK = torch.rand(8, 8) > 0.3
_MASK.fill_diagonal_(True)  # every row keeps an entry (rows masked entirely: the _EMPTY_ROW masks)
_NEG_INF_BIAS = torch.where(_MASK, torch.randn(8, 8) * 0.5, float("-inf"))
# a query row masked entirely: torch 2.13 gives 0 for it (its safe softmax), for both mask forms
_MASK_EMPTY_ROW = _MASK.clone()
_MASK_EMPTY_ROW[3] = False
_NEG_INF_BIAS_EMPTY_ROW = torch.where(_MASK_EMPTY_ROW, torch.randn(8, 8) * 0.5, float("-inf"))

CASES = [
    ("softmax_last", Fn(lambda s, x: F.softmax(x, -1)), (torch.randn(2, 4, 16) * 2,)),
    ("softmax_dim1", Fn(lambda s, x: torch.softmax(x, 1)), (torch.randn(2, 6, 5),)),
    ("log_softmax", Fn(lambda s, x: F.log_softmax(x, -1)), (torch.randn(3, 12) * 2,)),
    ("layer_norm", nn.LayerNorm(16), (torch.randn(2, 4, 16) * 3 + 1,)),
    ("layer_norm_2d_no_affine", nn.LayerNorm([4, 6], elementwise_affine=False), (torch.randn(2, 4, 6),)),
    ("group_norm", nn.GroupNorm(2, 4), (torch.randn(1, 4, 3, 3),)),
    ("div_tensor", Fn(lambda s, a, b: a / b), (torch.randn(2, 8), torch.rand(2, 8) + 0.5)),
    ("div_scalar", Fn(lambda s, a: a / 3.0), (torch.randn(2, 8),)),
    ("sdpa", _sdpa(), _qkv()),
    ("sdpa_causal", _sdpa(is_causal=True), _qkv()),
    ("sdpa_scale", _sdpa(scale=0.3), _qkv(length=6, e=8)),
    ("sdpa_gqa_causal", _sdpa(is_causal=True, enable_gqa=True), _qkv(h=4, hkv=2)),
    ("sdpa_bool_mask", Fn(lambda s, q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=s.m), m=_MASK),
     _qkv()),
    ("sdpa_neg_inf_bias", Fn(lambda s, q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=s.m),
                             m=_NEG_INF_BIAS), _qkv()),
    ("sdpa_bool_mask_empty_row", Fn(lambda s, q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=s.m),
                                    m=_MASK_EMPTY_ROW), _qkv()),
    ("sdpa_neg_inf_bias_empty_row", Fn(lambda s, q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=s.m), m=_NEG_INF_BIAS_EMPTY_ROW), _qkv()),
    # an HF-style causal mask built in forward from factory ops: folded into a constant before annotation
    ("sdpa_mask_from_factories", Fn(lambda s, q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=torch.arange(8)[:, None] >= torch.arange(8)[None, :])), _qkv()),
]


@pytest.mark.parametrize("name,module,inputs", CASES, ids=[c[0] for c in CASES])
def test_transformer_op_int_within_one_lsb(name, module, inputs):
    _, report, lsb, converted = check_int(module, inputs, max_lsb=1, case=name)
    assert len(report.delegates) == 1, report
    targets = {str(n.target) for n in converted.graph.nodes if n.op == "call_function"}
    assert not any(op in t for t in targets for op in ("softmax", "layer_norm", "group_norm", "div",
                                                       "scaled_dot_product", "arange", "tril")), targets
    print(f"{name}: {lsb:.0f} LSB")


_GQA_MASK = torch.rand(1, 4, 8, 8) > 0.3
_GQA_MASK[..., 0] = True
FLOAT_ONLY_CASES = [  # mask layouts of grouped-query attention, and masks given at run time
    ("gqa_per_head_bool_mask", Fn(lambda s, q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=s.m, enable_gqa=True), m=_GQA_MASK), _qkv(h=4, hkv=2)),
    ("gqa_finite_bias", Fn(lambda s, q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=s.m, enable_gqa=True), m=torch.randn(8, 8)), _qkv(h=4, hkv=2)),
    ("runtime_float_mask", Fn(lambda s, q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)),
     (*_qkv(), torch.randn(8, 8))),
    ("runtime_bool_mask", Fn(lambda s, q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)),
     (*_qkv(), _MASK)),
    ("runtime_bool_mask_empty_row", Fn(lambda s, q, k, v, m: F.scaled_dot_product_attention(
        q, k, v, attn_mask=m)), (*_qkv(), _MASK_EMPTY_ROW)),
    ("var_mean", Fn(lambda s, x: torch.var_mean(x, dim=1, correction=1)), (torch.randn(3, 7, 2),)),
]


@pytest.mark.parametrize("name,module,inputs", CASES + FLOAT_ONLY_CASES,
                         ids=[c[0] for c in CASES + FLOAT_ONLY_CASES])
def test_decomposition_is_exact_in_float(name, module, inputs):
    """Before quantization the rewritten graph computes what the model does (to float rounding)."""
    gm = _traced(module, inputs)
    prepare_for_int(gm)
    assert not _targets(gm) & DECOMPOSED, _targets(gm)
    with torch.no_grad():
        expected, actual = module(*inputs), gm(*inputs)
    for a, e in zip(torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected),
                    strict=True):
        assert torch.allclose(a, e, atol=1e-5, rtol=1e-5), (a - e).abs().max()


def _traced(module, inputs):
    return torch.export.export(module.eval(), inputs).module()


def _targets(gm):
    return {n.target for n in gm.graph.nodes if n.op == "call_function"}


def test_fp_spec_keeps_attention_whole():
    """The FP path is unaffected: an FP-only quantizer leaves SDPA/softmax whole (the FP lowering keeps
    SDPA as one op)."""
    module, inputs = _sdpa(is_causal=True), _qkv()
    gm = TOSAQuantizer(TosaCompileSpec("TOSA-1.0+FP")).transform_for_annotation(_traced(module, inputs))
    assert aten.scaled_dot_product_attention.default in _targets(gm)
    quantizer = TOSAQuantizer(TosaCompileSpec("TOSA-1.0+INT")).set_global(get_symmetric_quantization_config())
    gm = quantizer.transform_for_annotation(_traced(module, inputs))
    assert aten.scaled_dot_product_attention.default not in _targets(gm)
    assert {aten.bmm.default, aten.amax.default, aten.exp.default, aten.reciprocal.default} <= _targets(gm)


class _TwoSoftmax(nn.Module):
    def __init__(self):
        super().__init__()
        self.float_part = Fn(lambda s, x: F.softmax(x, -1))
        self.int_part = Fn(lambda s, x: F.softmax(x, -1))

    def forward(self, x):
        return self.int_part(x) + self.float_part(x)


def test_module_left_in_float_is_not_decomposed():
    """Decomposition follows the per-module configs: a submodule set to None keeps its softmax whole."""
    x = torch.randn(2, 8)
    quantizer = (TOSAQuantizer(TosaCompileSpec("TOSA-1.0+INT")).set_global(get_symmetric_quantization_config())
                 .set_module_name("float_part", None))
    converted = quantize(_TwoSoftmax(), (x,), quantizer=quantizer)
    softmaxes = [n for n in converted.graph.nodes if n.target is aten.softmax.int]
    assert len(softmaxes) == 1
    assert "float_part" in str(softmaxes[0].meta["nn_module_stack"])


def test_decomposed_nodes_keep_module_metadata():
    gm = _traced(nn.Sequential(nn.LayerNorm(8)), (torch.randn(2, 8),))
    assert decompose_for_int(gm) == 1
    compute = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert compute and all("0" in str(n.meta["nn_module_stack"]) for n in compute)
    assert aten.rsqrt.default in _targets(gm) and aten.layer_norm.default not in _targets(gm)


class _Folding(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4))
        self.register_buffer("table", torch.randn(8, 4))
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x):
        self.count.add_(1)
        mask = torch.ones(4, 4).tril()[:2]  # factory ops: folded
        return x * self.w.reshape(1, 4) + self.table[:2] * self.count + mask


def test_constant_folding_keeps_parameters_and_mutated_buffers():
    """Factory ops and reads of constant buffers fold; a parameter (QAT may train it) and a buffer the
    graph mutates are not constants."""
    gm = _traced(_Folding(), (torch.randn(2, 4),))
    assert fold_constants(gm) == 2  # the mask and the slice of `table`
    targets = _targets(gm)
    assert not {aten.ones.default, aten.tril.default, aten.slice.Tensor} & targets, targets
    assert {aten.reshape.default, aten.add_.Tensor} <= targets  # the parameter's view, the mutation
    attrs = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
    assert "w" in attrs and "count" in attrs and "table" not in attrs
    reference = _Folding()
    reference.load_state_dict({k: v for k, v in gm.state_dict().items() if not k.startswith("_arm")})
    x = torch.randn(2, 4)
    assert torch.equal(gm(x), reference(x))


def _buckets_from_positions(s, x):
    """T5's relative position buckets: an in-place add (`buckets += ...`) on a temporary built from
    `arange` only, then an embedding lookup."""
    relative = torch.arange(6)[None, :] - torch.arange(6)[:, None]
    buckets = (relative > 0).to(torch.int64) * 6
    buckets += relative.abs()
    return x + s.bias(buckets).sum(-1)


def test_in_place_write_on_a_folded_temporary_is_not_repeated_per_call():
    """Folding the temporary that `add_` writes into a shared buffer made every call add again (the T5
    encoder's buckets ran past its bias table on the second call: an IndexError in the quantized
    model); the write folds with its temporary instead, and the model gives the same answer each call."""
    module = Fn(_buckets_from_positions, bias=nn.Embedding(12, 3))
    x = torch.randn(6, 6)
    gm = torch.export.export(module, (x,)).module()
    fold_constants(gm)
    first, second = gm(x), gm(x)
    assert torch.equal(first, module(x)) and torch.equal(second, first)
    assert aten.add_.Tensor not in _targets(gm)  # folded with the temporary it writes
    converted = quantize(module, (x,))
    assert torch.equal(converted(x), converted(x))


def _constant_written_through_a_view(s, x):
    m = torch.zeros(4, 4)
    m[:2] = 3.0  # slice (a view of m) + fill_
    return x + m


def _runtime_value_written_into_a_temporary(s, x):
    m = torch.zeros(4, 4)
    m[:2] = x[:2]
    return m + 1


@pytest.mark.parametrize("fn", [_constant_written_through_a_view, _runtime_value_written_into_a_temporary])
def test_writes_through_views_reach_every_reader_of_a_folded_value(fn):
    """Both were silently wrong: the folder evaluated `x + m` from the zeros before the write through
    the slice view (the quantized model computed x + 0), and folded `m + 1` to ones although a run-time
    value is written into m first (and the zeros became a buffer written on every call)."""
    module, x = Fn(fn), torch.randn(4, 4)
    gm = torch.export.export(module, (x,)).module()
    fold_constants(gm)
    assert torch.equal(gm(x), module(x)) and torch.equal(gm(x), module(x))
    # the quantized model and its INT lowering keep the write too (PT2E observed m before it; see
    # `const_fold.read_through_aliases`); 8-bit steps are ~0.03 here, the write is 3
    converted = quantize(module, (x,))
    edge = lower(converted, (x,), TOSAPartitioner(TosaCompileSpec("TOSA-1.0+INT")))
    with torch.no_grad():
        for actual in (converted(x), run_on_reference_model(edge, x)):
            assert compare_outputs(actual, module(x)).within(0.1)


def _shifted_window_attention(s, x):
    """torchvision Swin-T's shifted-window mask: zeros made with `x.new_zeros`, filled region by region
    through slice views, then a -100 / 0 additive mask from pairwise differences."""
    mask = x.new_zeros((4, 4))
    count = 0
    for h in ((0, -2), (-2, -1), (-1, None)):
        for w in ((0, -2), (-2, -1), (-1, None)):
            mask[h[0]:h[1], w[0]:w[1]] = count
            count += 1
    labels = mask.view(16)
    diff = labels.unsqueeze(0) - labels.unsqueeze(1)
    diff = diff.masked_fill(diff != 0, -100.0).masked_fill(diff == 0, 0.0)
    return torch.softmax(s.q(x) @ s.k(x).transpose(-1, -2) + diff, -1) @ x


def test_shifted_window_mask_folds_into_one_int_partition():
    """The mask depends only on shapes (`new_zeros` reads only its argument's shape), so it folds to a
    constant; before, its float `full`/`where` stayed on the CPU and split Swin-T into 2 partitions."""
    torch.manual_seed(0)
    module = Fn(_shifted_window_attention, q=nn.Linear(8, 8), k=nn.Linear(8, 8))
    _, report, _, _ = check_int(module, (torch.randn(16, 8),), max_lsb=1, case="shifted_window")
    assert len(report.delegates) == 1, report


def _position_bias_under_a_mask(s, q, k, v):
    """T5's attention: a learned bias (a parameter's rows) under a constant mask filled with finfo.min,
    passed to SDPA as its additive mask."""
    keep = torch.ones(8, 8, dtype=torch.bool).tril()
    keep[:, 0] = True
    bias = s.bias.unsqueeze(0).unsqueeze(0)
    mask = torch.where(keep, bias, torch.finfo(torch.float32).min).contiguous()
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0)


def test_runtime_bias_under_a_finfo_min_mask_within_one_lsb():
    """Quantized as one tensor, where(keep, bias, finfo.min) has a scale of ~1e36: every bias entry
    became 0 (the fake-quant model lost the bias; in the T5 encoder the add into the scores then failed
    to lower, a LoweringError out of to_edge_transform_and_lower). Split into a keep mask and a finite
    bias, the quantized model keeps the bias (within 5 % of eager) and lowers within 1 LSB of it."""
    torch.manual_seed(0)
    module = Fn(_position_bias_under_a_mask, bias=nn.Parameter(torch.randn(8, 8) * 3))
    inputs = _qkv()
    _, report, lsb, converted = check_int(module, inputs, max_lsb=1, case="masked_bias")
    assert len(report.delegates) == 1, report
    with torch.no_grad():
        eager, fake = module(*inputs), converted(*inputs)
    assert torch.isfinite(fake).all() and (fake - eager).abs().max() <= 0.05 * eager.abs().max()
