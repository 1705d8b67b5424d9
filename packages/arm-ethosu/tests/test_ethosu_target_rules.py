"""Ethos-U constraints about one op family live on that family's registry entry (`target_rule`)."""

from __future__ import annotations

import pytest
import torch

from arm_ethosu.constraints import U55_U65, ethosu_reason
from arm_tosa_core import registry

#: the families vela cannot place on Ethos-U55/U65 at all, with the TOSA operators they lower to
NOT_IN_U55_SET = {"compare": "EQUAL", "ne": "EQUAL", "logical": "LOGICAL_AND", "where": "SELECT",
                  "any_all": "REDUCE_ANY", "embedding": "GATHER", "index_select": "GATHER",
                  "index_tensor": "GATHER"}


class _Add(torch.nn.Module):
    def forward(self, a, b):
        return a + b


def _add_node() -> torch.fx.Node:
    ep = torch.export.export(_Add(), (torch.randn(2, 3), torch.randn(2, 3)))
    return next(n for n in ep.graph.nodes if n.op == "call_function")


@pytest.mark.parametrize("family,operator", sorted(NOT_IN_U55_SET.items()))
def test_u55_u65_rules_are_attached_to_their_families(family, operator):
    entry = registry.family(family)
    for target in U55_U65:
        reasons = [rule(None, target.removeprefix("ethos-").upper()) for rule in entry.target_rules[target][:1]]
        assert operator in reasons[0] and "Ethos-U55/U65 do not run" in reasons[0]
    assert "ethos-u85" not in entry.target_rules


def test_an_attached_rule_decides_for_its_target_only():
    node = _add_node()
    assert ethosu_reason(node, "U85") is None
    rule = registry.target_rule("ethos-u85", "add")(lambda n, family: f"test rule for {family}")
    try:
        assert ethosu_reason(node, "U85") == "test rule for U85"
        assert ethosu_reason(node, "U55") is None  # attached for U85 only
    finally:
        rules = registry.family("add").target_rules
        rules["ethos-u85"] = tuple(r for r in rules["ethos-u85"] if r is not rule)


def test_a_rule_for_an_unknown_family_fails_at_import():
    with pytest.raises(ValueError, match="no op family named 'meen'|meen"):
        registry.target_rule(U55_U65, "meen")
