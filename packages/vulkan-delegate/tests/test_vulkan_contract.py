"""The registry, the payload and the runtime agree; bad input gives clear errors, never a crash."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from executorch.runtime import Runtime
from torch import nn

from vulkan_delegate import BACKEND_ID, VulkanPartitioner, opcodes, partition_report
from vulkan_delegate.registry import shader_names
from vulkan_delegate.runtime import runtime_shader_names


def test_registry_and_runtime_embed_the_same_shaders():
    assert shader_names() == runtime_shader_names()


def test_backend_id_is_ours():
    assert BACKEND_ID != "VulkanBackend"


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


def _pte(vk_lower, **kw) -> bytes:
    return bytes(vk_lower(Small().eval(), (torch.randn(1, 3, 8, 8),), **kw).to_executorch().buffer)


def test_payload_stores_each_constant_once(vk_lower):
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(64, 64), requires_grad=False)

        def forward(self, x):
            return x @ self.w + x @ self.w.clone()

    edge = vk_lower(Tied().eval(), (torch.randn(2, 64),))
    size = partition_report(edge).delegates[0].payload_bytes
    assert 64 * 64 * 4 <= size < 2 * 64 * 64 * 4


def _load(pte: bytes):
    return Runtime.get().load_program(pte).load_method("forward")


@pytest.mark.parametrize("offset,value", [(0, b"XXXX"), (4, b"\x63\x00\x00\x00"), (16, b"\xff\xff\xff\x7f"),
                                          (24, b"\xff\xff\xff\xff")])
def test_corrupt_payload_is_an_error(vk_lower, offset, value):
    pte = bytearray(_pte(vk_lower))
    at = pte.find(b"VKDG")
    assert at >= 0
    pte[at + offset:at + offset + len(value)] = value
    with pytest.raises(RuntimeError):
        _load(bytes(pte))


def test_truncated_and_fuzzed_payloads_never_crash(vk_lower):
    code = ("import sys, torch; from vulkan_delegate.runtime import load_runtime; load_runtime()\n"
            "from executorch.runtime import Runtime\n"
            "pte = bytearray(open(sys.argv[1], 'rb').read()); at = pte.find(b'VKDG'); ok = 0\n"
            "for i in range(24):\n"
            "    bad = bytearray(pte); bad[at + 12 + 7 * i] ^= 0xA5\n"
            "    try:\n"
            "        m = Runtime.get().load_program(bytes(bad)).load_method('forward')\n"
            "        m.execute([torch.randn(1, 3, 8, 8)]); ok += 1\n"
            "    except RuntimeError:\n"
            "        pass\n"
            "print('survived', ok)\n")
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"vk_fuzz_{os.getpid()}.pte")
    with open(path, "wb") as f:
        f.write(_pte(vk_lower))
    proc = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "survived" in proc.stdout


def test_unsupported_dtype_stays_on_cpu_with_reason(vk_lower):
    class IntAdd(nn.Module):
        def forward(self, x, i):
            return x + 1, i * 2

    edge = vk_lower(IntAdd(), (torch.randn(3), torch.arange(3)))
    report = partition_report(edge)
    reasons = {c.target: c.reason for c in report.cpu_nodes}
    assert "int64" in reasons["aten.mul.Tensor"], str(report)
    assert "aten_add_tensor" in report.delegates[0].nodes


def test_blocklist_and_allowlist(vk_lower):
    edge = vk_lower(Small().eval(), (torch.randn(1, 3, 8, 8),), operator_blocklist=[torch.ops.aten.relu.default])
    assert any("blocklist" in c.reason for c in partition_report(edge).cpu_nodes)
    edge = vk_lower(Small().eval(), (torch.randn(1, 3, 8, 8),), operator_allowlist=["aten.convolution.default"])
    report = partition_report(edge)
    assert "aten_convolution_default" in report.delegates[0].nodes
    assert {c.target for c in report.cpu_nodes} >= {"aten.relu.default", "aten.mean.dim"}
    assert all("allowlist" in c.reason for c in report.cpu_nodes)


@pytest.mark.parametrize("fp16", [False, True])
def test_pte_is_reproducible(vk_lower, fp16):
    """Two builds of the same model give the same .pte bytes: nothing host- or run-specific inside."""
    model, x = Small().eval(), torch.randn(1, 3, 8, 8)
    first, second = (vk_lower(model, (x,), fp16).to_executorch().buffer for _ in range(2))
    assert first == second


def test_partitioning_helpers_are_the_tosa_delegates():
    """One aten key, one CPU-reason record and one PartitionReport for both delegates (issue 24)."""
    import vulkan_delegate
    from arm_tosa_core import delegation, report
    from vulkan_delegate import partitioner, registry

    assert registry.aten_key is partitioner.aten_key is delegation.aten_key
    assert partitioner.record_reason is delegation.record_reason
    assert vulkan_delegate.partition_report is report.partition_report


def test_unknown_compile_option_is_named():
    with pytest.raises(ValueError, match="force_fp16"):
        VulkanPartitioner({"fp16": True})


@pytest.mark.parametrize("var", ["RUNTIME_CPP_VK_DEVICE", "VKDG_DEVICE"])  # the shared name and its alias
def test_device_override_and_no_device_names_the_fix(var, monkeypatch, capfd):
    """In-process: the runtime reads the override each time it looks for a device (vkdg_device_name
    creates a fresh one), so only device_name()'s per-process answer needs resetting."""
    from vulkan_delegate import VulkanRuntimeError, runtime

    for name in ("RUNTIME_CPP_VK_DEVICE", "VKDG_DEVICE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(runtime, "_device", None)
    monkeypatch.setenv(var, "llvmpipe")
    assert "llvmpipe" in runtime.device_name()
    monkeypatch.setattr(runtime, "_device", None)
    monkeypatch.setenv(var, "no-such-gpu")
    capfd.readouterr()
    with pytest.raises(VulkanRuntimeError, match="apt-get install"):
        runtime.device_name()
    assert f"{var}=no-such-gpu" in capfd.readouterr().err


def test_run_on_vulkan_reuses_the_loaded_method(vk_lower, tmp_path):
    """A .pte path is loaded once per (path, mtime, size); bytes once per content; a rewritten file is
    loaded again."""
    from vulkan_delegate import run_on_vulkan, runtime

    runtime.clear_method_cache()
    x = torch.randn(1, 3, 8, 8)
    path = tmp_path / "small.pte"
    path.write_bytes(_pte(vk_lower))
    y = run_on_vulkan(path, x)
    first = list(runtime._methods.values())
    assert len(first) == 1
    assert torch.allclose(run_on_vulkan(str(path), x), y) and list(runtime._methods.values()) == first
    other = Small().eval()
    path.write_bytes(bytes(vk_lower(other, (x,)).to_executorch().buffer))
    os.utime(path, ns=(0, path.stat().st_mtime_ns + 10**9))  # a new mtime even on a coarse clock
    assert torch.allclose(run_on_vulkan(path, x), other(x), rtol=1e-4, atol=1e-5)
    assert len(runtime._methods) == 2


RUNTIME_SRC = Path(__file__).resolve().parents[2] / "runtime-cpp" / "src" / "vulkan_delegate"


def test_generated_opcode_files_are_current():
    """shaders/opcodes.glsl and opcodes.h are what vulkan_delegate/opcodes.py generates now (after an
    edit of an op table: python -m vulkan_delegate.opcodes packages/runtime-cpp/src/vulkan_delegate)."""
    for rel, text in opcodes.generated_files().items():
        assert (RUNTIME_SRC / rel).read_text() == text, f"{rel} is stale: regenerate it"


@pytest.mark.parametrize("shader", sorted(opcodes.OP_TABLES))
def test_every_opcode_has_a_shader_branch(shader):
    """Each op of a table is handled by name in its shader or a file it includes (`case UNARY_EXP:` ...), and
    no shader branch compares the op word with a bare number."""
    src = (RUNTIME_SRC / "shaders" / f"{shader}.comp").read_text()
    src += "".join((RUNTIME_SRC / "shaders" / inc).read_text() for inc in re.findall(r'#include "(\w+\.glsl)"', src)
                   if inc != "opcodes.glsl")
    for op in opcodes.OP_TABLES[shader]:
        assert re.search(rf"\b{shader.upper()}_{op.upper()}\b", src), f"{shader}.comp does not handle {op}"
    assert not re.search(r"case\s+\d+\s*:|op\s*==\s*\d", src), f"{shader}.comp matches a numeric op code"


class Exp(nn.Module):
    def forward(self, x):
        return torch.exp(x)


def test_unknown_opcode_is_refused_at_load(vk_lower, monkeypatch):
    """A payload whose unary op code is outside the runtime's table fails to load (an Error), instead
    of running as some other op."""
    from vulkan_delegate.ops import elementwise

    monkeypatch.setitem(opcodes.OP_TABLES, "unary", (*opcodes.OP_TABLES["unary"], "not_in_the_runtime"))
    monkeypatch.setitem(elementwise._SIMPLE, torch.ops.aten.exp.default, "not_in_the_runtime")
    x = torch.randn(8)
    pte = bytes(vk_lower(Exp(), (x,)).to_executorch().buffer)
    with pytest.raises(RuntimeError):
        _load(pte).execute([x])


def test_opcode_names_are_checked():
    with pytest.raises(KeyError, match="its ops: affine"):
        opcodes.opcode("unary", "reciprocol")



@pytest.mark.parametrize("fp16", [False, True])
def test_constants_lie_inside_the_blob(fp16):
    """Each constant's declared bytes are stored, also a 1-element fp16 constant (2 bytes, bound as a
    whole 32-bit word)."""
    from vulkan_delegate.graph import F16, F32, Graph

    g = Graph(compute_dtype=F16 if fp16 else F32)
    for value in (torch.randn(3, 3), torch.randn(1)):
        g.constant(value)
    for t in g.tensors:
        assert t.storage.offset + t.storage.nbytes_max <= len(g.constants)


def test_fp16_one_element_bias_loads_and_runs(vk_check):
    """force_fp16 with a 1-element conv bias as the last constant (the payload used to end 2 bytes
    short of it: "tensor outside its buffer" at load)."""
    torch.manual_seed(0)
    vk_check(nn.Conv2d(3, 1, 3).eval(), (torch.randn(1, 3, 6, 6),), fp16=True)


def test_claimed_node_whose_lowering_fails_stays_on_cpu(vk_lower, monkeypatch):
    """The partitioner lowers every node its rules accept on trial: one whose rule raises stays on the
    CPU with the failure as its reason, and to_edge_transform_and_lower does not raise."""
    from vulkan_delegate.registry import lookup

    fam = lookup(torch.ops.aten.relu.default)

    def fails(ctx, node):
        raise ValueError("a case the rule cannot lower")

    monkeypatch.setattr(fam, "lower", fails)
    edge = vk_lower(Small().eval(), (torch.randn(1, 3, 8, 8),))
    reasons = {c.target: c.reason for c in partition_report(edge).cpu_nodes}
    assert "a case the rule cannot lower" in reasons.get("aten.relu.default", ""), reasons
