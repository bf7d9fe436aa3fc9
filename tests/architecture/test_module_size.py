"""Modules stay small and packages keep their privates (issue #34).

* No file under ``src/`` is over :data:`MAX_LINES` lines: a module that grows past it holds
  more than one thing and is split along its seams (``fsview.decompress``, ``binary.stream``,
  ``fsview.view`` and ``advisories.db`` were; each keeps its public names for importers).
* No private name (one leading underscore, not a dunder) is imported from another
  top-level package of gpusbom: ``from gpusbom.fsview.view import _DirWalker`` in
  ``host`` made ``host`` depend on ``fsview``'s internals, which ``fsview`` may change at
  will. A name that another package needs is public (``fsview.rootwalk.DirWalker``).

What "another package" means: a module's unit is its top-level subpackage of gpusbom
(``gpusbom.host.walker`` -> ``host``); the modules directly in ``gpusbom`` (``model``,
``scan``, ``_gc``...) belong to gpusbom itself, which holds every other module, so their
private names are gpusbom's internals and may be imported anywhere in it
(``from .. import _gc``). Private *module paths* (``from ..collectors._libs import
scan_stream``: a public name of a private module) are not counted here.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
PKG = SRC / "gpusbom"

MAX_LINES = 600
#: files allowed over MAX_LINES, each with why
TOO_LONG_ALLOWED: set[str] = set()

#: (importer file, source module, name) imported across packages while allowed (none: the
#: catalog work of issue #34 removed host/premake's use of collectors.triton's private names)
PRIVATE_IMPORTS_ALLOWED: set[tuple[str, str, str]] = set()


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def long_files(root: Path = SRC) -> dict[str, int]:
    """Every ``.py`` file under ``root`` over MAX_LINES lines, with its line count."""
    out = {}
    for p in sorted(root.rglob("*.py")):
        n = len(p.read_text(encoding="utf-8").splitlines())
        if n > MAX_LINES:
            out[_rel(p) if root == SRC else p.name] = n
    return out


def _modules(pkg: Path = PKG) -> dict[str, Path]:
    mods = {}
    for p in sorted(pkg.rglob("*.py")):
        parts = list(p.relative_to(pkg.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def _unit(module: str, mods: dict[str, Path]) -> str:
    """The top-level subpackage a module belongs to; ``""`` for gpusbom's own modules."""
    parts = module.split(".")
    if len(parts) >= 2:
        top = ".".join(parts[:2])
        if top in mods and mods[top].name == "__init__.py":
            return parts[1]
    return ""


def private_imports(pkg: Path = PKG) -> list[tuple[str, str, str]]:
    """(importer file, source module, name) of each private name imported from another
    top-level package. Every ``from`` import counts, also inside functions and under
    ``if TYPE_CHECKING:`` (a type from another package's internals is a dependency too)."""
    mods = _modules(pkg)
    root = pkg.name
    out: list[tuple[str, str, str]] = []
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base != root and not base.startswith(root + "."):
                continue
            for alias in node.names:
                name = alias.name
                if not name.startswith("_") or name.startswith("__"):
                    continue
                # the name is ``base``'s: a private function, class or constant of that
                # module, or a private module of that package (``from ..a import _priv``)
                src_unit = _unit(base, mods)
                if src_unit and src_unit != _unit(mod, mods):
                    out.append((_rel(path) if pkg == PKG else path.name, base, name))
    return sorted(out)


def test_no_src_file_over_the_limit() -> None:
    found = long_files()
    assert set(found) - TOO_LONG_ALLOWED == set(), (
        f"over {MAX_LINES} lines (split along the seams): "
        + ", ".join(f"{p} ({n})" for p, n in sorted(found.items()) if p not in TOO_LONG_ALLOWED))


def test_the_size_allowlist_names_real_long_files() -> None:
    # an entry whose file shrank (or moved) goes: the allowlist only ever gets shorter
    found = long_files()
    assert {p for p in TOO_LONG_ALLOWED if p not in found} == set()


def test_no_private_name_imported_across_packages() -> None:
    found = set(private_imports())
    assert found - PRIVATE_IMPORTS_ALLOWED == set(), (
        "private names imported from another package (make them public): "
        + "; ".join(f"{f}: from {m} import {n}" for f, m, n in
                    sorted(found - PRIVATE_IMPORTS_ALLOWED)))


def test_the_private_import_allowlist_names_real_imports() -> None:
    assert PRIVATE_IMPORTS_ALLOWED - set(private_imports()) == set()


def test_the_rules_can_fail(tmp_path: Path) -> None:
    # the walk sees what it must: a long file and each form of a cross-package private import
    pkg = tmp_path / "gpusbom"
    for sub in ("a", "b"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "_shared.py").write_text("_X = 1\n")
    (pkg / "a" / "m.py").write_text("_Y = 1\nZ = 2\n")
    (pkg / "a" / "_priv.py").write_text("")
    (pkg / "a" / "n.py").write_text("from .m import _Y\n")  # same package: fine
    (pkg / "b" / "k.py").write_text(
        "from gpusbom.a.m import _Y\n"  # absolute
        "from ..a.m import Z\n"  # public: fine
        "from .. import _shared\n"  # gpusbom's own: fine
        "from .._shared import _X\n"  # gpusbom's own: fine
        "def f():\n"
        "    from ..a import _priv\n"  # a private module of another package, deferred
        "    from ..a.m import _Y as y\n")
    (pkg / "b" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert private_imports(pkg) == [("k.py", "gpusbom.a", "_priv"), ("k.py", "gpusbom.a.m", "_Y"),
                                    ("k.py", "gpusbom.a.m", "_Y")]
    assert long_files(tmp_path) == {"long.py": MAX_LINES + 1}
