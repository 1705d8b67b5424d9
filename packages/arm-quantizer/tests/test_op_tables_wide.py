"""Op tables (arm_tosa_core.op_tables) of issue 10's "missing or FP-only" families: elementwise math,
rounding division, activations, comparisons/selection, reductions/norms, convolution, resize, attention
and pools. One lowering per family and profile (`FamilyModule`): FP within 1e-4 of each output's largest
magnitude of eager on the TOSA reference model; INT within 1 LSB of each output's scale of the PT2E
fake-quantized module (integer and bool outputs exact); every graph valid for its profile under
tosa-opt's strict validation. The cases that stay on the CPU do so with their reason (a TOSA limit).
"""

from collections import Counter

import pytest
import torch
from quant_harness import quantize

from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report, run_on_reference_model
from arm_tosa_core.op_tables import TABLES, FamilyModule, family_inputs
from arm_tosa_core.profile_check import validate_tosa
from arm_tosa_core.testing import lower

FAMILIES = ["elementwise_math", "division", "activations", "compare_select", "reduce_norm", "convolution",
            "resize", "attention", "pools"]
SPECS = {"FP": "TOSA-1.0+FP", "INT": "TOSA-1.0+INT"}

# (case, profile) -> words its reason must contain. Division by a tensor: TOSA INT has no division (a
# divisor that is a model input is not even quantized: its division is left float); prod: a quantized
# product has no fixed output scale, and REDUCE_PRODUCT is float only.
NO_DIVISION, NOT_QUANTIZED = "TOSA INT has no division", "has dtype torch.float32, not legal for TOSA-1.0+INT"
ON_THE_CPU = {
    ("division-div_floor_tensor", "INT"): NO_DIVISION,
    ("division-floordiv_operator", "INT"): NO_DIVISION,
    ("division-div_trunc_tensor", "INT"): NOT_QUANTIZED,
    ("division-remainder_tensor", "INT"): NOT_QUANTIZED,
    ("division-fmod", "INT"): NOT_QUANTIZED,
    ("reduce_norm-prod_all", "INT"): "prod is lowered only for the FP profile",
    ("reduce_norm-prod_dim_keepdim", "INT"): "prod is lowered only for the FP profile",
}


def _cases(family: str, profile: str, on_the_cpu: bool = False):
    return [c for c in TABLES[family] if profile in c.profiles and ((c.id, profile) in ON_THE_CPU) == on_the_cpu]


def _labels(cases) -> list[str]:
    """The case of each output of `FamilyModule(cases)`, in order."""
    labels = []
    for c in cases:
        with torch.no_grad():
            out = c.module()(*c.inputs())
        labels += [c.id] * (len(out) if isinstance(out, tuple) else 1)
    return labels


def _output_lsbs(converted) -> list[float]:
    """Scale of each output's dequantize (0 for an integer or bool output: those must be exact)."""
    out = [n for n in converted.graph.nodes if n.op == "output"][0]
    lsbs = []
    for node in torch.utils._pytree.tree_leaves(out.args[0]):
        lsbs.append(float(node.args[1]) if "dequantize" in str(node.target) else 0.0)
    return lsbs


@pytest.mark.parametrize("profile", ["FP", "INT"])
@pytest.mark.parametrize("family", FAMILIES)
def test_family_lowers_whole_and_matches(family, profile, tmp_path):
    cases = _cases(family, profile)
    module, inputs = FamilyModule(cases), family_inputs(cases)
    if profile == "INT":
        module = quantize(module, inputs)
    with torch.no_grad():
        expected = module(*inputs)
    spec = TosaCompileSpec(SPECS[profile]).dump_intermediate_artifacts_to(tmp_path)
    edge = lower(module, inputs, TOSAPartitioner(spec))
    report = partition_report(edge)
    assert not [c for c in report.cpu_nodes if "quantize" not in c.target], report
    got = run_on_reference_model(edge, *inputs)
    tolerances = _output_lsbs(module) if profile == "INT" else [None] * len(expected)
    for label, out, want, lsb in zip(_labels(cases), got, expected, tolerances, strict=True):
        err = (out.double() - want.double()).abs().max().item() if want.numel() else 0.0
        bound = lsb * 1.0001 if lsb is not None else 1e-4 * max(want.double().abs().max().item(), 1e-6)
        assert err <= bound, f"{label} ({profile}): max error {err:.3g} > {bound:.3g}\n{report}"
    graphs = sorted(tmp_path.glob("*.tosa"))
    assert graphs and not [p for g in graphs for p in validate_tosa(g, SPECS[profile])]


@pytest.mark.parametrize("profile", ["INT"])
def test_cases_stay_on_the_cpu_with_their_reason(profile):
    """Every listed case in one program: each case's op stays on the CPU, saying why."""
    cases = [c for f in FAMILIES for c in _cases(f, profile, on_the_cpu=True)]
    module, inputs = FamilyModule(cases), family_inputs(cases)
    if profile == "INT":
        module = quantize(module, inputs)
    report = partition_report(lower(module, inputs, TOSAPartitioner(TosaCompileSpec(SPECS[profile]))))
    reasons = [c.reason for c in report.cpu_nodes if "quantize" not in c.target]
    wanted = Counter(ON_THE_CPU[(c.id, profile)] for c in cases)
    for words, n in wanted.items():  # one op per case: as many nodes with the reason as cases
        assert sum(words in r for r in reasons) == n, (words, report)
