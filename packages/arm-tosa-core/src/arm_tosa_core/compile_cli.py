"""`arm-compile`: a PyTorch model -> a deployable ExecuTorch .pte for an Arm target, with a report.

    arm-compile mobilenet_v2                                   # bundled example, Ethos-U55-128
    arm-compile my_model.py:make_model --target ethos-u85-256 --calibration samples/
    arm-compile mobilenet_v2 --target TOSA-1.0+FP --output mv2_fp.pte

    arm-compile mobilenet_v2 --target vgf --explore             # VGF .pte + .vgf, Model Explorer files

Stages: load the model, quantize (INT targets), lower, write the .pte, report, verify the .pte where
the target runs it on this machine (the TOSA reference model; Vulkan on lavapipe or a GPU for VGF and
the Vulkan delegate) against the (quantized) PyTorch model. Targets come from the packages installed
(`compile_targets`). Progress goes to stderr; the report table and the verification result go to stdout.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge_transform_and_lower

from .compile_inputs import LoadedModel, channels_last_io, load_model, load_samples, random_samples
from .compile_targets import (
    CompiledProgram,
    CompileTarget,
    PteForms,
    QuantizationFlow,
    TargetFamily,
    load_families,
    resolve_with_family,
)
from .errors import MissingToolError
from .example_models import EXAMPLE_MODELS
from .explore import (
    ModelExplorerFiles,
    PartitionedGraph,
    is_interactive,
    open_in_model_explorer,
    partitioned_graph,
    write_model_explorer_files,
)
from .reference import run_on_reference_model
from .report import partition_report
from .testing import max_relative_error

DEFAULT_TARGET = "ethos-u55-128"
_STAGES = 6


class CompileError(Exception):
    """A problem the user can fix; the CLI prints it without a traceback."""


def build_parser(families: list[TargetFamily] | None = None) -> argparse.ArgumentParser:
    """The parser: the options every target takes, then each installed family's own group."""
    p = argparse.ArgumentParser(
        prog="arm-compile", description="Compile a PyTorch model into an ExecuTorch .pte for an Arm "
        "target: every target an installed package registers (Ethos-U NPUs through vela, plain TOSA, "
        "VGF, the Vulkan delegate; see --list-targets).")
    p.add_argument("model", nargs="?", help="path/to/file.py:factory (returns (model, example_inputs)), "
                   "package.module:factory, or a bundled example (see --list-examples)")
    p.add_argument("-t", "--target", default=DEFAULT_TARGET,
                   help=f"target name (default {DEFAULT_TARGET}; see --list-targets)")
    p.add_argument("-o", "--output", type=Path, help="the .pte to write (default <model>_<target>.pte)")
    p.add_argument("-f", "--force", action="store_true", help="overwrite an existing .pte and report folder")
    p.add_argument("--report-dir", type=Path, help="folder for partitions.json, the target's report "
                   "files and the per-partition artifacts (default <output without .pte>_report)")
    p.add_argument("--input-size", type=int, help="image side / token count of a bundled example")
    p.add_argument("--seed", type=int, default=0, help="seed of the bundled example and random calibration")
    p.add_argument("--channels-last-io", action="store_true",
                   help="export with 4-D inputs in channels-last memory (NHWC): the partitions start and end "
                        "without the NCHW<->NHWC transposes, and the .pte takes (and gives) channels-last "
                        "tensors (x.to(memory_format=torch.channels_last))")
    p.add_argument("--calibration", type=Path, help="folder of .npy/.pt calibration samples")
    p.add_argument("--calibration-samples", type=int, default=8,
                   help="how many random samples when no --calibration folder is given (default 8)")
    p.add_argument("--accuracy-report", action="store_true",
                   help="per-layer SQNR vs float (cumulative and isolated) on the calibration inputs: "
                        "table of the worst layers, accuracy.csv/json/png in the report folder "
                        "(quantized targets)")
    p.add_argument("--no-verify", action="store_true", help="skip running the .pte and comparing it with "
                   "the PyTorch model")
    p.add_argument("--tolerance", type=float, help="fail when the verified max abs error exceeds this")
    p.add_argument("--explore", action="store_true", help="write the partitioned graph with per-node data "
                   "(partition, CPU reason, NPU cycles, SQNR) for Google's Model Explorer into "
                   "<report>/model_explorer and open it (opens only when run from a terminal)")
    p.add_argument("--list-targets", action="store_true", help="list the installed targets and exit")
    p.add_argument("--list-examples", action="store_true", help="list the bundled examples and exit")
    p.add_argument("--traceback", action="store_true", help="show the full traceback on errors")
    for family in load_families() if families is None else families:
        if family.add_arguments is not None:
            family.add_arguments(p.add_argument_group(f"{family.family} options"))
    return p


def _target_options(args: argparse.Namespace, family: TargetFamily, families: list[TargetFamily]
                    ) -> dict[str, Any]:
    """The given options of the chosen family; CompileError for a given option of another family."""
    given = {n: getattr(args, n) for f in families for n in f.options
             if getattr(args, n, None) not in (None, False)}
    foreign = sorted(set(given) - set(family.options))
    if foreign:
        owners = {n: f.family for f in families for n in f.options}
        flags = ", ".join(f"--{n.replace('_', '-')} ({owners[n]})" for n in foreign)
        raise CompileError(f"{flags} does not apply to target {args.target!r} ({family.family}); "
                           "drop it or choose a target of that family")
    return given


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


def _lower(target: CompileTarget, spec, module: torch.nn.Module, inputs):
    ep = torch.export.export(module, inputs)
    return to_edge_transform_and_lower(ep, partitioner=[target.partitioner(spec)],
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))


def _default_pte(lowered, options) -> PteForms:
    pte = lowered.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False)).buffer
    return PteForms(pte, pte)


def _run_pte(target: CompileTarget, pte: bytes, lowered, inputs) -> tuple[Any, str]:
    """Outputs of the written .pte on the target's host runner, and a note ("" when it ran as is).

    Without the C++ runtime (runtime-cpp, an optional extra) a TOSA-graph target is checked on the
    lowered program instead: the same delegate graphs on the TOSA reference model, in-process."""
    if target.run_pte is not None:
        return target.run_pte(pte, *inputs), ""
    try:
        return run_on_reference_model(pte, *inputs), ""
    except MissingToolError as exc:
        note = (f"note: {exc}. Checked the lowered program's delegate graphs on the TOSA reference model "
                "in-process instead of the .pte itself")
        return run_on_reference_model(lowered, *inputs), note


def _verify(flow: QuantizationFlow | None, quantized, module, inputs, actual) -> tuple[float, float]:
    with torch.no_grad():
        expected = flow.reference(quantized, inputs) if quantized is not None else module(*inputs)
    return max_relative_error(actual, expected)


def _accuracy_report(flow: QuantizationFlow, target: CompileTarget, quantized, samples, lowered,
                     host_pte: bytes, report_dir: Path, out):
    """Per-layer SQNR (fake-quant and TOSA reference-model stages, the target column as the target
    says) plus the output SQNR of the .pte on the host where it runs there."""

    def run_pte(*x):
        return (target.run_pte or run_on_reference_model)(host_pte, *x)

    # a .pte of TOSA graphs runs on the reference model; another runs on the target itself (VGF on Vulkan)
    stage = "tosa_reference" if target.run_pte is None else "target"
    try:
        report = flow.accuracy_report(quantized, samples, lowered, run_pte, target.own_result, stage)
    except (ValueError, MissingToolError) as exc:  # no host graph in the payload, no C++ runtime
        print(f"note: the .pte did not run on the host ({exc}); its output SQNR is the lowered "
              "program's", file=out)
        report = flow.accuracy_report(quantized, samples, lowered, None, target.own_result)
    print(report.format_table(), file=out)
    (report_dir / "accuracy.json").write_text(report.to_json())
    report.write_csv(report_dir / "accuracy.csv")
    report.plot_png(report_dir / "accuracy.png")
    return report, f"{len(report.layers)} layers, output {report.output_db['fake_quant']:.2f} dB"


def compile_model(args: argparse.Namespace, out=None, progress: _Progress | None = None,
                  families: list[TargetFamily] | None = None) -> int:
    """Run every stage for parsed arguments; returns the exit status."""
    out = out or sys.stdout
    progress = progress or _Progress()
    families = load_families() if families is None else families
    target, family = resolve_with_family(args.target, families)
    options = _target_options(args, family, families)
    spec = target.compile_spec(options)
    flow = target.quantizer(spec) if target.quantizer is not None else None
    if args.accuracy_report and flow is None:
        raise CompileError(f"--accuracy-report measures quantization error, and {args.target} runs float: "
                           "drop the option or choose an integer target")
    name = args.model.rpartition(":")[2] if ":" in args.model else args.model
    output = args.output or _default_output(name, args.target)
    report_dir = args.report_dir or output.with_name(output.stem + "_report")
    _check_outputs(output, report_dir, args.force)
    extra = target.extra_stages(options) if target.extra_stages is not None else []
    progress.total = _STAGES + int(bool(args.accuracy_report)) + int(args.explore) + len(extra)

    with progress.stage("load model") as st:
        model = load_model(args.model, args.input_size, args.seed)
        model = replace(model, example_inputs=channels_last_io(model.example_inputs, args.channels_last_io))
        st.detail = f"{model.name}, inputs {[tuple(x.shape) for x in model.example_inputs]}"
    with progress.stage("quantize") as st:
        quantized, samples = None, []
        if flow is not None:
            samples, st.detail = _calibration(args, model)
            samples = [channels_last_io(sample, args.channels_last_io) for sample in samples]
            quantized = flow.quantize(model.module, model.example_inputs, samples)
        else:
            st.detail = f"skipped: {args.target} runs float"
    report_dir.mkdir(parents=True, exist_ok=True)
    spec.dump_intermediate_artifacts_to(report_dir)
    with progress.stage(f"lower for {args.target}") as st:
        lowered = _lower(target, spec, quantized if quantized is not None else model.module,
                         model.example_inputs)
        partitions = partition_report(lowered)
        st.detail = (f"{len(partitions.delegates)} partition(s), {100 * partitions.delegated_share:.1f} % of "
                     f"operators delegated")
    explorer_graph = partitioned_graph(lowered) if args.explore else None  # before to_executorch
    with progress.stage("write .pte") as st:
        forms = (target.to_pte or _default_pte)(lowered, options)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_bytes(forms.written)
        st.detail = f"{output} ({len(forms.written)} bytes)"
        if target.after_write is not None:
            st.detail += f"; {target.after_write(forms.written, output)}"
    if forms.note:
        print(forms.note, file=out)
    program = CompiledProgram(spec, model.module, model.example_inputs, samples, quantized, lowered, forms,
                              output, report_dir, options)
    with progress.stage("report") as st:
        print(partitions, file=out)
        if target.report is not None:
            text = target.report(forms.written, report_dir)
            if text:
                print(text, file=out)
        (report_dir / "partitions.json").write_text(partitions.to_json())
        st.detail = f"{report_dir}"
    accuracy = None
    if args.accuracy_report:
        with progress.stage("accuracy report") as st:
            accuracy, st.detail = _accuracy_report(flow, target, quantized, samples, lowered, forms.host,
                                                   report_dir, out)
    for title, run in extra:
        with progress.stage(title) as st:
            st.detail = run(program)
    explored = None
    if args.explore:
        with progress.stage("Model Explorer files") as st:
            explored = _explore(target, explorer_graph, forms, accuracy, name, report_dir, out)
            st.detail = f"{explored.graph} + {len(explored.node_data)} node data file(s)"
    status = 0
    with progress.stage(f"verify on {target.runs_on}") as st:
        if args.no_verify:
            st.detail = "skipped (--no-verify)"
        else:
            actual, note = _run_pte(target, forms.host, lowered, model.example_inputs)
            if note:
                print(note, file=out)
            against = "quantized PyTorch model" if quantized is not None else "PyTorch model"
            err, mag = _verify(flow, quantized, model.module, model.example_inputs, actual)
            print(f"max abs error vs the {against}: {err:.6g} (max |output| {mag:.4g})", file=out)
            st.detail = f"max abs error {err:.3g}"
            if args.tolerance is not None and err > args.tolerance:
                print(f"error: max abs error {err:.6g} exceeds --tolerance {args.tolerance:g}", file=sys.stderr)
                status = 1
    if explored is not None and is_interactive():
        print(open_in_model_explorer(explored, launch=True), file=out)
    return status


def _explore(target: CompileTarget, graph: PartitionedGraph, forms: PteForms, accuracy, name: str,
             report_dir: Path, out) -> ModelExplorerFiles:
    values = dict(target.node_data(forms.written)) if target.node_data is not None else {}
    if accuracy is not None:
        values["sqnr_db"] = {layer.name: layer.cumulative_db for layer in accuracy.layers}
    files = write_model_explorer_files(graph, report_dir / "model_explorer", name=name, node_values=values)
    print(open_in_model_explorer(files, launch=False), file=out)
    return files


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `arm-compile` console script."""
    try:
        families = load_families()
    except RuntimeError as exc:  # a broken target package: say which, not a traceback
        print(f"arm-compile: error: {exc}", file=sys.stderr)
        return 1
    parser = build_parser(families)
    args = parser.parse_args(argv)
    try:
        if args.list_targets:
            for family in families:
                print(f"{family.family}: {', '.join(family.names)}")
            return 0
        if args.list_examples:
            for example in EXAMPLE_MODELS.values():
                print(f"{example.name}: {example.description}")
            return 0
        if args.model is None:
            parser.error("give a model (path/to/file.py:factory or a bundled example name)")
        return compile_model(args, families=families)
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
