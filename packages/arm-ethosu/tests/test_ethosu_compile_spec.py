"""EthosUCompileSpec / ArmCompileSpecBuilder: validation against vela's configuration, defaults,
the implied TOSA spec, and what travels to the backend."""

import json

import arm_ethosu_test_graphs as graphs
import pytest
import torch

from arm_ethosu import (
    ArmCompileSpecBuilder,
    EthosUCompileSpec,
    EthosUPartitioner,
    EthosUQuantizer,
    accelerator_targets,
)
from arm_ethosu import vela_config as vc
from arm_quantizer import get_symmetric_a16w8_quantization_config
from arm_tosa_core import TosaCompileSpec

TINY_INI = graphs.tiny_vela_ini("""
[Memory_Mode.My_Mode]
const_mem_area=Axi1
arena_mem_area=Axi0
cache_mem_area=Axi0
""")


def _settings(spec):
    """What the backend reads: the stored settings plus the host ones (artifact folder, .ini path)."""
    return TosaCompileSpec.settings_from_list(spec.to_list())


@pytest.mark.parametrize("target,tosa,system,mode", [
    ("ethos-u55-128", "TOSA-1.0+INT+int16+int4+u55", "Ethos_U55_High_End_Embedded", "Shared_Sram"),
    ("ethos-u65-256", "TOSA-1.0+INT+int16+int4+u55", "Ethos_U65_High_End", "Dedicated_Sram_384KB"),
    ("ethos-u85-256", "TOSA-1.0+INT+int16+int4", "Ethos_U85_SYS_DRAM_Mid", "Dedicated_Sram_384KB"),
])  # fmt: skip
def test_defaults_and_implied_spec(target, tosa, system, mode):
    spec = EthosUCompileSpec(target)
    assert isinstance(spec, TosaCompileSpec)
    assert str(spec.tosa_spec) == tosa
    assert spec.tosa_spec.is_u55_subset == (tosa.endswith("+u55"))
    assert (spec.system_config, spec.memory_mode) == (system, mode)
    ethosu = _settings(spec)["ethosu"]
    assert ethosu["target"] == target and ethosu["system_config"] == system
    assert ethosu["memory_mode"] == mode and ethosu["config_ini"] is None
    assert _settings(spec)["tosa_spec"] == tosa and _settings(spec)["output_format"] == "vela"


def test_every_vela_target_is_accepted():
    for target in accelerator_targets():
        assert EthosUCompileSpec(target).target == target


def test_default_target_is_u55_128():
    assert EthosUCompileSpec().target == "ethos-u55-128"


@pytest.mark.parametrize("kwargs,listed", [
    ({"target": "ethos-u99-1"}, "ethos-u85-2048"),
    ({"system_config": "No_Such_System"}, "Ethos_U55_Deep_Embedded"),
    ({"memory_mode": "No_Such_Mode"}, "Dedicated_Sram_512KB"),
])  # fmt: skip
def test_invalid_names_list_valid_ones(kwargs, listed):
    with pytest.raises(ValueError) as err:
        EthosUCompileSpec(**kwargs)
    bad = next(iter(kwargs.values()))
    assert bad in str(err.value) and listed in str(err.value)


def test_u55_dedicated_sram_refused():
    with pytest.raises(ValueError, match="Shared_Sram or Sram_Only"):
        EthosUCompileSpec("ethos-u55-128", memory_mode="Dedicated_Sram")


def test_custom_ini(tmp_path):
    ini = tmp_path / "board.ini"
    ini.write_text(TINY_INI)
    spec = EthosUCompileSpec("ethos-u55-64", "My_Sys", "My_Mode", config_ini=ini)
    assert spec.config_ini == ini.resolve()
    assert _settings(spec)["vela_config_ini"] == str(ini.resolve())
    # the .pte keeps the file's name, not its folder (a path of the compiling machine)
    (entry,) = spec.to_list()
    assert json.loads(entry.value)["ethosu"]["config_ini"] == "board.ini"
    assert str(tmp_path).encode() not in bytes(entry.value)
    with pytest.raises(ValueError, match="My_Sys"):  # the family default is not in this file
        EthosUCompileSpec("ethos-u55-64", config_ini=ini)
    with pytest.raises(ValueError, match="does not exist"):
        EthosUCompileSpec(config_ini=tmp_path / "missing.ini")


def test_from_list_gives_the_spec_back(tmp_path):
    ini = tmp_path / "board.ini"
    ini.write_text(TINY_INI)
    spec = EthosUCompileSpec("ethos-u55-64", "My_Sys", "My_Mode", ["--optimise", "Size"], ini)
    spec.set_memory_limit(sram_bytes=65536, weight_bytes=1 << 20).include_tosa_graph(False)
    spec.dump_intermediate_artifacts_to(tmp_path / "out").dump_debug_info()
    specs = spec.to_list()
    back = TosaCompileSpec.from_list(specs)
    assert type(back) is EthosUCompileSpec and back.to_list() == specs and back.to_list().host == specs.host
    assert (back.target, back.system_config, back.memory_mode, back.config_ini, back.extra_flags) == (
        "ethos-u55-64", "My_Sys", "My_Mode", ini.resolve(), ["--optimise", "Size"])
    assert (back.sram_limit_bytes, back.weight_limit_bytes, back.tosa_graph_in_payload) == (65536, 1 << 20, False)
    assert back.get_intermediate_path() == str(tmp_path / "out") and back.get_debug_mode() == "json"
    # stored in a .pte, the specs no longer say where the .ini is: a clear error, not vela's
    with pytest.raises(ValueError, match="custom vela .ini"):
        TosaCompileSpec.from_list(list(specs))
    plain = EthosUCompileSpec("ethos-u85-256").to_list()
    assert TosaCompileSpec.from_list(list(plain)).to_list() == plain
    # int16 fully connected layers get 16-bit output multipliers on U85 only (regor keeps 15 bits of them)
    assert TosaCompileSpec.from_list(list(plain)).int16_fc_rescale16 and not back.int16_fc_rescale16
    with pytest.raises(ValueError, match="not a VgfCompileSpec|not a .*'s"):
        type("OtherSpec", (TosaCompileSpec,), {"output_format": "other"}).from_list(plain)


def test_extra_flags_string_and_list():
    old_style = EthosUCompileSpec(extra_flags="--output-format=raw --optimise Size")
    assert old_style.extra_flags == ["--optimise", "Size"]  # raw output is what the backend uses
    assert EthosUCompileSpec(extra_flags=["--optimise", "Size"]).extra_flags == ["--optimise", "Size"]
    with pytest.raises(ValueError, match="--accelerator-config"):
        EthosUCompileSpec(extra_flags="--accelerator-config ethos-u85-256")
    with pytest.raises(TypeError):
        EthosUCompileSpec(extra_flags=3)


def test_builder_matches_spec(tmp_path):
    spec = (ArmCompileSpecBuilder()
            .ethosu_compile_spec("ethos-u55-128", system_config="Ethos_U55_High_End_Embedded",
                                 memory_mode="Shared_Sram", extra_flags="--output-format=raw --debug-force-regor")
            .dump_intermediate_artifacts_to(tmp_path).build())  # fmt: skip
    assert isinstance(spec, EthosUCompileSpec)
    assert spec.extra_flags == ["--debug-force-regor"]
    assert spec.get_intermediate_path() == str(tmp_path)
    with pytest.raises(ValueError, match="ethosu_compile_spec"):
        ArmCompileSpecBuilder().build()
    with pytest.raises(ValueError, match="unknown Ethos-U target"):  # checked where it is written
        ArmCompileSpecBuilder().ethosu_compile_spec("ethos-u55")


def test_inherited_artifact_options(tmp_path):
    spec = EthosUCompileSpec().dump_intermediate_artifacts_to(tmp_path).dump_debug_info("json")
    settings = _settings(spec)
    assert settings["intermediate_path"] == str(tmp_path) and settings["debug_mode"] == "json"
    assert spec.get_intermediate_path() == str(tmp_path)


def test_memory_limit_and_host_graph_options():
    spec = EthosUCompileSpec().set_memory_limit(sram_bytes=65536)
    ethosu = _settings(spec)["ethosu"]
    assert ethosu["sram_limit_bytes"] == 65536 and ethosu["tosa_graph"] is False  # deployable by default
    assert _settings(EthosUCompileSpec().include_host_graph())["ethosu"]["tosa_graph"] is True
    assert _settings(EthosUCompileSpec().include_tosa_graph())["ethosu"]["tosa_graph"] is True  # older name
    assert _settings(ArmCompileSpecBuilder().ethosu_compile_spec("ethos-u55-128").build())["ethosu"][
        "tosa_graph"] is False
    with pytest.raises(ValueError, match="positive"):
        EthosUCompileSpec().set_memory_limit(sram_bytes=-1)


def test_graph_forms_default_per_family_and_travel_to_the_backend():
    """Collapsed TRANSPOSEs on U55/U65 (fewer vela cycles), as recorded on U85 (regor runs the collapsed one on
    the CPU); set_transpose_form overrides it and the choice survives to_list/from_list."""
    assert [EthosUCompileSpec(t).transpose_form for t in ("ethos-u55-128", "ethos-u65-256", "ethos-u85-256")] == [
        "collapsed", "collapsed", "as-is"]
    spec = EthosUCompileSpec("ethos-u55-128").set_transpose_form("as-is")
    assert TosaCompileSpec.from_list(spec.to_list()).transpose_form == "as-is"
    assert "transpose_form='as-is'" in repr(spec)
    assert spec.set_transpose_form(None).transpose_form == "collapsed"  # None: the target's default again
    with pytest.raises(ValueError, match="transpose form"):
        EthosUCompileSpec("ethos-u85-256").set_transpose_form("diagonal")
    # the stride-1 max pool: split on U55 only (fewer cycles there; more on U65 and U85)
    assert [EthosUCompileSpec(t).max_pool_form for t in ("ethos-u55-64", "ethos-u65-256", "ethos-u85-256")] == [
        "separable", "whole", "whole"]
    spec = EthosUCompileSpec("ethos-u55-128").set_max_pool_form("whole")
    assert TosaCompileSpec.from_list(spec.to_list()).max_pool_form == "whole" and "max_pool_form='whole'" in repr(spec)
    with pytest.raises(ValueError, match="max pool form"):
        spec.set_max_pool_form("diagonal")


def test_partitioner_and_quantizer_need_an_ethosu_spec():
    with pytest.raises(TypeError, match="EthosUCompileSpec"):
        EthosUPartitioner(TosaCompileSpec("TOSA-1.0+INT"))
    with pytest.raises(TypeError, match="EthosUCompileSpec"):
        EthosUQuantizer(TosaCompileSpec("TOSA-1.0+INT"))
    assert EthosUPartitioner(EthosUCompileSpec("ethos-u85-256")).backend_id == "EthosUBackend"


def test_quantizer_is_int8_by_default_and_takes_a16w8():
    quantizer = EthosUQuantizer(EthosUCompileSpec("ethos-u85-256"))
    assert quantizer.global_config.activation_dtype == torch.int8  # quantizes the whole model by default
    assert EthosUCompileSpec("ethos-u55-128").tosa_spec.support_extension("int16")  # vela runs EXT-INT16
    quantizer.set_module_name("features.2", get_symmetric_a16w8_quantization_config())
    quantizer.set_global(get_symmetric_a16w8_quantization_config())
    assert quantizer.global_config.activation_dtype == torch.int16


def test_family_defaults_come_from_the_bundled_ini():
    config = vc.load_config(None)
    for target in ("ethos-u55-32", "ethos-u65-512", "ethos-u85-2048"):
        spec = EthosUCompileSpec(target)
        assert spec.system_config in config.system_configs and spec.memory_mode in config.memory_modes
