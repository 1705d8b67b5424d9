"""convert_tosa_to_vgf: success writes and returns a VGF; failures say what, how to reproduce, where."""

import shlex
import subprocess

import pytest
import vgf_test_graphs as graphs

from arm_vgf.converter import VgfConversionError, convert_tosa_to_vgf
from arm_vgf.vgf_file import read_vgf


def test_converts_and_keeps_files(tmp_path):
    graph = graphs.add_fp32()
    vgf = convert_tosa_to_vgf(graph.tosa, tmp_path / "work")
    assert (tmp_path / "work" / "model.vgf").read_bytes() == vgf
    assert (tmp_path / "work" / "model.tosa").read_bytes() == graph.tosa
    assert len(read_vgf(vgf).inputs) == 2


def test_invalid_bytes_error_has_message_command_and_kept_file(tmp_path):
    junk = b"\x00\x01 this is not a TOSA flatbuffer \xff" * 4
    with pytest.raises(VgfConversionError) as info:
        convert_tosa_to_vgf(junk, tmp_path)
    err = info.value
    assert "error" in err.converter_message.lower()
    assert "not a TOSA flatbuffer" in err.converter_message  # our hint: no TOSA identifier
    assert err.tosa_path.read_bytes() == junk
    assert err.command[0].endswith("model-converter") and str(err.tosa_path) in err.command
    text = str(err)
    assert err.command_line in text and str(err.tosa_path) in text
    # The quoted command really reproduces the failure.
    assert subprocess.run(shlex.split(err.command_line), capture_output=True).returncode != 0


def test_empty_input_is_an_error_even_though_the_converter_exits_0(tmp_path):
    with pytest.raises(VgfConversionError, match="no VGF written"):
        convert_tosa_to_vgf(b"", tmp_path)


def test_bad_flag_reports_the_converter_message(tmp_path):
    with pytest.raises(VgfConversionError, match="Unknown argument: --no-such-flag") as info:
        convert_tosa_to_vgf(graphs.add_fp32().tosa, tmp_path, ["--no-such-flag"])
    assert info.value.command[-1] == "--no-such-flag"


def test_flags_given_as_one_string_are_refused(tmp_path):
    with pytest.raises(TypeError, match="list of arguments"):
        convert_tosa_to_vgf(graphs.add_fp32().tosa, tmp_path, "--require-static-shape")
