"""arm_tosa_core's internal layers, as a test (like test_no_backend_imports.py for package boundaries).

    helpers/  (integer math, shapes, windows, reductions: builder + context only)
      <- registry
        <- ops/*  (one module per group of families; each imports helpers, builder, context, registry)
          <- lowering, partitioner, ... (above the families)

The import graph is read from the source with `ast` (module-level and function-level imports alike, so
an import pushed into a function body to hide a cycle still counts). Families load once, from the
package's `__init__`; no module may import a module that (directly or not) imports it back.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "arm_tosa_core"
OPS = "arm_tosa_core.ops"
HELPERS = "arm_tosa_core.helpers"
#: what an op module may import from the package (besides helpers)
OPS_MAY_IMPORT = {"arm_tosa_core.builder", "arm_tosa_core.context", "arm_tosa_core.registry",
                  "arm_tosa_core.layout", "arm_tosa_core.errors", "arm_tosa_core.specification"}
#: what a helper may import from the package (besides other helpers)
HELPERS_MAY_IMPORT = {"arm_tosa_core.builder", "arm_tosa_core.context", "arm_tosa_core.layout",
                      "arm_tosa_core.errors", "arm_tosa_core.specification", "arm_tosa_core.op_dtypes",
                      "arm_tosa_core.delegation"}


def module_names(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package at `root`."""
    names = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the package's modules it imports (anywhere in its source). Importing `a.b.c` also
    imports the sub-package `a.b` (its `__init__` runs first), unless the importer is inside `a.b`;
    the root package is left out of that rule: its `__init__` is the load point above everything."""
    modules = module_names(root)
    package = root.name
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = module.split(".") if is_package else module.split(".")[:-1]
                    parts = parts[:len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
                targets = subs if len(subs) == len(node.names) else [base] + subs
            for target in targets:
                while target and target not in modules:  # `import a.b.c.attr` style: the module part
                    target = target.rpartition(".")[0]
                if not target or not target.startswith(package):
                    continue
                graph[module].add(target)
                parent = target.rpartition(".")[0]
                while parent and parent != package:  # a sub-package's __init__ runs first
                    if not module.startswith(parent + "."):  # (unless it is the importer's own)
                        graph[module].add(parent)
                    parent = parent.rpartition(".")[0]
    for module in graph:
        graph[module].discard(module)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan), sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Imports that break the layering in the module docstring."""
    bad = []
    for module, imports in sorted(graph.items()):
        if module.startswith(OPS + ".") or module == OPS:
            allowed = OPS_MAY_IMPORT | ({OPS} if module != OPS else set())
            for target in sorted(imports):
                if target.startswith(HELPERS) or target in allowed:
                    continue
                if module == OPS and target.startswith(OPS + "."):  # ops/__init__ loads the families
                    continue
                bad.append(f"{module} imports {target} (op modules import only helpers, the builder, "
                           "the context and the registry)")
        elif module.startswith(HELPERS):
            for target in sorted(imports):
                if not (target.startswith(HELPERS) or target in HELPERS_MAY_IMPORT):
                    bad.append(f"{module} imports {target} (helpers sit below ops/ and the registry)")
    return bad


def test_arm_tosa_core_has_no_import_cycle():
    assert cycles(import_graph(SRC)) == []


def test_ops_and_helpers_keep_their_layers():
    assert layer_violations(import_graph(SRC)) == []


def test_the_graph_sees_the_real_structure():
    graph = import_graph(SRC)
    assert "arm_tosa_core.registry" in graph["arm_tosa_core.ops.elementwise"]
    assert "arm_tosa_core.helpers.common" in graph["arm_tosa_core.ops.elementwise"]
    assert "arm_tosa_core.ops" in graph["arm_tosa_core"]
    assert len([m for m in graph if m.startswith(OPS + ".")]) >= 20


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "arm_tosa_core"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_checks_catch_a_cycle_and_a_layer_break(tmp_path):
    """Self-test: the registry loading the ops lazily while an op imports the registry is a cycle
    (even from a function body), and so is an op reaching into another op or the lowering."""
    root = _package(tmp_path, {
        "__init__.py": "from . import ops\n",
        "registry.py": "def lookup():\n    from . import ops  # lazily\n",
        "lowering.py": "from . import registry\n",
        "builder.py": "",
        "ops/__init__.py": "from . import conv, pooling\n",
        "ops/conv.py": "from ..registry import lookup\nfrom .pooling import window\n",
        "ops/pooling.py": "from ..registry import lookup\n\ndef f():\n    from ..lowering import x\n",
        "helpers/__init__.py": "",
        "helpers/intmath.py": "from ..builder import T\nfrom ..registry import lookup\n",
    })
    graph = import_graph(root)
    assert graph["arm_tosa_core.ops.conv"] == {"arm_tosa_core.registry", "arm_tosa_core.ops.pooling"}
    assert graph["arm_tosa_core.registry"] == {"arm_tosa_core.ops"}  # the lazy import counts
    assert cycles(graph) == [["arm_tosa_core.lowering", "arm_tosa_core.ops", "arm_tosa_core.ops.conv",
                              "arm_tosa_core.ops.pooling", "arm_tosa_core.registry"]]
    bad = layer_violations(graph)
    assert any("ops.conv imports arm_tosa_core.ops.pooling" in b for b in bad)
    assert any("ops.pooling imports arm_tosa_core.lowering" in b for b in bad)
    assert any("helpers.intmath imports arm_tosa_core.registry" in b for b in bad)
    # the layered form of the same package passes
    fixed = _package(tmp_path / "fixed", {
        "__init__.py": "from . import ops\n",
        "registry.py": "from .helpers.intmath import T\n",
        "builder.py": "",
        "ops/__init__.py": "from . import conv, pooling\n",
        "ops/conv.py": "from ..registry import lookup\nfrom ..helpers.windows import window\n",
        "ops/pooling.py": "from ..registry import lookup\nfrom ..helpers.windows import window\n",
        "helpers/__init__.py": "",
        "helpers/intmath.py": "from ..builder import T\n",
        "helpers/windows.py": "from .intmath import T\n",
    })
    graph = import_graph(fixed)
    assert cycles(graph) == [] and layer_violations(graph) == []
