"""Op family: normalization (rules to come)."""
