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


def test_forked_outputs_are_the_serial_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    result = helpers.make_result()
    opts = WriterOptions()
    forked: list[int] = []
    real_fork = output.os.fork

    def counting_fork() -> int:
        forked.append(1)
        return real_fork()

    monkeypatch.setattr(output, "_fork_safe", lambda: True)
    monkeypatch.setattr(output.os, "fork", counting_fork)
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
