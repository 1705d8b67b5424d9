"""`arm-compile`: a PyTorch model -> a deployable ExecuTorch .pte for an Arm target, with a report.

    arm-compile mobilenet_v2                                   # bundled example, Ethos-U55-128
    arm-compile my_model.py:make_model --target ethos-u85-256 --calibration samples/
    arm-compile mobilenet_v2 --target TOSA-1.0+FP --output mv2_fp.pte

Stages: load the model, quantize (INT targets), lower, write the .pte, report, verify the .pte on
the TOSA reference model against the (quantized) PyTorch model. Progress goes to stderr; the report
table and the verification result go to stdout.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from .cli_inputs import LoadedModel, load_model, load_samples, random_samples
from .targets import CompileTarget, load_families, resolve_target

DEFAULT_TARGET = "ethos-u55-128"
_STAGES = 6


class CompileError(Exception):
    """A problem the user can fix; the CLI prints it without a traceback."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="arm-compile", description="Compile a PyTorch model into an ExecuTorch .pte for an Arm "
        "target (Ethos-U NPUs through vela, plain TOSA, and targets other packages register).")
    p.add_argument("model", nargs="?", help="path/to/file.py:factory (returns (model, example_inputs)), "
                   "package.module:factory, or a bundled example (see --list-examples)")
    p.add_argument("-t", "--target", default=DEFAULT_TARGET,
                   help=f"target name (default {DEFAULT_TARGET}; see --list-targets)")
    p.add_argument("-o", "--output", type=Path, help="the .pte to write (default <model>_<target>.pte)")
    p.add_argument("-f", "--force", action="store_true", help="overwrite an existing .pte and report folder")
    p.add_argument("--report-dir", type=Path, help="folder for report.json, layers.png and the "
                   "per-partition artifacts (default <output without .pte>_report)")
    p.add_argument("--input-size", type=int, help="image side / token count of a bundled example")
    p.add_argument("--seed", type=int, default=0, help="seed of the bundled example and random calibration")
    p.add_argument("--calibration", type=Path, help="folder of .npy/.pt calibration samples")
    p.add_argument("--calibration-samples", type=int, default=8,
                   help="how many random samples when no --calibration folder is given (default 8)")
    p.add_argument("--accuracy-report", action="store_true",
                   help="per-layer SQNR vs float (cumulative and isolated) on the calibration inputs: "
                        "table of the worst layers, accuracy.csv/json/png in the report folder")
    p.add_argument("--target-sqnr", type=float, metavar="DB",
                   help="choose the modules whose activations move to int16 (a16w8) so the output SQNR vs "
                        "float reaches DB, by SQNR gained per extra NPU cycle; prints the quantizer config")
    p.add_argument("--no-verify", action="store_true", help="skip running the .pte on the reference model")
    p.add_argument("--tolerance", type=float, help="fail when the verified max abs error exceeds this")
    p.add_argument("--list-targets", action="store_true", help="list the installed targets and exit")
    p.add_argument("--list-examples", action="store_true", help="list the bundled examples and exit")
    p.add_argument("--traceback", action="store_true", help="show the full traceback on errors")
    ethos = p.add_argument_group("Ethos-U options")
    ethos.add_argument("--system-config", help="vela system config (default per family)")
    ethos.add_argument("--memory-mode", help="vela memory mode (default per family)")
    ethos.add_argument("--vela-config", help="a custom vela .ini file (default vela's Arm/vela.ini)")
    ethos.add_argument("--vela-flags", help='extra vela flags, given with "=": --vela-flags="--optimise Size"')
    ethos.add_argument("--sram-limit", type=int, help="fail when a partition needs more SRAM (bytes)")
    ethos.add_argument("--host-graph", action="store_true", help="keep each partition's TOSA INT graph in "
                       "the .pte so it also runs on a host (executorch.runtime + runtime_cpp); the default "
                       ".pte is the deployable one, vela's payload only")
    return p


def _target_options(args: argparse.Namespace) -> dict[str, Any]:
    names = ("system_config", "memory_mode", "vela_config", "vela_flags", "sram_limit")
    return {n: getattr(args, n) for n in names if getattr(args, n) is not None}


class _Progress:
    """Numbered stage lines with timings on stderr."""

    def __init__(self, stream=None) -> None:
        self.stream, self.n, self.total = stream or sys.stderr, 0, _STAGES

    def stage(self, title: str):
        self.n += 1
        return _Stage(self, f"[{self.n}/{self.total}] {title}")


class _Stage:
    def __init__(self, progress: _Progress, title: str) -> None:
        self.progress, self.title, self.detail = progress, title, ""

    def __enter__(self) -> _Stage:
        print(f"{self.title} ...", file=self.progress.stream, flush=True)
        self.started = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.seconds = time.perf_counter() - self.started
        status = "failed" if exc_type else "done"
        detail = f": {self.detail}" if self.detail and not exc_type else ""
        print(f"{self.title} {status} in {self.seconds:.1f} s{detail}", file=self.progress.stream, flush=True)


def _default_output(model: str, target: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in f"{model}_{target}")
    return Path(f"{safe}.pte")


def _check_outputs(output: Path, report_dir: Path, force: bool) -> None:
    if output.suffix != ".pte":
        raise CompileError(f"--output {output} must end in .pte")
    if output.exists() and not force:
        raise CompileError(f"{output} exists; pass --force to overwrite it or --output to choose another file")
    if report_dir.exists() and any(report_dir.iterdir()) and not force:
        raise CompileError(f"report folder {report_dir} is not empty; pass --force to write into it or "
                           "--report-dir to choose another")


def _calibration(args, model: LoadedModel) -> tuple[list, str]:
    if args.calibration is not None:
        samples = load_samples(args.calibration, model.example_inputs)
        return samples, f"{len(samples)} samples from {args.calibration}"
    if args.calibration_samples < 1:
        raise CompileError("--calibration-samples must be at least 1")
    print(f"warning: no --calibration folder: calibrating on {args.calibration_samples} seeded random "
          "samples, so the quantization ranges do not match real data and accuracy will suffer. "
          "Pass --calibration DIR with .npy/.pt samples of your inputs.", file=sys.stderr, flush=True)
    return (random_samples(model.example_inputs, args.calibration_samples, args.seed),
            f"{args.calibration_samples} random samples (seed {args.seed})")


def _quantize(target: CompileTarget, spec, model: LoadedModel, samples) -> torch.nn.Module | None:
    quantizer = target.quantizer(spec) if target.quantizer else None
    if quantizer is None:
        return None
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    prepared = prepare_pt2e(torch.export.export(model.module, model.example_inputs).module(), quantizer)
    with torch.no_grad():
        for sample in samples:
            prepared(*sample)
    return convert_pt2e(prepared)


def _lower(target: CompileTarget, spec, module: torch.nn.Module, inputs):
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    ep = torch.export.export(module, inputs)
    return to_edge_transform_and_lower(ep, partitioner=[target.partitioner(spec)],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))


def _is_quantized(module: torch.fx.GraphModule) -> bool:
    return any("quantize_per_tensor" in str(n.target) for n in module.graph.nodes)


def _verify(pte: bytes, reference_module: torch.nn.Module, inputs) -> tuple[float, float]:
    from arm_tosa_core import run_on_reference_model
    from arm_tosa_core.testing import max_relative_error

    with torch.no_grad():
        if isinstance(reference_module, torch.fx.GraphModule) and _is_quantized(reference_module):
            # exact quantize arithmetic: the float32 fake-quant model can flip near-tie roundings
            from arm_quantizer import run_exactly

            expected = run_exactly(reference_module, *inputs)
        else:
            expected = reference_module(*inputs)
    actual = run_on_reference_model(pte, *inputs)
    return max_relative_error(actual, expected)


def _accuracy_report(quantized, samples, edge, pte: bytes, own_result: str, report_dir: Path, out) -> str:
    """Per-layer SQNR (fake-quant and TOSA reference-model stages, the target column as the target
    says) plus the output SQNR of the .pte on the reference model."""
    if quantized is None:
        return "skipped: the target runs float"
    from arm_quantizer.accuracy import output_error_db, quantization_error_report
    from arm_tosa_core import run_on_reference_model

    report = quantization_error_report(quantized, samples, lowered=edge, target_note=own_result)
    try:
        report.output_db["tosa_reference"] = output_error_db(
            quantized, samples, lambda *x: run_on_reference_model(pte, *x))
    except ValueError as exc:  # e.g. --no-tosa-graph: no TOSA graph in the payload
        print(f"note: no TOSA reference-model stage: {exc}", file=out)
    print(report.format_table(), file=out)
    (report_dir / "accuracy.json").write_text(report.to_json())
    report.write_csv(report_dir / "accuracy.csv")
    report.plot_png(report_dir / "accuracy.png")
    return f"{len(report.layers)} layers, output {report.output_db['fake_quant']:.2f} dB"


def _target_sqnr(args, spec, model: LoadedModel, samples, pte: bytes, out) -> str:
    if not samples:
        return "skipped: the target runs float"
    from .mixed_precision_cli import run_target_sqnr
    from .program_report import ethosu_report

    result = run_target_sqnr(model.module, model.example_inputs, samples, ethosu_report(pte), args.target_sqnr,
                             spec=spec)
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


def compile_model(args: argparse.Namespace, out=None, progress: _Progress | None = None) -> int:
    """Run every stage for parsed arguments; returns the exit status."""
    out = out or sys.stdout
    progress = progress or _Progress()
    progress.total = (_STAGES + int(bool(getattr(args, "accuracy_report", False)))
                      + int(getattr(args, "target_sqnr", None) is not None))
    target = resolve_target(args.target)
    spec = target.compile_spec(_target_options(args))
    name = args.model.rpartition(":")[2] if ":" in args.model else args.model
    output = args.output or _default_output(name, args.target)
    report_dir = args.report_dir or output.with_name(output.stem + "_report")
    _check_outputs(output, report_dir, args.force)

    with progress.stage("load model") as st:
        model = load_model(args.model, args.input_size, args.seed)
        st.detail = f"{model.name}, inputs {[tuple(x.shape) for x in model.example_inputs]}"
    with progress.stage("quantize") as st:
        quantized, samples = None, []
        if target.quantizer is not None and spec.tosa_spec.support_integer():
            samples, st.detail = _calibration(args, model)
            quantized = _quantize(target, spec, model, samples)
        if quantized is None:
            st.detail = f"skipped: {args.target} runs float"
    report_dir.mkdir(parents=True, exist_ok=True)
    spec.dump_intermediate_artifacts_to(report_dir)
    with progress.stage(f"lower for {args.target}") as st:
        edge = _lower(target, spec, quantized if quantized is not None else model.module, model.example_inputs)
        from arm_tosa_core import partition_report

        partitions = partition_report(edge)
        st.detail = (f"{len(partitions.delegates)} partition(s), {100 * partitions.delegated_share:.1f} % of "
                     f"operators delegated")
    with progress.stage("write .pte") as st:
        from .deployable import pte_variants

        variants = pte_variants(edge)  # reproducible: no host path, no wall time inside
        pte = variants.host if args.host_graph else variants.deployable
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_bytes(pte)
        st.detail = f"{output} ({len(pte)} bytes)"
    if variants.host_graph_bytes:
        share = 100 * variants.host_graph_bytes / len(variants.deployable)
        kept = "included (--host-graph)" if args.host_graph else "left out; --host-graph keeps them"
        print(f"host graphs: {variants.host_graph_bytes} bytes (+{share:.1f} % over the deployable "
              f"{len(variants.deployable)}-byte .pte), {kept}", file=out)
    with progress.stage("report") as st:
        print(partitions, file=out)
        if target.report is not None:
            print(target.report(pte, report_dir), file=out)
        (report_dir / "partitions.json").write_text(partitions.to_json())
        st.detail = f"{report_dir}"
    if args.accuracy_report:
        with progress.stage("accuracy report") as st:
            # run on the host twin (the deployable .pte has no host graph to execute)
            st.detail = _accuracy_report(quantized, samples if quantized is not None else [], edge,
                                         variants.host, target.own_result, report_dir, out)
    if args.target_sqnr is not None:
        with progress.stage(f"mixed precision search (target {args.target_sqnr:g} dB)") as st:
            st.detail = _target_sqnr(args, spec, model, samples, pte, out)
    status = 0
    with progress.stage("verify on the TOSA reference model") as st:
        if args.no_verify:
            st.detail = "skipped (--no-verify)"
        else:
            # The host twin: the very vela payload written above plus the host graph, executed by
            # executorch.runtime with runtime_cpp's backends.
            against = "quantized PyTorch model" if quantized is not None else "PyTorch model"
            err, mag = _verify(variants.host, quantized if quantized is not None else model.module,
                               model.example_inputs)
            print(f"max abs error vs the {against}: {err:.6g} (max |output| {mag:.4g})", file=out)
            st.detail = f"max abs error {err:.3g}"
            if args.tolerance is not None and err > args.tolerance:
                print(f"error: max abs error {err:.6g} exceeds --tolerance {args.tolerance:g}", file=sys.stderr)
                status = 1
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `arm-compile` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.list_targets:
            for family in load_families():
                print(f"{family.family}: {', '.join(family.names)}")
            return 0
        if args.list_examples:
            from arm_tosa_core.example_models import EXAMPLE_MODELS

            for example in EXAMPLE_MODELS.values():
                print(f"{example.name}: {example.description}")
            return 0
        if args.model is None:
            parser.error("give a model (path/to/file.py:factory or a bundled example name)")
        return compile_model(args)
    except Exception as exc:  # one clear line for the user; --traceback for the rest
        if args.traceback:
            traceback.print_exc()
        print(f"arm-compile: error: {exc}", file=sys.stderr)
        if not args.traceback and not isinstance(exc, (CompileError, ValueError, FileNotFoundError,
                                                        TypeError)):
            print("(rerun with --traceback for details)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
