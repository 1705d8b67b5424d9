"""One family = one typed entry: what the registry accepts, and that no table elsewhere names a family
the registry does not have.

A family's properties are `OpEntry` fields set through `register_op` (a misspelt keyword is an error,
not a silently ignored flag); target packages attach their per-family checks with `target_rule`, which
refuses a family that does not exist. Any set or dict keyed by family names that still lives outside
the registry (found by scanning every package's source) must name only registered families.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from arm_tosa_core import registry

PACKAGES = Path(__file__).resolve().parents[2]
# The Vulkan delegate has its own op table (its names are not TOSA families).
NOT_SCANNED = {"vulkan-delegate"}


def test_register_op_rejects_an_unknown_keyword():
    before = len(registry.entries())
    with pytest.raises(TypeError, match="preserve_for_sped") as err:
        registry.register_op("typo_family", [torch.ops.aten.erfinv.default], preserve_for_sped=True)
    assert "preserve_for_speed" in str(err.value)  # the valid keywords are listed
    assert "typo_family" in str(err.value)
    assert len(registry.entries()) == before
    with pytest.raises(TypeError):  # everything but name and targets is keyword-only
        registry.register_op("typo_family", [torch.ops.aten.erfinv.default], None)


def test_register_op_keywords_are_entry_fields():
    fields = set(registry.OpEntry.__dataclass_fields__)
    assert set(registry.REGISTER_OP_KEYWORDS) <= fields
    assert fields - set(registry.REGISTER_OP_KEYWORDS) == {"name", "targets", "lower", "int_lower",
                                                             "target_rules"}


def test_fp_integer_rule_needs_fp_index_math():
    with pytest.raises(TypeError, match="fp_index_math"):
        registry.register_op("typo_family", [torch.ops.aten.erfinv.default],
                             fp_integer_rule=lambda node, entry, spec: None)


def test_target_rule_rejects_an_unknown_family():
    with pytest.raises(ValueError, match="no op family named 'nosuch_family'|nosuch_family"):
        registry.target_rule("test-target", "add", "nosuch_family")
    assert "test-target" not in registry.family("add").target_rules  # nothing attached


def test_target_rule_attaches_in_order():
    def first(node, family):
        return None

    def second(node, family):
        return "no"

    try:
        registry.target_rule("test-target", "add", "mul")(first)
        registry.target_rule(("test-target", "test-target-2"), "add")(second)
        assert registry.family("add").target_rules["test-target"] == (first, second)
        assert registry.family("add").target_rules["test-target-2"] == (second,)
        assert registry.family("mul").target_rules["test-target"] == (first,)
    finally:
        for name in ("add", "mul"):
            for target in ("test-target", "test-target-2"):
                registry.family(name).target_rules.pop(target, None)


def test_family_lookup_names_the_registered_ones():
    assert registry.family("add").name == "add"
    with pytest.raises(KeyError, match="registered families: .*softmax"):
        registry.family("sofmax")


def family_tables(source: str, families: set[str]) -> list[tuple[int, set[str]]]:
    """(line, names) of every set or dict literal in `source` whose string members are mostly family
    names: a table keyed by family (a minority of matches is a table of something else)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Set):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = node.keys
        else:
            continue
        names = {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}
        if len(names) != len(items) or len(names) < 2:
            continue
        hits = names & families
        if len(hits) >= 2 and 2 * len(hits) > len(names):
            found.append((node.lineno, names))
    return found


def test_family_table_scan_flags_a_typo():
    families = {"view", "permute", "transpose"}
    source = 'A = {"view", "permute", "transpse"}\nB = {"x": 1, "y": 2}\nC = {"view": 1, "conv2d": 2, "z": 3}\n'
    tables = family_tables(source, families)
    assert [line for line, _ in tables] == [1]
    assert tables[0][1] - families == {"transpse"}


def test_every_name_keyed_family_table_is_a_subset_of_the_registry():
    families = {e.name for e in registry.entries()}
    seen, wrong = [], []
    for package in sorted(p for p in PACKAGES.iterdir() if (p / "pyproject.toml").exists()):
        if package.name in NOT_SCANNED:
            continue
        for path in sorted(list((package / "src").rglob("*.py")) + list((package / "tests").rglob("*.py"))):
            for line, names in family_tables(path.read_text(), families):
                where = f"{path.relative_to(PACKAGES)}:{line}"
                seen.append(where)
                if names - families:
                    wrong.append(f"{where}: {sorted(names - families)} are not registry families")
    assert not wrong, "\n".join(wrong)
    # the scan finds the tables known to exist (so it cannot pass by finding nothing)
    assert any(w.startswith("arm-ethosu/src/arm_ethosu/constraints.py") for w in seen), seen
    assert any(w.startswith("arm-tosa-core/tests/op_sweep.py") for w in seen), seen
