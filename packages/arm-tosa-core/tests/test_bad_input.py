"""Bad input gets a clear error naming the problem and the fix; unsupported dtypes stay on the CPU."""

import subprocess
import sys

import pytest
import torch
from torch import nn

from arm_tosa_core import (
    TosaCompileSpec,
    TOSAPartitioner,
    TosaSpecification,
    partition_report,
    run_on_reference_model,
)
from arm_tosa_core.testing import check_lowering


@pytest.mark.parametrize("text", ["TOSA-1.0", "TOSA-0.80+MI", "tosa-1.0+fp", "TOSA-1.0+FP+bogus", "FP"])
def test_unknown_spec_strings_list_the_valid_forms(text):
    with pytest.raises(ValueError, match='valid forms: "TOSA-1.0\\+FP"'):
        TosaSpecification.create_from_string(text)


def test_spec_strings_round_trip():
    spec = TosaSpecification.create_from_string("TOSA-1.0+INT+int16")
    assert spec.support_integer() and not spec.support_float() and spec.support_extension("int16")
    assert str(spec) == "TOSA-1.0+INT+int16"
    assert TosaCompileSpec("TOSA-1.0+FP").get_output_format() == "tosa"


def test_compile_spec_chains_and_rejects_unknown_debug_mode(tmp_path):
    spec = TosaCompileSpec("TOSA-1.0+FP").dump_intermediate_artifacts_to(tmp_path).dump_debug_info("json")
    assert spec.get_intermediate_path() == str(tmp_path)
    with pytest.raises(ValueError, match="unknown debug mode"):
        spec.dump_debug_info("xml")


def test_partitioner_needs_a_compile_spec():
    with pytest.raises(TypeError, match="needs a TosaCompileSpec"):
        TOSAPartitioner("TOSA-1.0+FP")


def test_non_exported_module_is_a_clear_error():
    with pytest.raises(TypeError, match="run_on_reference_model takes"):
        run_on_reference_model(nn.Linear(2, 2), torch.randn(1, 2))
    with pytest.raises(TypeError, match="partition_report takes a lowered program"):
        partition_report(nn.Linear(2, 2))


def test_complex_dtype_stays_on_the_cpu_with_a_reason():
    class Complexish(nn.Module):
        def forward(self, x):
            y = torch.view_as_complex(x.reshape(2, 2, 2)) * 2
            return torch.view_as_real(y).reshape(2, 4) + 1

    result = check_lowering(Complexish(), (torch.randn(2, 4),), expect_full=False)
    reasons = " ".join(c.reason for c in result.report.cpu_nodes)
    assert "complex" in reasons, result.report


def test_debug_map_links_tosa_ops_to_torch_nodes(tmp_path):
    import json

    spec = TosaCompileSpec("TOSA-1.0+FP").dump_intermediate_artifacts_to(tmp_path).dump_debug_info()
    check_lowering(nn.Sequential(nn.Conv2d(2, 3, 1), nn.ReLU()), (torch.randn(1, 2, 4, 4),),
                   partitioner=TOSAPartitioner(spec))
    debug = json.loads(next(tmp_path.glob("*.debug.json")).read_text())
    ops = {o["op"]: o for o in debug["operators"]}
    assert "conv2d" in ops["CONV2D"]["node"] and ops["CONV2D"]["stack_trace"]
    assert (tmp_path / "partition_0.tosa").read_bytes()[4:8] == b"TOSA"


def test_missing_tosa_tools_names_the_install_command():
    code = ("import sys; sys.modules['tosa_serializer'] = None\n"
            "try:\n    import arm_tosa_core.builder\nexcept ImportError as e:\n    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert "MissingToolError" in out and "tosa-tools==2026.8.0" in out
