"""Op family: reductions (rules to come)."""
