"""The human table."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path

from gpusbom.writers import WriterOptions, get_writer

_here = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("gpusbom_tests_writers_helpers", _here / "helpers.py")
assert _spec and _spec.loader
helpers = sys.modules.get(_spec.name) or importlib.util.module_from_spec(_spec)
if _spec.name not in sys.modules:
    sys.modules[_spec.name] = helpers
    _spec.loader.exec_module(helpers)


def render(result=None, **kw) -> str:
    buf = io.StringIO()
    get_writer("table").write(result or helpers.make_result(), buf, WriterOptions(**kw))
    return buf.getvalue()


def test_table_lists_components_and_unknowns() -> None:
    text = render(width=200)
    result = helpers.make_result()
    for c in result.components:
        assert c.name in text
        if c.version:
            assert c.version in text
    assert "1f1f1f1f" in text and "1f1f1f1f1" not in text  # short diff_id
    assert "/var/lib/dpkg/status" in text
    flat = " ".join(text.split())  # the summary may wrap
    assert "10 components, 2 unknowns" in flat
    assert "Target: nvcr.io/nvidia/cuda:12.4.1-runtime-debian12" in flat
    assert f"Digest: {helpers.MANIFEST_DIGEST}" in flat
    assert "Platform: linux/amd64" in flat
    assert "OS: Debian GNU/Linux 12 (bookworm)" in flat
    assert all(line == line.rstrip() for line in text.splitlines())  # no trailing blanks
    assert "rpm: rpmdb not found; skipped" in flat
    assert "python: METADATA is not valid UTF-8 (/usr/lib/python3/dist-packages/" in flat
    # unknowns come after the table
    assert text.index("rpmdb not found") > text.index("libc6")


def test_sorted_by_type_then_name() -> None:
    text = render(width=200)
    order = [text.index(n) for n in ("base-files", "bash", "tzdata", "device-driver", "cuda ",
                                     "cuda-cudart-12-4", "libc6", "libgcc-s1", "libstdc++6",
                                     "nvidia-cuda-runtime-cu12")]
    assert order == sorted(order)


def test_no_ansi_without_color_and_ansi_with() -> None:
    assert "\x1b[" not in render(color=False)
    assert "\x1b[" in render(color=True)


def test_width_is_respected() -> None:
    for width in (80, 120, 160):
        lines = render(width=width).splitlines()
        assert max(len(line) for line in lines) <= width


def test_empty_result() -> None:
    result = helpers.make_directory_result()
    result.components = []
    text = render(result)
    assert "no components found" in text
    assert "0 components, 0 unknowns" in text
