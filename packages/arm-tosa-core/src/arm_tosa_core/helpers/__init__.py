"""Helpers the lowering rules share, below `ops/` and the registry.

Integer math (`qparams`, `intmath`, `table16`), shapes and windows (`shapes`, `windows`,
`convolution`), reductions (`reduce`), composed float math (`composed`) and argument reading
(`common`). A helper imports only the builder, the context and other helpers, never `ops/` or the
registry, so every op family can use any helper without an import cycle (tests/test_layering.py).
"""
