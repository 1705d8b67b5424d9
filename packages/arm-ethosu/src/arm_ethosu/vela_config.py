"""Ethos-U targets, system configs and memory modes, read from vela's own configuration.

Nothing here is a copied list: accelerator names come from vela's ``Accelerator`` enum, system
configs and memory modes from the ``.ini`` file (by default the ``Arm/vela.ini`` bundled in the
ethos-u-vela wheel), and the memory layout of a (target, system, mode) triple is resolved by
vela's own ``ArchitectureFeatures`` (which applies ``inherit=`` and the SRAM-only rewrite).
"""

from __future__ import annotations

import configparser
import contextlib
import io
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ethosu.vela import architecture_features as _vela_arch

SYSTEM_PREFIX = "System_Config."
MEMORY_PREFIX = "Memory_Mode."

#: The Arm/vela.ini shipped inside the ethos-u-vela wheel.
BUNDLED_CONFIG: Path = Path(_vela_arch.CONFIG_FILES_PATH) / "Arm" / "vela.ini"

# Per-family defaults (system config, memory mode). U55 cannot use the Dedicated_Sram modes:
# its second AXI port is read-only flash, and vela refuses a feature-map arena there.
_FAMILY_DEFAULTS: dict[str, tuple[str, str]] = {
    "U55": ("Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "U65": ("Ethos_U65_High_End", "Dedicated_Sram_384KB"),
    "U85": ("Ethos_U85_SYS_DRAM_Mid", "Dedicated_Sram_384KB"),
}


@dataclass(frozen=True)
class VelaConfig:
    """The names a vela ``.ini`` file defines."""

    path: Path
    system_configs: tuple[str, ...]
    memory_modes: tuple[str, ...]


@dataclass(frozen=True)
class MemoryLimits:
    """Where vela puts weights, the arena (scratch) and the fast cache, and how big they may be.

    Memory names are vela's: ``Sram``, ``Dram``, ``OnChipFlash``, ``OffChipFlash``.
    ``arena_cache_size`` is the ``.ini`` value in bytes, or None when the mode does not set one
    (vela then only bounds memory by the address space, ``address_limit``).
    """

    target: str
    system_config: str
    memory_mode: str
    config_path: Path
    core_clock_hz: float
    const_area: str
    arena_area: str
    cache_area: str
    arena_cache_size: int | None
    address_limit: int
    const_in_sram: bool

    @property
    def spilling(self) -> bool:
        """True for Dedicated_Sram-style modes: SRAM is a cache, the arena lives elsewhere."""
        return self.cache_area == "Sram" and self.arena_area != "Sram"

    @property
    def sram_limit(self) -> int | None:
        """Bytes of SRAM the NPU may use under this mode, when the ``.ini`` states it."""
        if self.spilling or self.arena_area == "Sram":
            return self.arena_cache_size
        return None


def accelerator_targets() -> tuple[str, ...]:
    """All ``--accelerator-config`` names vela knows, e.g. ``ethos-u55-128``."""
    return tuple(_vela_arch.Accelerator.member_list())


def family(target: str) -> str:
    """``"U55"``, ``"U65"`` or ``"U85"`` for a valid accelerator name."""
    _check_target(target)
    return target.split("-")[1].upper()


def macs_per_cycle(target: str) -> int:
    """The MACs the whole NPU can do per cycle: the number in vela's accelerator name
    (ethos-u55-128: 128; ethos-u65-512: 2 cores x 256), what vela's ``Util% (MAC)`` divides by."""
    _check_target(target)
    return int(target.rsplit("-", 1)[1])


def default_system_config(target: str) -> str:
    """Default system config for the target's family (checked to exist in the bundled ini)."""
    return _FAMILY_DEFAULTS[family(target)][0]


def default_memory_mode(target: str) -> str:
    """Default memory mode for the target's family (checked to exist in the bundled ini)."""
    return _FAMILY_DEFAULTS[family(target)][1]


def resolve_config_path(config_ini: str | Path | None) -> Path:
    """The absolute path of ``config_ini`` (None -> vela's bundled Arm/vela.ini).

    Absolute matters: vela reads a two-part relative path such as ``cfg/my.ini`` as a file
    under its own ``config_files`` folder, not under the working directory.
    """
    if config_ini is None:
        return BUNDLED_CONFIG
    path = Path(config_ini).expanduser().resolve()
    if path.suffix != ".ini":
        raise ValueError(
            f"vela config file {path} must have the .ini extension (vela refuses others)"
        )
    if not path.is_file():
        raise ValueError(
            f"vela config file {path} does not exist; pass an existing .ini or None for "
            f"vela's bundled {BUNDLED_CONFIG}"
        )
    return path


def load_config(config_ini: str | Path | None = None) -> VelaConfig:
    """Read the system configs and memory modes an ``.ini`` defines (None -> bundled)."""
    path = resolve_config_path(config_ini)
    return _load_config(path, _stamp(path))


def _stamp(path: Path) -> tuple[int, int]:
    # Part of the cache keys, so an .ini edited while the process runs is read again.
    st = path.stat()
    return st.st_mtime_ns, st.st_size


@cache
def _load_config(path: Path, stamp: tuple[int, int]) -> VelaConfig:
    parser = configparser.ConfigParser()
    try:
        parser.read(path)
    except configparser.Error as exc:
        raise ValueError(f"vela config file {path} is not a valid .ini file: {exc}") from exc
    systems = tuple(
        s[len(SYSTEM_PREFIX) :] for s in parser.sections() if s.startswith(SYSTEM_PREFIX)
    )
    modes = tuple(s[len(MEMORY_PREFIX) :] for s in parser.sections() if s.startswith(MEMORY_PREFIX))
    if not systems or not modes:
        raise ValueError(
            f"vela config file {path} defines {len(systems)} [System_Config.*] and {len(modes)} "
            "[Memory_Mode.*] sections; it needs at least one of each"
        )
    return VelaConfig(path=path, system_configs=systems, memory_modes=modes)


def _check_target(target: str) -> None:
    if target not in accelerator_targets():
        raise ValueError(
            f"unknown Ethos-U target {target!r}; valid targets: {', '.join(accelerator_targets())}"
        )


def validate(
    target: str,
    system_config: str | None = None,
    memory_mode: str | None = None,
    config_ini: str | Path | None = None,
) -> MemoryLimits:
    """Check a (target, system config, memory mode, ini) choice and resolve its memory layout.

    None for ``system_config``/``memory_mode`` picks the family default. Raises ValueError
    naming the bad value and listing the valid ones, or repeating vela's reason when vela
    rejects the combination (e.g. a Dedicated_Sram mode on an Ethos-U55).
    """
    _check_target(target)
    config = load_config(config_ini)
    system_config = system_config or default_system_config(target)
    memory_mode = memory_mode or default_memory_mode(target)
    if system_config not in config.system_configs:
        raise ValueError(
            f"unknown system config {system_config!r} in {config.path}; valid system configs: "
            f"{', '.join(config.system_configs)}"
        )
    if memory_mode not in config.memory_modes:
        raise ValueError(
            f"unknown memory mode {memory_mode!r} in {config.path}; valid memory modes: "
            f"{', '.join(config.memory_modes)}"
        )
    return _memory_limits(target, system_config, memory_mode, config.path, _stamp(config.path))


@cache
def _memory_limits(
    target: str, system_config: str, memory_mode: str, path: Path, stamp: tuple[int, int]
) -> MemoryLimits:
    # vela prints "Info:" lines while resolving; keep them out of the caller's console.
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            arch = _vela_arch.ArchitectureFeatures(
                vela_config_files=[str(path)],
                accelerator_config=target,
                system_config=system_config,
                memory_mode=memory_mode,
                max_blockdep=_vela_arch.ArchitectureFeatures.MAX_BLOCKDEP,
                verbose_config=False,
                arena_cache_size=None,
            )
    except Exception as exc:  # vela's ConfigOptionError/CliOptionError carry the reason in str()
        hint = "Pick a memory mode whose areas this system provides"
        if family(target) == "U55":
            hint += " (an Ethos-U55 has no writable second port: use Shared_Sram or Sram_Only)"
        raise ValueError(
            f"vela rejects target {target} with system config {system_config} and memory mode "
            f"{memory_mode} from {path}: {str(exc).strip()}. {hint}."
        ) from exc
    # Sram_Only: vela moves the constants to a port it renames "OnChipFlash" (with SRAM timing);
    # physically they sit in the SRAM, so they count against it.
    section = SYSTEM_PREFIX + system_config
    raw_ports = {arch._read_config(section, f"axi{i}_port", None) for i in (0, 1)}
    const_area = arch.permanent_storage_mem_area.name
    const_in_sram = const_area == "Sram" or (
        const_area == "OnChipFlash" and "OnChipFlash" not in raw_ports
    )
    explicit_size = arch.arena_cache_size != arch.max_address_offset
    return MemoryLimits(
        target=target,
        system_config=system_config,
        memory_mode=memory_mode,
        config_path=path,
        core_clock_hz=float(arch.core_clock),
        const_area=const_area,
        arena_area=arch.feature_map_storage_mem_area.name,
        cache_area=arch.fast_storage_mem_area.name,
        arena_cache_size=int(arch.arena_cache_size) if explicit_size else None,
        address_limit=int(arch.max_address_offset),
        const_in_sram=bool(const_in_sram),
    )
