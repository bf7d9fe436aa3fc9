"""The catalog is the one definition of a product: no collector module spells a product's
name, id or library name that the catalog also holds (issue #34).

The names are built from the catalog's tables at test time (row ids, collector product
ids, library stems and their products, CUDA wheel and conda names, packages.yaml and
classifier products); the string constants of every collector module (docstrings aside)
are compared with them. A module not yet made generic over the rows is listed in
``NOT_YET`` with the literals it still holds, so a new literal anywhere fails, and a
module that drops its last one must leave the list (the list only shrinks).
"""

from __future__ import annotations

import ast
from pathlib import Path

from gpusbom import catalog
from gpusbom.catalog import names, packages
from gpusbom.catalog.classifiers import ROWS

COLLECTORS = Path(__file__).parents[2] / "src/gpusbom/collectors"

#: modules that still name products in code, each with the literals it may hold: none since
#: every collector reads its products from the catalog (issue #34); a module added here is
#: a step back that its commit must justify
NOT_YET: dict[str, frozenset[str]] = {}


def catalog_names() -> set[str]:
    """Every product name, id and library name the catalog tables hold."""
    out: set[str] = set()
    for r in catalog.products():
        out.add(r.id)
        out.update(c.rpartition("/")[2] for c in r.collector if c != "*")
        out.update(r.libraries)
    for stack in names.stacks():
        for stem, product in names.libraries(stack).items():
            out.update((stem, product))
        for stem, product in names.library_prefixes(stack).items():
            out.update((stem, product))
    for name, product in (*names.cuda_conda().items(), *names.cuda_wheels().items()):
        out.update((name, product))
    for e in packages.entries():
        out.add(e.product)
    out.update(r.product for r in ROWS)
    # a collector's own id names the collector (and its stack), not a product it finds
    from gpusbom.collectors import all_collectors

    out -= set(all_collectors())
    out.discard("{name}")  # packages.yaml's placeholder: the package's own name
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def literals(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    return {n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip}


def modules() -> list[Path]:
    return sorted(p for p in COLLECTORS.rglob("*.py"))


def test_no_collector_module_names_a_catalog_product() -> None:
    known = catalog_names()
    assert {"cuda-toolkit", "cudart", "nccl", "libnccl", "cudnn"} <= known
    found = {}
    for p in modules():
        rel = p.relative_to(COLLECTORS).as_posix()
        hits = literals(p) & known
        extra = hits - NOT_YET.get(rel, frozenset())
        if extra:
            found[rel] = sorted(extra)
    assert not found, f"collector modules spell catalog product names: {found}"


def test_not_yet_list_only_shrinks() -> None:
    """An entry of NOT_YET whose module no longer holds one of its literals is stale."""
    known = catalog_names()
    stale = {}
    for rel, allowed in NOT_YET.items():
        p = COLLECTORS / rel
        held = literals(p) & known if p.exists() else set()
        gone = allowed - held
        if gone:
            stale[rel] = sorted(gone)
    assert not stale, f"NOT_YET lists literals the modules no longer hold: {stale}"
