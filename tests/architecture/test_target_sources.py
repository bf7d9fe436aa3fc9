"""Every kind of scan target (an image, a host root, an existing SBOM) is a source of
``gpusbom.targets``: the pipeline's request, its checks and its source stage ask the
sources (``pipeline.KINDS``) and never branch on which input field is set; nor does
``gpusbom scan``'s command side (``scan.py``): what starts before the pipeline, what loads
beside it, the garbage collector's pause and ``--images`` are the target's hooks."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from gpusbom import pipeline, scan
from gpusbom.targets.base import TargetSource

PIPELINE = Path(pipeline.__file__)
SCAN = Path(scan.__file__)
#: the fields that name the input's kind; only the sources read them
KIND_FIELDS = {"reference", "host", "sbom"}
#: what must not branch on them
KIND_BLIND = {"ScanRequest", "check_request", "open_view", "scan_open", "target_source"}


def test_the_pipeline_does_not_branch_on_the_input_kind() -> None:
    tree = ast.parse(PIPELINE.read_text(encoding="utf-8"))
    seen, bad = set(), []
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name in KIND_BLIND:
            seen.add(node.name)
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute) and sub.attr in KIND_FIELDS \
                        and isinstance(sub.ctx, ast.Load):
                    bad.append(f"{node.name}: line {sub.lineno}: .{sub.attr}")
    assert seen == KIND_BLIND
    assert bad == []


def test_the_scan_command_does_not_branch_on_the_input_kind() -> None:
    """Nowhere in scan.py: it asks ``pipeline.target_source`` for the target's hooks."""
    tree = ast.parse(SCAN.read_text(encoding="utf-8"))
    bad = [f"line {sub.lineno}: .{sub.attr}" for sub in ast.walk(tree)
           if isinstance(sub, ast.Attribute) and sub.attr in KIND_FIELDS
           and isinstance(sub.ctx, ast.Load)]
    assert bad == []
    assert "target_source" in {sub.attr for sub in ast.walk(tree)
                               if isinstance(sub, ast.Attribute)}


def test_the_scan_hooks_of_each_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    """An image or an SBOM loads the database before the scan and resumes the garbage
    collector then; a host root starts NVML first, loads the database beside its walk and
    keeps the collector paused to the end; only a host root is a node (``--images``)."""
    loads: list[str] = []

    def load_db() -> Any:
        loads.append("db")
        return "the database"

    for req in (pipeline.ScanRequest(reference="dir:/x"), pipeline.ScanRequest(sbom="-")):
        src = pipeline.target_source(req)
        assert src is not None and src.node_root() is None and not src.keeps_gc_paused
        ready = src.prepare(load_db)
        assert ready.advisory_db == "the database" and ready.advisory_pending is None
        assert ready.nvml_answer is None
    assert loads == ["db", "db"]
    from gpusbom.host import source as host_source

    nvml: list[tuple[str, bool]] = []
    monkeypatch.setattr(host_source, "start_nvml",
                        lambda root, use: nvml.append((root, use)) or (lambda: (None, "none")))
    src = pipeline.target_source(pipeline.ScanRequest(
        host=pipeline.HostOptions(root="/r", use_nvml=False)))
    assert src is not None and src.node_root() == "/r" and src.keeps_gc_paused
    ready = src.prepare(load_db)
    assert nvml == [("/r", False)] and loads == ["db", "db"]  # not loaded yet: beside the walk
    assert ready.advisory_db is None and ready.advisory_pending is not None
    assert ready.nvml_answer is not None and ready.nvml_answer() == (None, "none")
    assert ready.advisory_pending.get() == "the database" and loads == ["db", "db", "db"]


def test_each_kind_is_a_source() -> None:
    assert [k.__name__ for k in pipeline.KINDS] == ["SbomSource", "HostRootSource",
                                                     "ImageSource"]
    for kind in pipeline.KINDS:
        assert issubclass(kind, TargetSource)
    req = pipeline.ScanRequest(reference="dir:/x")
    assert type(pipeline.target_source(req)).__name__ == "ImageSource" and req.name == "dir:/x"
    req = pipeline.ScanRequest(host=pipeline.HostOptions(root="/r"))
    assert req.name == "host:/r" and req.runs_collectors
    req = pipeline.ScanRequest(sbom="-")
    assert req.name == "sbom:-" and not req.runs_collectors
    assert pipeline.target_source(pipeline.ScanRequest()) is None
