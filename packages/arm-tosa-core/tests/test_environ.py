"""environ_set: variables set for a block, then each put back (or unset) as it was, also after an error."""

import os

import pytest

from arm_tosa_core.environ import environ_set


def test_environ_set_restores_set_and_unset_variables(monkeypatch):
    monkeypatch.setenv("ARM_TEST_KEPT", "old")
    monkeypatch.delenv("ARM_TEST_NEW", raising=False)
    with pytest.raises(RuntimeError), environ_set({"ARM_TEST_KEPT": "new", "ARM_TEST_NEW": "1"}) as env:
        assert (os.environ["ARM_TEST_KEPT"], os.environ["ARM_TEST_NEW"]) == ("new", "1") and env["ARM_TEST_NEW"] == "1"
        raise RuntimeError
    assert os.environ["ARM_TEST_KEPT"] == "old" and "ARM_TEST_NEW" not in os.environ
