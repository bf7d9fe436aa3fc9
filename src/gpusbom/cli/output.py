"""Rendering outputs and writing them atomically.

Every requested output is rendered in memory first; files are then written to
a temp file beside the destination and renamed into place, so a failure never
leaves a partial (or stale half-new) output file behind.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..writers import WriterOptions, all_writers, get_writer, has_writer


@dataclass(frozen=True)
class OutputSpec:
    """One ``-o FORMAT[=PATH]`` output."""

    format: str
    path: str | None  # None: standard output


def parse_outputs(values: list[str] | None, subject: str = "scan") -> list[OutputSpec]:
    """``-o FORMAT[=PATH]`` values (default: table to stdout), each a writer of ``subject``."""
    specs: list[OutputSpec] = []
    for v in values or ["table"]:
        fmt, sep, path = v.partition("=")
        fmt = fmt.strip()
        if not has_writer(fmt, subject):
            raise UsageError(f"-o {v}: unknown format {fmt!r}; choose one of: "
                             f"{', '.join(all_writers(subject))}")
        if sep and not path:
            raise UsageError(f"-o {v}: empty path")
        specs.append(OutputSpec(fmt, path or None))
    stdout = [s for s in specs if s.path is None]
    if len(stdout) > 1:
        raise UsageError("only one output can go to standard output; give the others =PATH")
    return specs


def render(result: Any, spec: OutputSpec, options: WriterOptions, subject: str = "scan") -> str:
    buf = io.StringIO()
    get_writer(spec.format, subject).write(result, buf, options)
    return buf.getvalue()


def terminal_options(**kw: Any) -> WriterOptions:
    """Writer options for this terminal (colour unless NO_COLOR or not a TTY)."""
    tty = sys.stdout is not None and sys.stdout.isatty()  # None: started with fd 1 closed
    return WriterOptions(color=tty and "NO_COLOR" not in os.environ, **kw)


def write_atomic(path: str, text: str) -> None:
    if os.path.exists(path) and not os.path.isfile(path):
        # /dev/null, a FIFO, /dev/stdout: nothing to replace atomically
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        return
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".gpusbom-", dir=directory)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600; outputs are ordinary files
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def emit(result: Any, specs: list[OutputSpec], options: WriterOptions | None = None,
         subject: str = "scan") -> None:
    """Render every output of ``result`` (a ``subject``), then write them: standard output
    first, files atomically (nothing is written when a writer fails)."""
    options = options or WriterOptions()
    if sys.stdout is None and any(s.path is None for s in specs):
        raise UsageError("standard output is closed: give the output a file (-o FORMAT=PATH)")
    rendered = [(s, render(result, s, options, subject)) for s in specs]
    for spec, text in rendered:
        if spec.path is None:
            sys.stdout.write(text)
            sys.stdout.flush()
    for spec, text in rendered:
        if spec.path is not None:
            write_atomic(spec.path, text)
