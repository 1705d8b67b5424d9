"""Conv -> batch norm folding before exir decomposes, and the ops the partitioner keeps whole."""

from __future__ import annotations

import torch
from torch import nn

from arm_tosa_core import TosaCompileSpec, TOSAPartitioner
from arm_tosa_core.batch_norm_folding import fold_conv_batch_norm
from arm_tosa_core.testing import check_lowering
from arm_tosa_core.tosa_inspect import tosa_op_counts

aten = torch.ops.aten


def _conv_bn(conv_bias: bool, affine: bool, transposed: bool = False) -> nn.Module:
    conv = (nn.ConvTranspose2d(3, 4, 3, stride=2, bias=conv_bias) if transposed
            else nn.Conv2d(3, 4, 3, padding=1, bias=conv_bias))
    bn = nn.BatchNorm2d(4, affine=affine)
    torch.manual_seed(1)
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        if affine:
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-1, 1)
    return nn.Sequential(conv, bn, nn.ReLU()).eval()


def _lowered_op_counts(model: nn.Module, x: torch.Tensor, tmp_path, case: str):
    """Lower on the reference model (checked against eager) and count the TOSA ops emitted."""
    spec = TosaCompileSpec("TOSA-1.0+FP").dump_intermediate_artifacts_to(str(tmp_path))
    check_lowering(model, (x,), case=case, partitioner=TOSAPartitioner(spec))
    (tosa_file,) = tmp_path.glob("*.tosa")
    return tosa_op_counts(tosa_file)


def _targets(ep) -> list:
    return [n.target for n in ep.graph.nodes if n.op == "call_function"]


def test_folding_removes_batch_norm_and_keeps_the_users_program():
    model, x = _conv_bn(conv_bias=False, affine=True), torch.randn(1, 3, 8, 8)
    ep = torch.export.export(model, (x,))
    before_nodes = [n.format_node() for n in ep.graph.nodes]
    before_state = {k: v.clone() for k, v in ep.state_dict.items()}

    folded = fold_conv_batch_norm(ep)

    assert aten.batch_norm.default not in _targets(folded)
    assert aten.batch_norm.default in _targets(ep)  # the given program is untouched
    assert [n.format_node() for n in ep.graph.nodes] == before_nodes
    assert all(torch.equal(before_state[k], v) for k, v in ep.state_dict.items())
    # gamma, running mean and var are gone from the folded program (nothing to serialize)
    assert not any(k.endswith(("running_mean", "running_var", "1.weight")) for k in folded.state_dict)
    expected = model(x)
    got = folded.module()(x)
    assert (got - expected).abs().max() <= 1e-5 * expected.abs().max()


def test_conv_bias_holds_the_folded_bias():
    model, x = _conv_bn(conv_bias=True, affine=True), torch.randn(2, 3, 6, 6)
    folded = fold_conv_batch_norm(torch.export.export(model, (x,)))
    assert aten.batch_norm.default not in _targets(folded)
    expected = model(x)
    assert (folded.module()(x) - expected).abs().max() <= 1e-5 * expected.abs().max()


def test_without_any_bias_to_hold_the_shift_the_program_is_returned_as_is(tmp_path):
    model, x = _conv_bn(conv_bias=False, affine=False), torch.randn(1, 3, 8, 8)
    ep = torch.export.export(model, (x,))
    assert fold_conv_batch_norm(ep) is ep
    # the lowering folds it instead: one CONV2D, no MUL/ADD left for the batch norm
    counts = _lowered_op_counts(model, x, tmp_path, "conv+bn without biases")
    assert counts["CONV2D"] == 1 and counts["MUL"] == 0


def test_transposed_conv_batch_norm_folds_on_the_output_channel_axis():
    model, x = _conv_bn(conv_bias=True, affine=True, transposed=True), torch.randn(1, 3, 5, 5)
    folded = fold_conv_batch_norm(torch.export.export(model, (x,)))
    assert aten.batch_norm.default not in _targets(folded)
    expected = model(x)
    assert (folded.module()(x) - expected).abs().max() <= 1e-5 * expected.abs().max()


def test_lowered_conv_bn_matches_eager_with_one_conv2d(tmp_path):
    counts = _lowered_op_counts(_conv_bn(conv_bias=False, affine=True), torch.randn(1, 3, 8, 8), tmp_path,
                                "conv+bn folded before decomposition")
    assert counts["CONV2D"] == 1 and counts["MUL"] == 0


def test_partitioner_keeps_supported_convolutions_whole_without_a_per_node_filter():
    model, x = _conv_bn(conv_bias=False, affine=True), torch.randn(1, 3, 8, 8)
    ep = torch.export.export(model, (x,)).run_decompositions({})
    ops, per_node_check = TOSAPartitioner(TosaCompileSpec("TOSA-1.0+FP")).ops_to_not_decompose(ep)
    # a per-node filter makes exir re-trace the program three times instead of once
    assert per_node_check is None
    assert aten.conv2d.default in ops


def test_an_op_with_an_unsupported_node_is_not_kept_whole():
    class TwoConvs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ok = nn.Conv2d(3, 3, 1)
            self.conv3d = nn.Conv3d(3, 3, 1, groups=3)  # grouped 3-d: not lowered

        def forward(self, x):
            return self.conv3d(self.ok(x).unsqueeze(2))

    ep = torch.export.export(TwoConvs().eval(), (torch.randn(1, 3, 4, 4),)).run_decompositions({})
    ops, _ = TOSAPartitioner(TosaCompileSpec("TOSA-1.0+FP")).ops_to_not_decompose(ep)
    assert aten.conv3d.default not in ops and aten.conv2d.default in ops
