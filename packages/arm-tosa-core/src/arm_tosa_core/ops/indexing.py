"""Op family: indexing (rules to come)."""
