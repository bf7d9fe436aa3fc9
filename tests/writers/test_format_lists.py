"""The format lists people read come from the writer registry (``gpusbom.writers``): every
registered writer is in ``scan --help`` (its scan formats) and in the formats section of
docs/usage.md, which ``scripts/gen-format-docs`` generates; a hand list went stale before
(no openvex, cyclonedx-vex, html)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from gpusbom.cli.output import FORMATS_BEGIN, FORMATS_END, SUBJECT_COMMANDS, formats_markdown
from gpusbom.writers import all_writers, subjects

ROOT = Path(__file__).resolve().parents[2]


def _run(*code: str) -> str:
    return subprocess.run([sys.executable, "-c", "\n".join(code)], capture_output=True,
                          text=True, check=True, cwd=ROOT).stdout


def _listed(help_text: str) -> list[str]:
    """The format ids after ``Formats:`` in ``--help``, unwrapped (click breaks lines after
    a hyphen too)."""
    flat = re.sub(r"-\n\s+", "-", help_text)
    flat = " ".join(flat.split())
    m = re.search(r"Formats: (.*?)\. Default", flat)
    assert m, flat
    return m.group(1).split(", ")


def test_scan_help_lists_every_scan_writer() -> None:
    text = _run("import sys; from gpusbom.cli.app import main; sys.argv=['gpusbom']; "
                "main(['scan', '--help'])")
    assert _listed(text) == list(all_writers("scan"))
    for fmt in ("openvex", "cyclonedx-vex", "html"):  # missing from the old hand list
        assert fmt in _listed(text)


def test_a_command_that_shows_no_help_imports_no_writer() -> None:
    # filling the list imports every writer (0.4 s): only when the help is shown
    out = _run("import sys; from gpusbom.cli.app import command; command(['scan']); "
               "command(['advisories']); print(sorted(m for m in sys.modules if "
               "m.startswith(('gpusbom.writers.', 'gpusbom.advisories.feeds.'))))")
    assert out.strip() in ("[]", "['gpusbom.writers.base']")


def test_docs_format_section_is_generated_from_the_registry() -> None:
    doc = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    start, end = doc.index(FORMATS_BEGIN), doc.index(FORMATS_END)
    section = doc[start:end + len(FORMATS_END)] + "\n"
    assert section == formats_markdown(), "run scripts/gen-format-docs"
    for subject in subjects():
        assert subject in SUBJECT_COMMANDS
        for fmt in all_writers(subject):
            assert f"| `{fmt}` |" in section, (subject, fmt)


def test_a_new_writer_is_listed_without_touching_the_cli(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from gpusbom import writers
    from gpusbom.cli.helptext import fill

    class Toy(writers.Writer):
        format = "toy-json"
        description = "a toy"

        def write(self, result, out, options):  # type: ignore[no-untyped-def]
            out.write("{}")

    all_writers("scan")  # the registry loaded first: the toy is added to it, not replaced
    monkeypatch.setitem(writers._REGISTRY, ("scan", "toy-json"), Toy)
    assert "toy-json" in fill("Formats: {formats:scan}.").split(": ")[1].rstrip(".").split(", ")
    assert "| `toy-json` | a toy |" in formats_markdown()
