"""Exit codes are decided in one place: ``gpusbom.cli`` (``cli._common.fail`` and its table).
The library raises (or returns) typed errors from ``gpusbom.errors``; no module outside
``src/gpusbom/cli/`` ends the process, raises or catches ``SystemExit``, imports the CLI
framework, or assigns an exit-code literal."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "gpusbom"

#: names a module assigns an exit status to
_CODE_NAMES = {"code", "exit_code", "exit_status", "returncode", "rc", "status_code"}

#: (module, what) found outside cli/ that must stay, each for a reason that is not the CLI's:
EXCEPTIONS = {
    # the probe's own programs, run by ``probe/runner.py`` as subprocesses (``python -m``):
    # their status tells that parent whether they wrote their answer file, never the user
    ("probe/worker.py", "sys.exit"),
    ("probe/artifact.py", "sys.exit"),
    # forked children end with os._exit (no atexit handlers, no flushing the parent's
    # buffers a second time); the status is read by the parent only (its ``died`` callback)
    ("host/nvml.py", "os._exit"),
    ("host/nvml.py", "code = literal"),
    ("host/parwalk.py", "os._exit"),
    ("host/parwalk.py", "code = literal"),
    ("forkmap.py", "os._exit"),
    ("forkmap.py", "code = literal"),
}


def _target_name(t: ast.expr) -> str | None:
    if isinstance(t, ast.Name):
        return t.id
    if isinstance(t, ast.Attribute):
        return t.attr
    return None


def _is_int(v: ast.expr | None) -> bool:
    return isinstance(v, ast.Constant) and type(v.value) is int


def _findings(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                if (f.value.id, f.attr) in {("sys", "exit"), ("os", "_exit"), ("os", "abort")}:
                    found.add(f"{f.value.id}.{f.attr}")
            elif isinstance(f, ast.Name) and f.id in {"exit", "quit"}:
                found.add(f.id)
        elif isinstance(node, ast.Name) and node.id == "SystemExit":
            found.add("SystemExit")
        elif isinstance(node, ast.Attribute) and node.attr in {"Exit", "Abort"}:
            found.add(f"*.{node.attr}")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) \
                else [node.module or ""]
            if any(m.split(".")[0] in {"typer", "click"} for m in mods):
                found.add("imports the CLI framework")
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if _is_int(node.value) and any(_target_name(t) in _CODE_NAMES for t in targets):
                found.add("code = literal")
            # ``code, rest = 1, ...``
            for t in targets:
                if isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    for name, v in zip(t.elts, node.value.elts, strict=False):
                        if _target_name(name) in _CODE_NAMES and _is_int(v):
                            found.add("code = literal")
    return found


def test_no_exit_code_decided_outside_cli() -> None:
    seen, bad = set(), []
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 100  # the walk sees the package
    for path in files:
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("cli/"):
            continue
        for what in sorted(_findings(ast.parse(path.read_text(encoding="utf-8")))):
            if (rel, what) in EXCEPTIONS:
                seen.add((rel, what))
            else:
                bad.append(f"{rel}: {what}")
    assert bad == [], "exit codes are the CLI's to decide (gpusbom.cli._common.fail)"
    # an exception that no longer applies is taken off the list
    assert seen == EXCEPTIONS


def test_the_check_sees_what_it_forbids() -> None:
    src = ("import sys, typer\nraise SystemExit(2)\nsys.exit(1)\nraise typer.Exit(3)\n"
           "out.code = 3\nclass E:\n    exit_code = 4\n")
    assert _findings(ast.parse(src)) == {
        "SystemExit", "sys.exit", "*.Exit", "imports the CLI framework", "code = literal"}
