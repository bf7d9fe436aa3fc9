"""Nothing in ``src/`` deserializes a format that can name code, except through
``gpusbom._wire`` (an unpickler that names only the classes its caller lists), and nothing
uses ``marshal``, ``shelve`` or an unsafe YAML loader (issue #33's rule for every file or
pipe gpusbom reads back)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "gpusbom"
#: the one module that may import pickle: its loads goes through a restricted Unpickler
ALLOWED = {"_wire.py"}
FORBIDDEN_MODULES = {"pickle", "marshal", "shelve", "dill", "cloudpickle", "_pickle", "copyreg"}


def _imports(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def test_only_wire_imports_pickle() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        bad = _imports(ast.parse(path.read_text(), rel)) & FORBIDDEN_MODULES
        if bad and rel not in ALLOWED:
            offenders.append(f"{rel}: {sorted(bad)}")
    assert offenders == [], offenders


def test_wire_refuses_every_global_it_was_not_given() -> None:
    tree = ast.parse((SRC / "_wire.py").read_text())
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    methods = {f.name for f in classes["_DataOnly"].body if isinstance(f, ast.FunctionDef)}
    # both ways a pickle stream reaches an object outside itself are overridden
    assert {"find_class", "persistent_load"} <= methods
