"""EthosUCompileSpec: what an Ethos-U compile targets, checked against vela's own configuration.

The spec is a `TosaCompileSpec` whose TOSA specification is implied by the target: "TOSA-1.0+INT"
for every Ethos-U, plus the core's "u55" pseudo-extension (the operator subset Ethos-U55 and U65
run) for those two families. Everything vela needs travels to `EthosUBackend` in the "ethosu" entry
of the compile-spec payload (see `TosaCompileSpec.to_list`).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from arm_tosa_core import TosaCompileSpec
from arm_tosa_core.helpers.windows import MAX_POOL_FORMS
from arm_tosa_core.transpose_forms import TRANSPOSE_FORMS

from . import vela_config
from .tune import TuneBounds
from .vela_config import MemoryLimits
from .vela_runner import _check_extra_flags

#: How the bundled vela configuration is named in vela's documentation and in this API.
BUNDLED_INI_NAME = "Arm/vela.ini"


def implied_tosa_spec(target: str) -> str:
    """The TOSA specification an Ethos-U target runs: INT with EXT-INT16 (vela 5.2 lists it for every
    family: int16 activations x int8 weights -> int48 accumulators) and EXT-INT4 (4-bit convolution weights,
    every family), plus the U55/U65 subset where it applies."""
    family = vela_config.family(target)
    return "TOSA-1.0+INT+int16+int4+u55" if family in ("U55", "U65") else "TOSA-1.0+INT+int16+int4"


def default_transpose_form(target: str) -> str:
    """How the lowering writes a TRANSPOSE for `target` when the spec does not say (`arm_tosa_core.transpose_forms`).

    U55/U65: "collapsed" (RESHAPE, a TRANSPOSE of the fewest axes, RESHAPE). vela 5.2 runs it in fewer U55 NPU
    and total cycles: the NCHW -> NHWC move of a 3x128x128 input takes 12,320 U55-128 NPU cycles instead of
    24,640, a ShuffleNet channel shuffle (58x2x28x28) on U55-64 22,768 instead of 136,576, and on every public
    model of `bench/bench_ethosu_public.py` the collapsed form cost no U55-128 NPU or total cycle more than the
    rank-4 one (bench/results/ethosu_public.md). U65 (256 and 512): fewer NPU cycles on every transpose
    measured (3x128x128 input on U65-256: 105,107 against 158,035); total cycles equal or fewer but for a
    21-channel 128x128 NCHW output on U65-512 (978,670 against 857,086: U65's transposes are DRAM-bound).
    U85: "as-is": regor sends the collapsed form's TRANSPOSE to the CPU (131,381 NPU cycles became 9.8 M total
    cycles on a 3x128x128 input)."""
    return "as-is" if vela_config.family(target) == "U85" else "collapsed"


def default_max_pool_form(target: str) -> str:
    """How the lowering writes a stride-1 k x k max pool for `target` (`arm_tosa_core.helpers.windows._max_pool`).

    U55: "separable" (k x 1 then 1 x k, the same integers): vela 5.2 gives fewer NPU and total cycles on every
    shape measured on U55-128 and U55-64 (3x3 on 4x4x832 to 64x64x16: 8-12 % fewer; 5x5 on 16x16x64: 2.5x
    fewer). U65 and U85: "whole": on U65-256 the split form costs more NPU cycles at 3x3 (8x8x528: 70,632
    against 43,516), on U85-256 more total cycles (16x16x480: 393,749 against 300,000)."""
    return "separable" if vela_config.family(target) == "U55" else "whole"


def _form(value: str | None, allowed: tuple[str, ...], default: str, what: str) -> str:
    """`value`, or `default` for None; ValueError naming `what` for a value not in `allowed`."""
    if value is not None and value not in allowed:
        raise ValueError(f"{what} {value!r}: use one of {allowed} (or None for the target's default)")
    return default if value is None else value


def resolve_config_ini(config_ini: str | Path | None) -> Path | None:
    """None for vela's bundled Arm/vela.ini, else the absolute path of a custom .ini file.

    "Arm/vela.ini" (and any other name of a file under vela's own ``config_files`` folder) means the
    file vela ships; any other value is a path to a file of yours.
    """
    if config_ini is None or str(config_ini) == BUNDLED_INI_NAME:
        return None
    text = str(config_ini)
    bundled = vela_config.BUNDLED_CONFIG.parent.parent / text
    if not Path(text).expanduser().exists() and bundled.is_file():
        return bundled.resolve()
    return vela_config.resolve_config_path(text)


def normalize_extra_flags(extra_flags: str | Sequence[str] | None) -> list[str]:
    """Extra vela command-line flags as a list.

    A string is split like a shell would ("--optimise Size"), as the older documentation passed them.
    `--output-format=raw` is dropped (the backend always asks vela for raw output); other flags the
    backend sets itself (--accelerator-config, --system-config, ...) raise ValueError.
    """
    if extra_flags is None:
        return []
    if isinstance(extra_flags, str):
        flags = shlex.split(extra_flags)
    elif isinstance(extra_flags, Sequence):
        flags = [str(f) for f in extra_flags]
    else:
        raise TypeError(f"extra_flags must be a string or a list of strings, not {type(extra_flags).__name__}")
    out: list[str] = []
    i = 0
    while i < len(flags):
        flag = flags[i]
        if flag == "--output-format=raw":
            i += 1
            continue
        if flag == "--output-format" and i + 1 < len(flags) and flags[i + 1] == "raw":
            i += 2
            continue
        out.append(flag)
        i += 1
    try:
        return _check_extra_flags(out)
    except ValueError as exc:
        raise ValueError(f"{exc}; pass them as EthosUCompileSpec arguments (target=, system_config=, "
                         "memory_mode=, config_ini=)") from None


class EthosUCompileSpec(TosaCompileSpec):
    """Compile for an Arm Ethos-U NPU through vela.

    `target` is a vela accelerator name (ethos-u55-{32,64,128,256}, ethos-u65-{256,512},
    ethos-u85-{128,...,2048}); `system_config` and `memory_mode` are sections of `config_ini`
    (default: the family's defaults from vela's bundled Arm/vela.ini). Invalid names raise
    ValueError listing the valid ones. `extra_flags` are passed to vela as they are.

    The payload is the deployable one by default (vela's bin stream and its report, what `arm-compile`
    writes); `include_host_graph()` adds the TOSA graph the host runs (`arm-compile --host-graph`).

        spec = EthosUCompileSpec("ethos-u55-128").dump_intermediate_artifacts_to("out/")
    """

    output_format = "vela"

    def __init__(self, target: str = "ethos-u55-128", system_config: str | None = None,
                 memory_mode: str | None = None, extra_flags: str | Sequence[str] | None = None,
                 config_ini: str | Path | None = BUNDLED_INI_NAME) -> None:
        ini = resolve_config_ini(config_ini)
        self.limits: MemoryLimits = vela_config.validate(target, system_config, memory_mode, ini)
        self.target = target
        self.system_config = self.limits.system_config
        self.memory_mode = self.limits.memory_mode
        self.config_ini = ini  # None: vela's bundled Arm/vela.ini
        self.extra_flags = normalize_extra_flags(extra_flags)
        self.sram_limit_bytes: int | None = None
        self.weight_limit_bytes: int | None = None
        self.tosa_graph_in_payload = False  # the deployable payload; include_host_graph() opts in
        self.tune_bounds: TuneBounds | None = None  # enable_tune() sets it
        self.transpose_form = default_transpose_form(target)  # set_transpose_form() overrides it
        self.max_pool_form = default_max_pool_form(target)  # set_max_pool_form() overrides it
        super().__init__(implied_tosa_spec(target))
        # regor keeps 15 bits of an int16 fully connected layer's output multiplier (ops/matmul.py)
        self.int16_fc_rescale16 = self.family == "U85"

    @property
    def family(self) -> str:
        """"U55", "U65" or "U85"."""
        return vela_config.family(self.target)

    def set_memory_limit(self, sram_bytes: int | None = None,
                         weight_bytes: int | None = None) -> EthosUCompileSpec:
        """Fail the compile when a partition needs more SRAM than `sram_bytes` (what your board gives
        the NPU) or more weight storage than `weight_bytes`; returns self so calls chain."""
        for name, value in (("sram_bytes", sram_bytes), ("weight_bytes", weight_bytes)):
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ValueError(f"{name} must be a positive number of bytes or None, got {value!r}")
        self.sram_limit_bytes, self.weight_limit_bytes = sram_bytes, weight_bytes
        return self

    def enable_tune(self, enabled: bool = True, max_candidates: int = 12, time_limit_s: float = 120.0,
                    max_workers: int = 4) -> EthosUCompileSpec:
        """Compile each partition several ways (vela scheduling options x graph forms, see `arm_ethosu.tune`)
        and keep the fewest NPU cycles within the SRAM limit; every candidate and its cycles go into the
        report (`PartitionReport.tune`). The same switch as `arm-compile --tune`; returns self.

        Bounded by `max_candidates` compiles and `time_limit_s` wall seconds per partition, run on up to
        `max_workers` processes."""
        self.tune_bounds = TuneBounds(max_candidates, time_limit_s, max_workers) if enabled else None
        return self

    def set_transpose_form(self, form: str | None) -> EthosUCompileSpec:
        """Write each TRANSPOSE "as-is" (one rank-N TRANSPOSE) or "collapsed" (RESHAPE, TRANSPOSE of the
        fewest axes, RESHAPE; the same bytes in the same places); None: the target's default
        (`default_transpose_form`: collapsed on U55/U65, as-is on U85). The same switch as `arm-compile
        --transpose-form`; `--tune` on U55/U65 tries the other form too. Returns self."""
        self.transpose_form = _form(form, TRANSPOSE_FORMS, default_transpose_form(self.target), "transpose form")
        return self

    def set_max_pool_form(self, form: str | None) -> EthosUCompileSpec:
        """Write a stride-1 k x k max pool "whole" (one MAX_POOL2D) or "separable" (k x 1 then 1 x k, the same
        integers); None: the target's default (`default_max_pool_form`: separable on U55). Returns self."""
        self.max_pool_form = _form(form, MAX_POOL_FORMS, default_max_pool_form(self.target), "max pool form")
        return self

    def include_host_graph(self, include: bool = True) -> EthosUCompileSpec:
        """Store (or, with False, leave out: the default) the host graph, the TOSA INT graph vela
        compiled, after the bin stream's end marker; returns self. The same switch as `arm-compile
        --host-graph`.

        The device never reads it; it is what `run_on_reference_model` and `runtime_cpp` run on the
        host. It roughly doubles the .pte (the graph holds the weights once more).
        """
        self.tosa_graph_in_payload = bool(include)
        return self

    def include_tosa_graph(self, include: bool = True) -> EthosUCompileSpec:
        """The older name of `include_host_graph`."""
        return self.include_host_graph(include)

    def _extra_specs(self) -> dict:
        return {"ethosu": {
            "target": self.target,
            "system_config": self.system_config,
            "memory_mode": self.memory_mode,
            # the file's name only: its folder is this machine's (the path rides in _host_specs)
            "config_ini": None if self.config_ini is None else Path(self.config_ini).name,
            "extra_flags": list(self.extra_flags),
            "sram_limit_bytes": self.sram_limit_bytes,
            "weight_limit_bytes": self.weight_limit_bytes,
            "tosa_graph": self.tosa_graph_in_payload,
            "tune": None if self.tune_bounds is None else asdict(self.tune_bounds),
            "transpose_form": self.transpose_form,
            "max_pool_form": self.max_pool_form,
        }}

    def _host_specs(self) -> dict:
        return {} if self.config_ini is None else {"vela_config_ini": str(self.config_ini)}

    @classmethod
    def _from_settings(cls, settings: dict) -> EthosUCompileSpec:
        ethosu = settings["ethosu"]
        if ethosu["config_ini"] is not None and not settings.get("vela_config_ini"):
            raise ValueError(f"these compile specs name a custom vela .ini ({ethosu['config_ini']!r}) but not "
                             "where it is (a folder of the compiling machine, not stored in the .pte): "
                             "build the spec again with EthosUCompileSpec(..., config_ini=<path>)")
        spec = cls(ethosu["target"], ethosu["system_config"], ethosu["memory_mode"], ethosu["extra_flags"],
                   settings.get("vela_config_ini"))
        spec.set_memory_limit(ethosu["sram_limit_bytes"], ethosu["weight_limit_bytes"])
        if ethosu.get("tune") is not None:  # absent in specs written before --tune
            spec.enable_tune(**ethosu["tune"])
        spec.set_transpose_form(ethosu.get("transpose_form"))  # absent in specs written before: the default
        spec.set_max_pool_form(ethosu.get("max_pool_form"))
        return spec.include_tosa_graph(ethosu["tosa_graph"])

    def __repr__(self) -> str:
        ini = "" if self.config_ini is None else f", config_ini={str(self.config_ini)!r}"
        flags = f", extra_flags={self.extra_flags!r}" if self.extra_flags else ""
        tune = "" if self.tune_bounds is None else f", tune={self.tune_bounds}"
        form = "".join(f", {name}={value!r}" for name, value, default in (
            ("transpose_form", self.transpose_form, default_transpose_form(self.target)),
            ("max_pool_form", self.max_pool_form, default_max_pool_form(self.target))) if value != default)
        return (f"EthosUCompileSpec({self.target!r}, system_config={self.system_config!r}, "
                f"memory_mode={self.memory_mode!r}{flags}{ini}{tune}{form})")


class ArmCompileSpecBuilder:
    """The builder of the older documentation, kept so code written against it runs unchanged.

        spec = ArmCompileSpecBuilder().ethosu_compile_spec("ethos-u55-128",
                   system_config="Ethos_U55_High_End_Embedded", memory_mode="Shared_Sram",
                   extra_flags="--output-format=raw").build()
    """

    def __init__(self) -> None:
        self._args: dict | None = None
        self._intermediate_path: str | Path | None = None
        self._debug_mode: str | None = None

    def ethosu_compile_spec(self, target: str, system_config: str | None = None,
                            memory_mode: str | None = None,
                            extra_flags: str | Sequence[str] | None = None,
                            config_ini: str | Path | None = BUNDLED_INI_NAME) -> ArmCompileSpecBuilder:
        """Choose an Ethos-U target (validated now, so mistakes surface at this line)."""
        EthosUCompileSpec(target, system_config, memory_mode, extra_flags, config_ini)
        self._args = {"target": target, "system_config": system_config, "memory_mode": memory_mode,
                      "extra_flags": extra_flags, "config_ini": config_ini}
        return self

    def dump_intermediate_artifacts_to(self, path: str | Path | None) -> ArmCompileSpecBuilder:
        self._intermediate_path = path
        return self

    def dump_debug_info(self, mode: str | None = "json") -> ArmCompileSpecBuilder:
        self._debug_mode = mode
        return self

    def build(self) -> EthosUCompileSpec:
        if self._args is None:
            raise ValueError("call .ethosu_compile_spec(target, ...) before .build()")
        spec = EthosUCompileSpec(**self._args).dump_intermediate_artifacts_to(self._intermediate_path)
        return spec.dump_debug_info(self._debug_mode) if self._debug_mode else spec
