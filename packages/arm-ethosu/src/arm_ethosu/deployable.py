"""The .pte an embedded engineer flashes, and its host-runnable twin, from one lowered program.

An Ethos-U payload as lowered carries, after the bin stream's end marker, the partition's TOSA INT
graph ("tosa_graph": what the host runs) and vela's numbers ("vela_report"). The firmware never
reads past the end marker, so the graph is dead weight on a device (MobileNetV2 on U55-128: about
half the file). `pte_variants` writes both forms from one lowering:

- deployable: vela's blocks + the small report, no host graph;
- host: the same plus the host graph (what `run_on_reference_model` and `runtime_cpp` execute).

Both are reproducible: the compile specs stored in the .pte lose `intermediate_path` (a folder on
the compiling machine) and the report loses vela's wall time, so the same model and flags give
byte-identical files wherever the artifacts were written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from executorch.exir import ExecutorchBackendConfig
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.lowered_backend_module import executorch_call_delegate

from .binstream import build_binstream, parse_binstream
from .program_report import BACKEND_ID, TOSA_BLOCK

_ARM_SPEC = "arm_compile_spec"


@dataclass(frozen=True)
class PteVariants:
    """The two .pte forms of one lowered program (bytes) and what the host graphs add."""

    deployable: bytes
    host: bytes

    @property
    def host_graph_bytes(self) -> int:
        """How many bytes the host graphs add to the deployable .pte."""
        return len(self.host) - len(self.deployable)


def _portable_specs(specs, host_graph: bool | None = None) -> list[CompileSpec]:
    """The compile specs (host paths never enter them: `TosaCompileSpec.to_list` keeps those in `.host`);
    for an Ethos-U delegate (`host_graph` given) the stored host-graph switch says what the payload
    holds, as the same spec lowered directly would."""
    out = []
    for spec in specs:
        if spec.key == _ARM_SPEC:
            settings = json.loads(bytes(spec.value))
            if host_graph is not None and "ethosu" in settings:
                settings["ethosu"]["tosa_graph"] = host_graph
            spec = CompileSpec(_ARM_SPEC, json.dumps(settings, sort_keys=True).encode())
        out.append(spec)
    return out


def _payload(processed: bytes, host_graph: bool) -> bytes:
    stream = parse_binstream(processed)
    extra = dict(stream.extra)
    if not host_graph:
        extra.pop(TOSA_BLOCK, None)
    return build_binstream(stream, extra)


def _lowered_modules(edge) -> list:
    gm = edge.exported_program().graph_module
    return [getattr(gm, n.args[0].target) for n in gm.graph.nodes
            if n.op == "call_function" and n.target is executorch_call_delegate]


def pte_variants(edge) -> PteVariants:
    """Deployable and host .pte bytes of an EdgeProgramManager lowered with the host graph included
    (`EthosUCompileSpec(...).include_host_graph()`; without it both are the deployable one).
    Delegates of other backends are left as they are. The backend's payload is already reproducible
    (vela's wall time and layer numbers are fixed in `EthosUBackend`), so only the TOSA block differs."""
    lowered = _lowered_modules(edge)
    original = [(m._processed_bytes, m._compile_specs) for m in lowered]
    config = ExecutorchBackendConfig(extract_delegate_segments=False)
    variants = {}
    try:
        for host_graph in (True, False):
            for module, (processed, specs) in zip(lowered, original, strict=True):
                if module.backend_id == BACKEND_ID:
                    payload = _payload(bytes(processed), host_graph)
                    module._processed_bytes = payload
                    holds_graph = TOSA_BLOCK in parse_binstream(payload).extra
                    module._compile_specs = _portable_specs(specs, holds_graph)
                else:
                    module._compile_specs = _portable_specs(specs)
            variants[host_graph] = edge.to_executorch(config).buffer
    finally:
        for module, (processed, specs) in zip(lowered, original, strict=True):
            module._processed_bytes, module._compile_specs = processed, specs
    return PteVariants(deployable=variants[False], host=variants[True])
