"""Op family: pooling (rules to come)."""
