"""Op family: attention (rules to come)."""
