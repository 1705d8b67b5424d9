"""The `arm-compile` targets of this package: the Ethos-U family (every vela accelerator) and the plain
TOSA specifications, registered under arm-tosa-core's "arm_toolkit.targets" entry points (see
`arm_tosa_core.compile_targets`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from arm_tosa_core.compile_targets import CompiledProgram, CompileTarget, PteForms, TargetFamily


# -- Ethos-U ------------------------------------------------------------------------------------
def _ethosu_spec(name: str, options: dict[str, Any]):
    from .compile_spec import EthosUCompileSpec

    spec = EthosUCompileSpec(name, options.get("system_config"), options.get("memory_mode"),
                             options.get("vela_flags"), options.get("vela_config") or "Arm/vela.ini")
    if options.get("sram_limit"):
        spec.set_memory_limit(sram_bytes=int(options["sram_limit"]))
    if options.get("tune"):
        spec.enable_tune()
    spec.set_transpose_form(options.get("transpose_form"))
    # lowered with the host graph, which verify runs; arm-compile writes the deployable .pte without it
    return spec.include_host_graph()


def _sram_limit_of(report) -> int | None:
    """The SRAM limit of the system config/memory mode the first partition was compiled for."""
    from .vela_config import validate

    if not report.partitions:
        return None
    p = report.partitions[0]
    try:
        return validate(p.target, p.system_config, p.memory_mode).sram_limit
    except Exception:  # a custom .ini the report cannot see: draw no line
        return None


def _ethosu_report(pte: bytes, out_dir: Path) -> str:
    from .program_report import REPORT_FILE, ethosu_report

    report = ethosu_report(pte)
    (out_dir / REPORT_FILE).write_text(report.to_json())
    report.plot_layers_png(out_dir / "layers.png")
    report.write_layers_csv(out_dir / "layers.csv")
    report.plot_sram_png(out_dir / "sram.png", _sram_limit_of(report))
    return report.format_table()


def _ethosu_pte(lowered, options: dict[str, Any]) -> PteForms:
    from .deployable import pte_variants

    variants = pte_variants(lowered)  # reproducible: no host path, no wall time inside
    written = variants.host if options.get("host_graph") else variants.deployable
    note = ""
    if variants.host_graph_bytes:
        share = 100 * variants.host_graph_bytes / len(variants.deployable)
        kept = "included (--host-graph)" if options.get("host_graph") else "left out; --host-graph keeps them"
        note = (f"host graphs: {variants.host_graph_bytes} bytes (+{share:.1f} % over the deployable "
                f"{len(variants.deployable)}-byte .pte), {kept}")
    # the host twin (the very vela payload plus the host graph) is what runs on this machine
    return PteForms(written, variants.host, note)


def _target_sqnr(program: CompiledProgram) -> str:
    from .mixed_precision_cli import run_target_sqnr
    from .program_report import ethosu_report

    out, goal = sys.stdout, program.options["target_sqnr"]
    result = run_target_sqnr(program.module, program.example_inputs, program.samples,
                             ethosu_report(program.pte.written), goal, spec=program.spec)
    print(result.summary(), file=out)
    print("# quantizer configuration (paste after building your quantizer):", file=out)
    print(result.config_python(), file=out)
    if result.cycles_note == "est.":
        print("note: this .pte is all-int8, and int16 does not compile for this target here, so the extra "
              "cycles are estimates (a moved layer's int8 cycles again)", file=out)
    else:
        print("note: this .pte is all-int8; quantize with the configuration above for the mixed one "
              "(extra cycles: vela's all-a16w8 compile minus its all-int8 compile, per unit, plus "
              "the int8<->int16 boundaries' RESCALE passes)", file=out)
    return f"{'met' if result.met else 'not met'}, {len(result.moved)} unit(s) moved"


def _simulate(program: CompiledProgram) -> str:
    """Run the deployable .pte's command stream on runtime_cpp's NPU simulator, compare it with the TOSA
    reference model bit for bit, and print the per-op record next to vela's per-layer estimate."""
    from .deployable import pte_variants
    from .simulate import simulate_pte, write_simulation_json

    deployable = pte_variants(program.lowered).deployable if program.options.get("host_graph") else program.pte.written
    result = simulate_pte(deployable, program.lowered, program.example_inputs)
    print("simulated command stream, per vela layer (vela's estimate | what the stream does):", file=sys.stdout)
    print(result.format_table(), file=sys.stdout)
    macs = "equal to vela's" if result.macs == result.vela_macs else f"vela reports {result.vela_macs}"
    print(f"simulator: {result.verdict()}; {result.macs} MACs ({macs})", file=sys.stdout)
    path = write_simulation_json(result, program.report_dir)
    return f"{'bit-exact' if result.bit_exact else 'DIFFERS'}, {result.macs} MACs; {path.name}"


def _ethosu_stages(options: dict[str, Any]):
    goal = options.get("target_sqnr")
    stages = [] if goal is None else [(f"mixed precision search (target {goal:g} dB)", _target_sqnr)]
    if options.get("simulate"):
        stages.append(("simulate the command stream", _simulate))
    return stages


def _npu_cycles_per_node(pte: bytes) -> dict[str, dict[str, float]]:
    """vela's per-layer NPU cycles, summed per torch node (the layer's main TOSA operator's node)."""
    from .program_report import ethosu_report

    cycles: dict[str, float] = {}
    for partition in ethosu_report(pte).partitions:
        for row in partition.layers:
            node = row.get("Node")
            if node:
                cycles[node] = cycles.get(node, 0.0) + float(row.get("NPU") or 0)
    return {"npu_cycles": cycles}


def _ethosu_target(name: str) -> CompileTarget | None:
    from .vela_config import accelerator_targets

    if name not in accelerator_targets():
        return None
    from arm_quantizer import Pt2eFlow

    from .partitioner import EthosUPartitioner
    from .quantizer import EthosUQuantizer

    return CompileTarget(name, lambda options: _ethosu_spec(name, options), EthosUPartitioner,
                         lambda spec: Pt2eFlow(EthosUQuantizer(spec)), _ethosu_report, ETHOSU_OWN_RESULT,
                         to_pte=_ethosu_pte, extra_stages=_ethosu_stages, node_data=_npu_cycles_per_node,
                         runs_on="the Ethos-U NPU simulator (runtime_cpp's EthosUBackend runs vela's command stream)")


ETHOSU_OWN_RESULT = ("not measured on an NPU or FVP: on this machine the .pte runs vela's command stream on "
                     "the NPU simulator, bit-exact with the TOSA INT graph vela compiled (`--simulate` checks it), "
                     "so the host run equals the TOSA columns")


def _ethosu_arguments(ethos: argparse._ArgumentGroup) -> None:
    ethos.add_argument("--system-config", help="vela system config (default per family)")
    ethos.add_argument("--memory-mode", help="vela memory mode (default per family)")
    ethos.add_argument("--vela-config", help="a custom vela .ini file (default vela's Arm/vela.ini)")
    ethos.add_argument("--vela-flags", help='extra vela flags, given with "=": --vela-flags="--optimise Size"')
    ethos.add_argument("--sram-limit", type=int, help="fail when a partition needs more SRAM (bytes)")
    ethos.add_argument("--host-graph", action="store_true", help="keep each partition's TOSA INT graph in "
                       "the .pte so it also runs on a host (executorch.runtime + runtime_cpp); the default "
                       ".pte is the deployable one, vela's payload only")
    ethos.add_argument("--simulate", action="store_true",
                       help="run the deployable .pte's command stream on the host NPU simulator (runtime_cpp), "
                            "check it bit for bit against the TOSA reference model, and print the per-op "
                            "record (kick-offs, MACs, DMA bytes) next to vela's per-layer estimate; writes "
                            "simulation.json in the report folder")
    ethos.add_argument("--tune", action="store_true",
                       help="per partition, compile with vela's scheduling options that change cycles "
                            "(optimise Size/Performance, cascading, buffering, ...) and the alternative "
                            "graph forms over a process pool (at most 12 candidates, 120 s), keep the fewest "
                            "NPU cycles within the SRAM limit; the report lists every candidate")
    ethos.add_argument("--transpose-form", choices=("as-is", "collapsed"),
                       help="how each TRANSPOSE is written for vela: one rank-N TRANSPOSE (as-is) or RESHAPE, a "
                            "TRANSPOSE of the fewest axes, RESHAPE (collapsed); default: collapsed on U55/U65 "
                            "(fewer cycles under vela 5.2), as-is on U85 (regor runs the collapsed one on the CPU)")
    ethos.add_argument("--target-sqnr", type=float, metavar="DB",
                       help="choose the modules whose activations move to int16 (a16w8) so the output SQNR "
                            "vs float reaches DB, by SQNR gained per extra NPU cycle; prints the quantizer "
                            "config")


ETHOSU_OPTIONS = ("system_config", "memory_mode", "vela_config", "vela_flags", "sram_limit", "host_graph",
                  "target_sqnr", "tune", "simulate", "transpose_form")


def ethosu_family() -> TargetFamily:
    from .vela_config import accelerator_targets

    return TargetFamily("Ethos-U (vela)", accelerator_targets(), _ethosu_target, _ethosu_arguments,
                        ETHOSU_OPTIONS)


# -- plain TOSA ---------------------------------------------------------------------------------
def _tosa_target(name: str) -> CompileTarget | None:
    if not name.upper().startswith("TOSA-"):
        return None
    from arm_quantizer import Pt2eFlow, TOSAQuantizer, get_symmetric_quantization_config
    from arm_tosa_core import TosaCompileSpec, TOSAPartitioner

    def spec(options: dict[str, Any]):
        return TosaCompileSpec(name)  # ValueError with the valid forms when the string is bad

    def quantizer(compile_spec):
        if not compile_spec.tosa_spec.support_integer():
            return None
        return Pt2eFlow(TOSAQuantizer(compile_spec).set_global(get_symmetric_quantization_config()))

    return CompileTarget(name, spec, TOSAPartitioner, quantizer,
                         own_result="the TOSA reference model is this target's own result: see the TOSA columns")


def tosa_family() -> TargetFamily:
    return TargetFamily("TOSA", ("TOSA-1.0+INT", "TOSA-1.0+FP", "TOSA-1.0+FP+INT"), _tosa_target)
