"""torch.cond -> COND_IF and torch.while_loop -> WHILE_LOOP under "TOSA-1.0+FP+cf": fully delegated, both
branches within 1e-4 of eager on the TOSA reference model, every graph valid for tosa-opt's strict check
with the controlflow extension; a HOP whose sub-graph has a node we cannot lower stays on the CPU with
that node's reason. Also the rank-0 values that cond predicates are made of (a scalar constant beside a
rank-0 tensor, a rank-0 delegate output)."""

import pytest
import torch

from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report, run_on_reference_model
from arm_tosa_core.op_tables import CONTROL_FLOW, FamilyModule, family_inputs
from arm_tosa_core.profile_check import validate_tosa
from arm_tosa_core.testing import FnModule, check_lowering, lower, max_relative_error
from arm_tosa_core.tosa_inspect import tosa_op_counts


def _cond_tuple(s, x, y):
    """Two outputs, a buffer used inside one branch, a predicate from two inputs."""
    return torch.cond(x.amax() > y.amin(), lambda a, b: (a + s.w, a * b), lambda a, b: (a - b, b * 3.0), (x, y))


_TABLE = {c.name: c for c in CONTROL_FLOW}
FP_CASES = {  # name -> (module, inputs whose predicate is true, inputs whose predicate is false)
    "cond_tuple": (FnModule(_cond_tuple, w=torch.arange(4.0)), (torch.ones(4), torch.zeros(4)),
                   (-torch.ones(4), torch.ones(4))),
    "cond_nested": (_TABLE["cond_nested"].module(), (torch.full((2, 3), 0.9),), (torch.full((2, 3), 0.2),)),
    "while_float_state": (_TABLE["while_float_state"].module(), (torch.full((3,), 1.5),),
                          (torch.full((3,), 30.0),)),
}


def _graphs(edge) -> list[bytes]:
    return [bytes(m.processed_bytes) for _, m in edge.exported_program().graph_module.named_modules()
            if hasattr(m, "processed_bytes")]


def _check_runs(edge, module, inputs):
    with torch.no_grad():
        err, mag = max_relative_error(run_on_reference_model(edge, *inputs), module(*inputs))
    assert err <= 1e-4 * max(mag, 1e-6), (err, mag)


def test_table_cases_lower_fully_and_match_eager(tmp_path):
    """The op table's control-flow cases (one lowering), in memory and as a .pte: the int64 while_loop
    counter needs the INT profile's int32 comparison, so the spec is FP+INT+cf (float values stay float)."""
    cases = list(CONTROL_FLOW)
    spec = TosaCompileSpec("TOSA-1.0+FP+INT+cf").dump_intermediate_artifacts_to(tmp_path)
    check = check_lowering(FamilyModule(cases), family_inputs(cases), partitioner=TOSAPartitioner(spec),
                           case="control_flow")
    counts = tosa_op_counts(_graphs(check.edge)[0])
    assert counts.get("COND_IF") == 4 and counts.get("WHILE_LOOP") == 2, counts  # nested: 2 COND_IF
    graphs = sorted(tmp_path.glob("*.tosa"))
    assert graphs and not [p for g in graphs for p in validate_tosa(g, "TOSA-1.0+FP+INT+cf")]
    # the .pte runs too: executorch.runtime with runtime_cpp's TOSABackend (the reference model library)
    err, mag = max_relative_error(run_on_reference_model(check.edge.to_executorch(), *family_inputs(cases)),
                                  check.outputs)
    assert err <= 1e-4 * mag, (err, mag)


@pytest.mark.parametrize("name", sorted(FP_CASES))
def test_both_branches_match_eager(name):
    module, taken, not_taken = FP_CASES[name]
    edge = lower(module, taken, spec="TOSA-1.0+FP+cf")
    report = partition_report(edge)
    assert not report.cpu_nodes, report
    for inputs in (taken, not_taken):
        _check_runs(edge, module, inputs)
    problems = [p for g in _graphs(edge) for p in validate_tosa(g, "TOSA-1.0+FP+cf")]
    assert not problems, problems


def test_inner_node_we_cannot_lower_keeps_the_hop_on_the_cpu_with_its_reason():
    """Under FP only, the int64 loop counter's comparison needs the INT profile."""
    case = CONTROL_FLOW[2]
    module, inputs = case.module(), case.inputs()
    edge = lower(module, inputs, spec="TOSA-1.0+FP+cf")
    reasons = {c.target: c.reason for c in partition_report(edge).cpu_nodes}
    reason = next(r for t, r in reasons.items() if "while_loop" in t)
    assert "node aten_lt_scalar of its loop condition cannot be lowered" in reason
    assert "needs the INT profile" in reason
    _check_runs(edge, module, inputs)


@pytest.mark.parametrize("name,fn,shape", [
    ("squeeze_all_ones_plus_scalar", lambda s, x: x.squeeze() + 1, (1, 1, 1)),
    ("sum_greater_than_scalar", lambda s, x: (x.sum() > 0).float() * x.sum(), (2, 3)),
    ("rank0_and_full_rank_outputs", lambda s, x: (x.mean() * 2, x - 1), (3,)),
])
def test_rank0_values_keep_rank0(name, fn, shape):
    """A scalar constant next to a rank-0 tensor is rank 0 in the graph (it was shape [1], which the
    reference model rejects), and a rank-0 delegate output comes back with shape ()."""
    module, inputs = FnModule(fn), (torch.randn(shape, generator=torch.Generator().manual_seed(1)),)
    check = check_lowering(module, inputs, case=name)
    first = check.outputs[0] if isinstance(check.outputs, tuple) else check.outputs
    assert first.shape == ()


class _ConvCondConv(torch.nn.Module):
    """cond between convolutions: its operands leave the NHWC layout, its results go back to it."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.c1, self.c2 = torch.nn.Conv2d(3, 4, 3, bias=False), torch.nn.Conv2d(4, 2, 1)

    def forward(self, x):
        y = self.c1(x)  # no bias: negating x negates the predicate's mean, so -x takes the other branch
        z = torch.cond(y.mean() > 0, lambda a, b: (a * 2 + b, a.clone()), lambda a, b: (a - b, b.clone()), (y, y))
        return self.c2(z[0] + z[1])


def test_cond_between_convolutions_in_either_layout():
    module, x = _ConvCondConv().eval(), torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    edge = lower(module, (x,), spec="TOSA-1.0+FP+cf")
    assert not partition_report(edge).cpu_nodes, partition_report(edge)
    assert (module.c1(x).mean() > 0) != (module.c1(-x).mean() > 0)
    for inputs in ((x,), (-x,)):
        _check_runs(edge, module, inputs)


class _HardswishLoop(torch.nn.Module):
    """Only a while_loop (and a preserved op, hardswish) at the top level; the body holds `aten.sum.default`,
    which exir must decompose, and hardswish again."""

    def forward(self, n, x):
        from torch._higher_order_ops.while_loop import while_loop

        body = lambda n, y: (n + 1.0, torch.nn.functional.hardswish(y - y.sum() * 0.1))  # noqa: E731
        return while_loop(lambda n, y: n < 3.0, body, (n, torch.nn.functional.hardswish(x)))[1]


@pytest.mark.parametrize("spec", ["TOSA-1.0+FP", "TOSA-1.0+FP+cf"])
def test_while_loop_passes_exirs_default_core_aten_check(spec):
    """exir's default EdgeCompileConfig (IR validity checked): the loop on the CPU (no "+cf") or
    delegated, the result equals eager."""
    from executorch.exir import to_edge_transform_and_lower

    module, inputs = _HardswishLoop(), (torch.zeros(()), torch.rand(2, 3))
    edge = to_edge_transform_and_lower(torch.export.export(module, inputs),
                                       partitioner=[TOSAPartitioner(TosaCompileSpec(spec))])
    assert [c.target for c in partition_report(edge).cpu_nodes] == ([] if "+cf" in spec else ["while_loop"])
    _check_runs(edge, module, inputs)
