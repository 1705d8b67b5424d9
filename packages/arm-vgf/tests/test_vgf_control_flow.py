"""torch.cond / torch.while_loop with a "+cf" VGF spec stay on the CPU with the model converter's reason,
and that reason is real: the converter refuses the COND_IF graph the core lowers for the same spec."""

import pytest
import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

from arm_tosa_core import TosaCompileSpec, TOSAPartitioner, partition_report
from arm_tosa_core.op_tables import CONTROL_FLOW
from arm_vgf import VgfCompileSpec, VgfPartitioner
from arm_vgf.converter import VgfConversionError, convert_tosa_to_vgf


def _lower(case, partitioner):
    return to_edge_transform_and_lower(torch.export.export(case.module(), case.inputs()),
                                       partitioner=[partitioner],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))


def test_cond_stays_on_the_cpu_with_the_converter_reason():
    edge = _lower(CONTROL_FLOW[1], VgfPartitioner(VgfCompileSpec("TOSA-1.0+FP+cf")))
    reasons = [c.reason for c in partition_report(edge).cpu_nodes if c.target == "cond"]
    assert reasons and "model converter (0.11.0) does not convert TOSA control flow" in reasons[0]


def test_the_converter_refuses_cond_if(tmp_path):
    spec = TosaCompileSpec("TOSA-1.0+FP+cf").dump_intermediate_artifacts_to(tmp_path / "tosa")
    _lower(CONTROL_FLOW[1], TOSAPartitioner(spec))
    (graph,) = sorted((tmp_path / "tosa").glob("*.tosa"))
    with pytest.raises(VgfConversionError, match="tosa.cond_if"):
        convert_tosa_to_vgf(graph.read_bytes(), tmp_path / "vgf")
