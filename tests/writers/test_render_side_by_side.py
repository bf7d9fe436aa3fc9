"""Several outputs are rendered side by side in forked children (cli.output.render_all):
the same text as one after the other, and a writer's error is still the writer's error."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from gpusbom.cli import output
from gpusbom.cli.output import OutputSpec, render, render_all
from gpusbom.writers import WriterOptions

_here = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("gpusbom_tests_writers_helpers", _here / "helpers.py")
assert _spec and _spec.loader
helpers = sys.modules.get(_spec.name) or importlib.util.module_from_spec(_spec)
if _spec.name not in sys.modules:
    sys.modules[_spec.name] = helpers
    _spec.loader.exec_module(helpers)

SPECS = [OutputSpec("json", None), OutputSpec("cyclonedx-json", "/x.cdx.json"),
         OutputSpec("spdx-json", "/x.spdx.json"), OutputSpec("spdx-tag-value", "/x.spdx")]


def _count_forks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Forking allowed here; each fork of ``cli.output`` adds an item to the list returned."""
    forked: list[int] = []
    real_fork = output.os.fork

    def counting_fork() -> int:
        forked.append(1)
        return real_fork()

    monkeypatch.setattr(output, "_fork_safe", lambda: True)
    monkeypatch.setattr(output.os, "fork", counting_fork)
    return forked


def test_forked_outputs_are_the_serial_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    result = helpers.make_result()
    opts = WriterOptions()
    forked = _count_forks(monkeypatch)
    got = render_all(result, SPECS, opts)
    assert len(forked) == len(SPECS) - 1  # every output but the first in a child
    assert got == [render(result, s, opts) for s in SPECS]


def test_a_writer_that_fails_in_its_child_fails_here(monkeypatch: pytest.MonkeyPatch) -> None:
    result = helpers.make_result()
    monkeypatch.setattr(output, "_fork_safe", lambda: True)
    calls: list[str] = []
    real = output.render

    def flaky(res: object, spec: OutputSpec, *a: object) -> str:
        calls.append(spec.format)
        if spec.format == "spdx-json":
            raise RuntimeError("writer broke")
        return real(res, spec, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(output, "render", flaky)
    with pytest.raises(RuntimeError, match="writer broke"):
        render_all(result, SPECS[:3], WriterOptions())
    # the parent rendered the first output and, after the child failed, spdx-json again
    assert calls == ["json", "spdx-json"]


def test_each_child_reports_its_wall_and_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--debug``: one stage per forked child, with the CPU seconds it used (wait4)."""
    from gpusbom import stagetime

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    monkeypatch.setattr(output, "_fork_safe", lambda: True)
    monkeypatch.setattr(stagetime, "_enabled", True)
    monkeypatch.setattr(stagetime, "_rows", [])
    got = render_all(helpers.make_result(), SPECS[:3], WriterOptions())
    rows = {name: (wall, cpu) for name, _start, wall, cpu in stagetime._rows}
    for spec in SPECS[1:3]:
        wall, cpu = rows[f"output {spec.format} (forked child)"]
        assert wall > 0 and cpu > 0
    assert "output json" in rows and "output spdx-json" not in rows  # json: the parent's
    assert len(got) == 3 and all(got)


def _digest_as_before(result: object) -> str:
    """content_digest as it was written before it was shared (the ids must not change)."""
    import hashlib
    import json

    d = result.to_document()  # type: ignore[attr-defined]
    d["components"] = sorted(d["components"], key=lambda c: (c["bom_ref"], json.dumps(c, sort_keys=True)))
    d["relationships"] = sorted(d["relationships"], key=lambda r: (r["source"], r["type"], r["target"]))
    d["unknowns"] = sorted(d["unknowns"], key=lambda u: json.dumps(u, sort_keys=True))
    return hashlib.sha256(json.dumps(d, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def test_content_digest_unchanged_with_unique_and_duplicate_refs() -> None:
    from gpusbom.writers._common import content_digest

    r = helpers.make_result()
    assert content_digest(r) == _digest_as_before(r)
    r.components[1].bom_ref = r.components[0].bom_ref  # ties: the whole component decides
    r.components[0].version = "0"
    assert content_digest(r) == _digest_as_before(r)


def test_a_sent_digest_is_used_and_a_missing_one_computed(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from gpusbom.writers import _common

    monkeypatch.setattr(_common, "_given", None)
    r, other = helpers.make_result(), helpers.make_result()
    rd, wd = os.pipe()
    _common.send_digest(r, [wd])  # what the parent sends: the real digest
    _common.receive_digest(r, rd)
    assert _common.content_digest(r) == _digest_as_before(r)
    rd, wd = os.pipe()
    os.write(wd, b"f" * 64)
    os.close(wd)
    _common.receive_digest(r, rd)
    assert _common.content_digest(r) == "f" * 64  # read from the pipe, not computed
    assert _common.content_digest(other) == _digest_as_before(other)  # another result
    rd, wd = os.pipe()
    os.close(wd)  # the sender failed: nothing came
    _common.receive_digest(r, rd)
    assert _common.content_digest(r) == _digest_as_before(r)


def test_the_digest_is_sent_only_to_documents_with_an_id(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpusbom.writers import _common

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    monkeypatch.setattr(output, "_fork_safe", lambda: True)
    sent: list[int] = []
    real = _common.send_digest

    def counting(result: object, fds: list[int]) -> None:
        sent.append(len(fds))
        real(result, fds)  # type: ignore[arg-type]

    monkeypatch.setattr(_common, "send_digest", counting)
    result = helpers.make_result()
    plain = [OutputSpec("json", None), OutputSpec("table", "/x.txt"), OutputSpec("html", "/x.html")]
    assert render_all(result, plain, WriterOptions()) == [render(result, s, WriterOptions())
                                                          for s in plain]
    assert render_all(result, SPECS, WriterOptions()) == [render(result, s, WriterOptions())
                                                          for s in SPECS]
    assert sent == [0, 3]  # none to table and html; to the CycloneDX and both SPDX children


def test_outputs_forked_before_the_scan_are_the_serial_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """``prefork``: one child per output but the native JSON, forked before the result
    exists; each reads the JSON back and renders the same text as this process would."""
    from gpusbom import writers

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    monkeypatch.setattr(writers, "_asked", [])
    specs = [OutputSpec("cyclonedx-json", "/x.cdx.json"), OutputSpec("json", "/x.json"),
             OutputSpec("spdx-json", "/x.spdx.json"), OutputSpec("table", None)]
    for s in specs:
        assert writers.has_writer(s.format)
    assert any("cyclonedx" in m for m in writers.asked_modules())
    forked = _count_forks(monkeypatch)
    opts = WriterOptions()
    early = output.prefork(specs, opts)
    assert early is not None and len(forked) == 3  # all but json, before any result
    # the scan no longer imports what only the children render
    assert not any("cyclonedx" in m or "spdx" in m for m in writers.asked_modules())
    try:
        result = helpers.make_result()
        assert early.serves(specs, "scan") and not early.serves(specs[:2], "scan")
        got = render_all(result, specs, opts, early=early)
        assert len(forked) == 3  # the children made before: none forked now
        assert got == [render(result, s, opts) for s in specs]
        assert not early.serves(specs, "scan")  # used once
    finally:
        early.close()


def test_a_child_forked_before_the_scan_that_died_is_rendered_here(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import signal

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    monkeypatch.setattr(output, "_fork_safe", lambda: True)
    opts = WriterOptions()
    early = output.prefork(SPECS, opts)
    assert early is not None
    try:
        os.kill(early.kids[0].pid, signal.SIGKILL)  # cyclonedx-json's child
        result = helpers.make_result()
        assert render_all(result, SPECS, opts, early=early) == [render(result, s, opts)
                                                                for s in SPECS]
        assert early.kids[0].text is None and all(k.text for k in early.kids[1:])
    finally:
        early.close()


def test_a_writer_that_fails_in_a_child_forked_before_fails_here(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output, "_fork_safe", lambda: True)
    real = output.render

    def broken(res: object, spec: OutputSpec, *a: object) -> str:
        if spec.format == "spdx-json":
            raise RuntimeError("writer broke")
        return real(res, spec, *a)  # type: ignore[arg-type]

    monkeypatch.setattr(output, "render", broken)
    early = output.prefork(SPECS[:3], WriterOptions())
    assert early is not None
    try:
        with pytest.raises(RuntimeError, match="writer broke"):
            render_all(helpers.make_result(), SPECS[:3], WriterOptions(), early=early)
    finally:
        early.close()


def test_children_forked_before_a_scan_that_failed_are_stopped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setattr(output, "_fork_safe", lambda: True)
    early = output.prefork(SPECS, WriterOptions())
    assert early is not None
    pids = [k.pid for k in early.kids]
    assert all(os.path.exists(f"/proc/{p}") for p in pids)
    early.close()  # no result came: each child is stopped and reaped
    for p in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(p, os.WNOHANG)
    early.close()  # twice is harmless


def test_no_children_before_the_scan_for_json_alone_or_one_output(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output, "_fork_safe", lambda: True)
    opts = WriterOptions()
    assert output.prefork([OutputSpec("cyclonedx-json", None)], opts) is None
    assert output.prefork([OutputSpec("json", None), OutputSpec("json", "/x")], opts) is None
    monkeypatch.setattr(output, "_fork_safe", lambda: False)
    assert output.prefork(SPECS, opts) is None
