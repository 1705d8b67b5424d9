"""torch.cond stays on the CPU for Ethos-U with vela's reason (vela compiles no TOSA control flow), not
the core's advice to add "+cf" to a spec the Ethos-U target fixes."""

import torch
from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

from arm_ethosu import EthosUCompileSpec, EthosUPartitioner
from arm_tosa_core import partition_report
from arm_tosa_core.op_tables import CONTROL_FLOW


def test_cond_stays_on_the_cpu_with_the_vela_reason():
    case = CONTROL_FLOW[1]
    edge = to_edge_transform_and_lower(
        torch.export.export(case.module(), case.inputs()),
        partitioner=[EthosUPartitioner(EthosUCompileSpec("ethos-u55-128"))],
        compile_config=EdgeCompileConfig(_check_ir_validity=False))
    reasons = [c.reason for c in partition_report(edge).cpu_nodes if c.target.endswith("cond")]
    assert reasons and all("vela compiles no TOSA control flow" in r for r in reasons), partition_report(edge)
