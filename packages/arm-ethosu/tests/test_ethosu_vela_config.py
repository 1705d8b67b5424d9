"""Target/system/memory-mode discovery from vela's own configuration, and validation errors."""

import contextlib
import io

import arm_ethosu_test_graphs as graphs
import pytest
from ethosu.vela import vela
from ethosu.vela.architecture_features import Accelerator

from arm_ethosu import vela_config as vc

TINY_INI = graphs.tiny_vela_ini("""
[Memory_Mode.Base]
const_mem_area=Axi1
arena_mem_area=Axi0
cache_mem_area=Axi0

[Memory_Mode.Tiny_Sram]
inherit=Memory_Mode.Base
arena_cache_size=512
""")


def _vela_list_configs(path: str) -> list[str]:
    """Section names as vela's own ``--list-configs`` prints them."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert vela.main(["--list-configs", path]) == 0
    return [line.strip() for line in buf.getvalue().splitlines()[1:] if line.strip()]


def test_targets_are_vela_accelerators():
    assert vc.accelerator_targets() == tuple(a.value for a in Accelerator)
    assert {"ethos-u55-128", "ethos-u65-256", "ethos-u85-256"} <= set(vc.accelerator_targets())
    assert [vc.family(t) for t in ("ethos-u55-32", "ethos-u65-512", "ethos-u85-2048")] == [
        "U55",
        "U65",
        "U85",
    ]


def test_bundled_config_matches_vela_list_configs():
    cfg = vc.load_config()
    assert cfg.path == vc.BUNDLED_CONFIG and cfg.path.is_file()
    sections = _vela_list_configs(str(cfg.path))
    ours = [vc.SYSTEM_PREFIX + s for s in cfg.system_configs]
    ours += [vc.MEMORY_PREFIX + m for m in cfg.memory_modes]
    assert sorted(ours) == sorted(sections)
    assert "Shared_Sram" in cfg.memory_modes and "Dedicated_Sram_384KB" in cfg.memory_modes


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u65-256", "ethos-u85-256"])
def test_family_defaults_exist_and_validate(target):
    cfg = vc.load_config()
    system, mode = vc.default_system_config(target), vc.default_memory_mode(target)
    assert system in cfg.system_configs and mode in cfg.memory_modes
    limits = vc.validate(target)
    assert (limits.system_config, limits.memory_mode) == (system, mode)


def test_memory_limits_from_vela_ini():
    u55 = vc.validate("ethos-u55-128", "Ethos_U55_High_End_Embedded", "Shared_Sram")
    assert (u55.const_area, u55.arena_area, u55.cache_area) == ("OffChipFlash", "Sram", "Sram")
    assert u55.arena_cache_size is None and u55.sram_limit is None and not u55.spilling
    assert u55.address_limit == 2**32 and u55.core_clock_hz == 500e6
    for mode, size in [("Dedicated_Sram_256KB", 262144), ("Dedicated_Sram_384KB", 393216),
                       ("Dedicated_Sram_512KB", 524288)]:  # fmt: skip
        lim = vc.validate("ethos-u85-256", "Ethos_U85_SYS_DRAM_Mid", mode)
        assert lim.spilling and lim.arena_area == "Dram" and lim.cache_area == "Sram"
        assert lim.sram_limit == lim.arena_cache_size == size
        assert lim.address_limit == 2**40
    sram_only = vc.validate("ethos-u55-128", None, "Sram_Only")
    assert sram_only.const_in_sram and sram_only.arena_area == "Sram"


@pytest.mark.parametrize(
    "args, bad, listed",
    [
        (("ethos-u99-1",), "'ethos-u99-1'", "ethos-u55-128, ethos-u55-256"),
        (("ethos-u55-128", "Nope_Sys"), "'Nope_Sys'", "Ethos_U55_Deep_Embedded"),
        (("ethos-u65-256", None, "Nope_Mode"), "'Nope_Mode'", "Shared_Sram, Dedicated_Sram"),
    ],
)
def test_validate_lists_valid_names(args, bad, listed):
    with pytest.raises(ValueError) as err:
        vc.validate(*args)
    assert bad in str(err.value) and listed in str(err.value)


def test_u55_dedicated_sram_is_refused_with_vela_reason():
    with pytest.raises(ValueError, match="arena_mem_area=OffChipFlash.*Shared_Sram or Sram_Only"):
        vc.validate("ethos-u55-128", "Ethos_U55_High_End_Embedded", "Dedicated_Sram_384KB")


def test_custom_ini_with_inherit(tmp_path):
    ini = tmp_path / "board.ini"
    ini.write_text(TINY_INI)
    cfg = vc.load_config(ini)
    assert cfg.system_configs == ("My_Sys",) and cfg.memory_modes == ("Base", "Tiny_Sram")
    lim = vc.validate("ethos-u55-64", "My_Sys", "Tiny_Sram", ini)
    assert lim.arena_cache_size == 512 and lim.sram_limit == 512  # inherited areas, own size
    assert lim.core_clock_hz == 400e6 and lim.config_path == ini.resolve()
    with pytest.raises(ValueError, match="valid system configs: My_Sys"):
        vc.validate("ethos-u55-64", "Ethos_U55_High_End_Embedded", "Tiny_Sram", ini)
    ini.write_text(TINY_INI.replace("arena_cache_size=512", "arena_cache_size=2048"))
    assert vc.validate("ethos-u55-64", "My_Sys", "Tiny_Sram", ini).arena_cache_size == 2048


def test_bad_ini_files(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        vc.load_config(tmp_path / "missing.ini")
    txt = tmp_path / "board.txt"
    txt.write_text(TINY_INI)
    with pytest.raises(ValueError, match=r"\.ini extension"):
        vc.load_config(txt)
    empty = tmp_path / "empty.ini"
    empty.write_text("[Something]\nx=1\n")
    with pytest.raises(ValueError, match=r"0 \[System_Config\.\*\] and 0 \[Memory_Mode\.\*\]"):
        vc.load_config(empty)
    dup = tmp_path / "dup.ini"
    dup.write_text("[Memory_Mode.A]\nx=1\nx=2\n")
    with pytest.raises(ValueError, match="not a valid .ini file.*'x' in section 'Memory_Mode.A'"):
        vc.load_config(dup)
