"""Every registered writer: exhaustive, deterministic, golden."""

from __future__ import annotations

import importlib.util
import io
import os
import sys
from pathlib import Path

import pytest

from gpusbom.writers import Writer, WriterOptions, all_writers, get_writer

_here = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("gpusbom_tests_writers_helpers", _here / "helpers.py")
assert _spec and _spec.loader
helpers = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = helpers
_spec.loader.exec_module(helpers)

GOLDEN = _here / "golden"
UPDATE = os.environ.get("GPUSBOM_UPDATE_GOLDEN") == "1"

#: every format we ship; a new writer must be added here (and get a golden file)
EXPECTED_FORMATS = {
    "table", "json", "cyclonedx-json", "cyclonedx-xml", "spdx-json", "spdx-tag-value", "html",
    "openvex", "cyclonedx-vex", "spdx3-json", "in-toto",
}
#: formats that need an image with a digest (an attestation's subject): not of a directory
NEEDS_DIGEST = {"in-toto"}
#: (golden name, format, options)
VARIANTS = [
    ("table", "table", WriterOptions(width=160)),
    ("json", "json", WriterOptions()),
    ("cyclonedx-json", "cyclonedx-json", WriterOptions()),
    ("cyclonedx-json-1.5", "cyclonedx-json", WriterOptions(cyclonedx_version="1.5")),
    ("cyclonedx-xml", "cyclonedx-xml", WriterOptions()),
    ("cyclonedx-xml-1.5", "cyclonedx-xml", WriterOptions(cyclonedx_version="1.5")),
    ("cyclonedx-json-1.7", "cyclonedx-json", WriterOptions(cyclonedx_version="1.7")),
    ("cyclonedx-xml-1.7", "cyclonedx-xml", WriterOptions(cyclonedx_version="1.7")),
    ("spdx-json", "spdx-json", WriterOptions()),
    ("spdx-tag-value", "spdx-tag-value", WriterOptions()),
    ("spdx3-json", "spdx3-json", WriterOptions()),
    ("html", "html", WriterOptions()),
    ("openvex", "openvex", WriterOptions()),
    ("cyclonedx-vex", "cyclonedx-vex", WriterOptions()),
    ("in-toto", "in-toto", WriterOptions()),
]


def render(fmt: str, result=None, options: WriterOptions | None = None) -> str:
    buf = io.StringIO()
    get_writer(fmt).write(result if result is not None else helpers.make_result(), buf,
                          options or WriterOptions())
    return buf.getvalue()


def test_registry_is_exhaustive() -> None:
    writers = all_writers()
    assert set(writers) == EXPECTED_FORMATS
    assert {fmt for _, fmt, _ in VARIANTS} == set(writers)
    for fmt, cls in writers.items():
        assert issubclass(cls, Writer)
        assert cls.format == fmt
        assert cls.description
    assert [f for f, c in writers.items() if c.for_humans] == ["table"]


@pytest.mark.parametrize("fmt,make", [
    (f, m) for f in sorted(EXPECTED_FORMATS) for m in ("make_result", "make_directory_result")
    if not (f in NEEDS_DIGEST and m == "make_directory_result")])
def test_deterministic(fmt: str, make: str) -> None:
    first = render(fmt, getattr(helpers, make)())
    second = render(fmt, getattr(helpers, make)())
    assert first == second
    assert first.endswith("\n")
    assert first.strip()


@pytest.mark.parametrize("fmt", sorted(EXPECTED_FORMATS - {"table", "json"}))
def test_component_order_does_not_matter(fmt: str) -> None:
    a = helpers.make_result()
    b = helpers.make_result()
    b.components.reverse()
    b.relationships.reverse()
    assert render(fmt, a) == render(fmt, b)


@pytest.mark.parametrize("name,fmt,options", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_golden(name: str, fmt: str, options: WriterOptions) -> None:
    text = render(fmt, options=options)
    path = GOLDEN / f"{name}.golden"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="")
    assert path.exists(), f"missing {path}; run with GPUSBOM_UPDATE_GOLDEN=1"
    with open(path, encoding="utf-8", newline="") as f:
        expected = f.read()
    assert text == expected, (
        f"{fmt} output changed; if intended, regenerate with GPUSBOM_UPDATE_GOLDEN=1"
    )


def test_unknown_format_is_usage_error() -> None:
    from gpusbom.errors import UsageError

    with pytest.raises(UsageError):
        get_writer("nope")


def test_json_round_trips() -> None:
    import json

    from gpusbom.model import ScanResult

    result = helpers.make_result()
    text = render("json", result)
    data = json.loads(text)
    assert data == result.to_dict()
    assert ScanResult.from_dict(data).to_dict() == result.to_dict()


def test_different_scans_get_different_ids() -> None:
    a = helpers.make_result()
    b = helpers.make_result()
    b.timestamp = "2024-06-01T00:00:00Z"
    for fmt in ("cyclonedx-json", "spdx-json", "spdx3-json"):
        assert render(fmt, a) != render(fmt, b)
    import json

    ca, cb = json.loads(render("cyclonedx-json", a)), json.loads(render("cyclonedx-json", b))
    assert ca["serialNumber"] != cb["serialNumber"]
    sa, sb = json.loads(render("spdx-json", a)), json.loads(render("spdx-json", b))
    assert sa["documentNamespace"] != sb["documentNamespace"]
