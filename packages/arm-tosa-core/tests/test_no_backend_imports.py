"""No package may import executorch's own backends (the competitor); only bench/ may, to measure."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FORBIDDEN = "executorch.backends"


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
            names.append(str(node.args[0].value))
    return names


def offending_files(root: Path) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] in ("bench", ".venv", ".nox") or "site-packages" in rel.parts:
            continue
        if any(n == FORBIDDEN or n.startswith(FORBIDDEN + ".") for n in _imports(path)):
            bad.append(str(rel))
    return bad


def test_no_package_imports_executorch_backends():
    assert offending_files(ROOT) == []


def test_the_check_catches_an_offending_import(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bad.py").write_text("from executorch.backends.arm import x\n")
    (tmp_path / "pkg" / "also_bad.py").write_text("import importlib\nimportlib.import_module('executorch.backends.vulkan')\n")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "ok.py").write_text("import executorch.backends.arm\n")
    assert offending_files(tmp_path) == ["pkg/also_bad.py", "pkg/bad.py"]
