"""Nothing in ``src/`` imports a deserializer that can name code (pickle, marshal, shelve
and their kin): what gpusbom reads back, from files or from its own workers' pipes
(``gpusbom._wire``: MessagePack), is data (issue #33's rule)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "gpusbom"
#: modules that may import one of them: none
ALLOWED: set[str] = set()
FORBIDDEN_MODULES = {"pickle", "marshal", "shelve", "dill", "cloudpickle", "_pickle", "copyreg"}


def _imports(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_nothing_imports_pickle() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        bad = _imports(ast.parse(path.read_text(), rel)) & FORBIDDEN_MODULES
        if bad and rel not in ALLOWED:
            offenders.append(f"{rel}: {sorted(bad)}")
    assert offenders == [], offenders
