"""Op family: resize (rules to come)."""
