"""Rendering outputs and writing them atomically; the formats' list in the docs, from the
writer registry (``gpusbom.writers``; ``--help``'s: ``cli.helptext``).

Every requested output is rendered in memory first; files are then written to
a temp file beside the destination and renamed into place, so a failure never
leaves a partial (or stale half-new) output file behind.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from .. import _fork
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


def _fork_safe() -> bool:
    """May this process fork to render outputs side by side: a fork, a core to spare, and no
    thread but this one (a lock held by another thread would stay held in the child)."""
    import threading

    from ..sources.schedule import usable_cpus

    if not hasattr(os, "fork") or usable_cpus() < 2:
        return False
    hashing = sys.modules.get("gpusbom.binary.streamhash")
    if hashing is not None:  # the layers' hashing threads, idle once the layers are read
        hashing.release_threads()
    return threading.active_count() == 1


def render_all(result: Any, specs: list[OutputSpec], options: WriterOptions,
               subject: str = "scan", early: Preforked | None = None) -> list[str]:
    """Every output rendered, in order. With several outputs and a core to spare, all but
    the first are rendered in forked children, all at once, while this process renders the
    first (the writers are CPU-bound Python); the children's texts are read as they come.
    A child that fails in any way has its output rendered here again, which raises the
    writer's own error.

    The wall time of several outputs is then that of the slowest one (plus its fork and
    the transfer of its text), not their sum: on a 16-core H200 host's ``scan --host``,
    CycloneDX through cyclonedx-python-lib was that slowest one at ~1.1 s, so three outputs
    still took ~1.2 s more than JSON alone (issue #37; ``writers._cyclonedx_fast``).
    ``--debug`` shows each child's wall and CPU seconds. ``early``: children forked before
    the scan for these outputs (``prefork``) render them instead."""
    from .. import stagetime

    if early is not None and early.serves(specs, subject):
        return early.render(result, specs, options)
    if len(specs) < 2 or not _fork_safe():
        out = []
        for s in specs:
            with stagetime.stage(f"output {s.format}"):
                out.append(render(result, s, options, subject))
        return out
    from ..writers._common import receive_digest, send_digest

    kids: list[_Kid] = []
    for s in specs[1:]:
        r, w = os.pipe()
        dr, dw = os.pipe()  # the document ids' digest of the scan, computed here once
        started = time.perf_counter()
        pid = _fork.fork()
        if pid == 0:  # pragma: no cover - the child (its output is checked in the parent)
            os.close(r)
            os.close(dw)
            for k in kids:  # its siblings' pipes are theirs
                os.close(k.fd)
                os.close(k.digest_fd)
            code = 1
            try:
                # what the child inherited is not its garbage: its collections walk only
                # what it allocates (a pass over the scan's objects would also copy every
                # page it touches, the fork's pages being shared until written)
                gc.freeze()
                receive_digest(result, dr)
                _fork.write_all(w, render(result, s, options, subject).encode("utf-8", "surrogatepass"))
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        os.close(dr)
        kids.append(_Kid(s, pid, r, dw, started))
    # the children's document ids (CycloneDX serial number, SPDX namespace) hash the whole
    # scan: once here while they render, not once in each (0.04 CPU-s a child on a host)
    needed = subject == "scan" and any(get_writer(k.spec.format, subject).document_id
                                       for k in kids)
    with stagetime.stage("content digest sent to the children"):
        send_digest(result, [k.digest_fd for k in kids] if needed else [])
        for k in kids if not needed else ():
            os.close(k.digest_fd)
    with stagetime.stage(f"output {specs[0].format}"):
        first = render(result, specs[0], options, subject)
    with stagetime.stage("outputs rendered in forked children"):
        _collect(kids)
    return [first, *(k.text if k.text is not None else render(result, k.spec, options, subject)
                     for k in kids)]


@dataclass
class _Kid:
    """A forked child rendering ``spec``: its pid, the read end of its output's pipe, the
    write end of its digest's, when it was forked; ``text`` once it succeeded. A child
    forked before the scan (``Preforked``) also has the write end of the pipe its scan
    comes through (``data_fd``) and its index in the outputs."""

    spec: OutputSpec
    pid: int
    fd: int
    digest_fd: int  # the write end of its digest pipe (closed once sent)
    started: float
    text: str | None = None
    data_fd: int = -1
    index: int = -1
    reaped: bool = False


#: the length of the scan sent to a child forked before it (``Preforked``): 8 bytes
_LENGTH = 8


class Preforked:
    """Outputs rendered by children forked before the scan (``prefork``).

    A child forked once the scan is done inherits the result but not the time its writer's
    library takes to import (CycloneDX's and SPDX's: 0.15-0.3 s each), which then comes
    after the scan, or beside it in this process, where it competes with the scan's own
    Python for the interpreter lock. A child forked before the scan imports its writer on a
    core of its own while the scan runs, then waits for the result: this process renders
    the native JSON (the ``json`` output, lossless: ``ScanResult.from_dict`` reads it back),
    sends that text to each child, which reads it back and renders its output from it. The
    texts are the ones this process would render (``tests/writers/test_render_side_by_side.py``).
    A child that fails in any way has its output rendered here again (the writer's own
    error); children never used (the scan failed) are stopped by ``close``."""

    def __init__(self, kids: list[_Kid], subject: str, count: int) -> None:
        self.kids = kids
        self.subject = subject
        self.count = count  # how many outputs there were

    def serves(self, specs: list[OutputSpec], subject: str) -> bool:
        """Were these children forked for these outputs (and not used yet)?"""
        return (subject == self.subject and len(specs) == self.count
                and all(k.data_fd >= 0 and specs[k.index] == k.spec for k in self.kids))

    def render(self, result: Any, specs: list[OutputSpec], options: WriterOptions) -> list[str]:
        from .. import stagetime
        from ..writers._common import send_digest

        with stagetime.stage("output json"):
            doc = render(result, OutputSpec("json", None), options, self.subject)
        with stagetime.stage("scan sent to the children forked before it"):
            payload = doc.encode("utf-8", "surrogatepass")
            header = len(payload).to_bytes(_LENGTH, "big")
            for k in self.kids:
                with contextlib.suppress(OSError):  # a child that is gone: rendered here
                    _fork.write_all(k.data_fd, header)
                    _fork.write_all(k.data_fd, payload)
                os.close(k.data_fd)
                k.data_fd = -1
                k.started = time.perf_counter()  # its stage: from here to its text
            del payload
        needed = [k.digest_fd for k in self.kids if get_writer(k.spec.format, self.subject).document_id]
        with stagetime.stage("content digest sent to the children"):
            send_digest(result, needed)
            for k in self.kids:
                if k.digest_fd not in needed:
                    os.close(k.digest_fd)
                k.digest_fd = -1
        with stagetime.stage("outputs rendered in children forked before the scan"):
            _collect(self.kids)
        for k in self.kids:
            k.reaped = True
        texts: dict[int, str | None] = {k.index: k.text for k in self.kids}
        out = []
        for i, s in enumerate(specs):
            text = texts.get(i)
            if text is None:
                text = doc if s.format == "json" else render(result, s, options, self.subject)
            out.append(text)
        return out

    def close(self) -> None:
        """Stop and reap the children not used (the scan failed or was interrupted)."""
        import signal

        for k in self.kids:
            for fd in (k.data_fd, k.digest_fd):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            k.data_fd = k.digest_fd = -1
            if not k.reaped:
                with contextlib.suppress(OSError):
                    os.close(k.fd)
                with contextlib.suppress(OSError):
                    os.kill(k.pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(k.pid, 0)
                k.reaped = True


def prefork(specs: list[OutputSpec], options: WriterOptions,
            subject: str = "scan") -> Preforked | None:
    """Fork, before a scan, one child per output other than the native JSON (rendered here),
    each importing its writer while the scan runs (``Preforked``); None where that does not
    apply: fewer than two outputs, none but JSON, or no fork or core to spare."""
    from .. import writers

    far = [i for i, s in enumerate(specs) if s.format != "json"]
    if subject != "scan" or len(specs) < 2 or not far or not _fork_safe():
        return None
    kids: list[_Kid] = []
    for i in far:
        spec = specs[i]
        r, w = os.pipe()
        dr, dw = os.pipe()
        sr, sw = os.pipe()  # the scan's native JSON, length first
        started = time.perf_counter()
        pid = _fork.fork()
        if pid == 0:  # pragma: no cover - the child (its output is checked in the parent)
            os.close(r)
            os.close(dw)
            os.close(sw)
            for k in kids:  # its siblings' pipes are theirs
                for fd in (k.fd, k.digest_fd, k.data_fd):
                    os.close(fd)
            _early_child(spec, options, subject, sr, w, dr)
        os.close(w)
        os.close(dr)
        os.close(sr)
        kids.append(_Kid(spec, pid, r, dw, started, data_fd=sw, index=i))
    # this process no longer renders those: the scan does not import their libraries
    writers.rendered_elsewhere({k.spec.format for k in kids}, subject)
    return Preforked(kids, subject, len(specs))


def _early_child(spec: OutputSpec, options: WriterOptions, subject: str, data_fd: int,
                 out_fd: int, digest_fd: int) -> None:  # pragma: no cover - a child
    """A child forked by ``prefork``: import the writer, wait for the scan, render it to
    ``out_fd``; exits, never returns (0 once its text is written)."""
    code = 1
    try:
        from .. import writers
        from ..model import ScanResult
        from ..writers._common import receive_digest

        writers.preload(get_writer(spec.format, subject).imports)
        head = _read_exact(data_fd, _LENGTH)
        if head is None:  # the scan failed: nothing to render
            code = 0
            return
        data = _read_exact(data_fd, int.from_bytes(head, "big"))
        os.close(data_fd)
        if data is None:
            return
        import json

        result = ScanResult.from_dict(json.loads(data.decode("utf-8", "surrogatepass")))
        del data
        receive_digest(result, digest_fd)
        _fork.write_all(out_fd, render(result, spec, options, subject).encode("utf-8", "surrogatepass"))
        code = 0
    finally:
        os._exit(code)


def _read_exact(fd: int, n: int) -> bytes | None:
    """``n`` bytes from ``fd``; None where it ends first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _collect(kids: list[_Kid]) -> None:
    """Read every child's pipe as it fills (a child that is done first is not held up
    writing to a full pipe), then reap each: its text when it exited 0."""
    import selectors

    from .. import stagetime

    chunks: dict[int, list[bytes]] = {k.fd: [] for k in kids}
    by_fd = {k.fd: k for k in kids}
    with selectors.DefaultSelector() as sel:
        for k in kids:
            sel.register(k.fd, selectors.EVENT_READ)
        while by_fd:
            for key, _ in sel.select():
                fd = int(key.fd)
                b = os.read(fd, 1 << 20)
                if b:
                    chunks[fd].append(b)
                    continue
                sel.unregister(fd)
                os.close(fd)
                k = by_fd.pop(fd)
                _, status, usage = os.wait4(k.pid, 0)
                stagetime.record(f"output {k.spec.format} (forked child)",
                                 time.perf_counter() - k.started,
                                 usage.ru_utime + usage.ru_stime)
                if os.waitstatus_to_exitcode(status) == 0:
                    k.text = b"".join(chunks[fd]).decode("utf-8", "surrogatepass")


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
         subject: str = "scan", early: Preforked | None = None) -> None:
    """Render every output of ``result`` (a ``subject``), then write them: standard output
    first, files atomically (nothing is written when a writer fails)."""
    options = options or WriterOptions()
    if sys.stdout is None and any(s.path is None for s in specs):
        raise UsageError("standard output is closed: give the output a file (-o FORMAT=PATH)")
    rendered = list(zip(specs, render_all(result, specs, options, subject, early),
                        strict=True))
    for spec, text in rendered:
        if spec.path is None:
            sys.stdout.write(text)
            sys.stdout.flush()
    for spec, text in rendered:
        if spec.path is not None:
            write_atomic(spec.path, text)


#: which commands write each subject's formats (the docs' formats section); a subject with
#: writers but no entry here fails :func:`formats_markdown`
SUBJECT_COMMANDS = {
    "scan": "`scan`, `probe` (`-o`)",
    "gate": "`gate` (`-o`)",
    "check": "`check` (`-o`)",
    "reconcile": "`reconcile` (`-o`)",
    "rows": "`inventory query`, `affected`, `compat`, `hosts`, `images` (`--format`)",
    "drift": "`inventory drift` (`--format`)",
    "metrics": "`inventory metrics`",
}

#: the lines that open and close the generated section in ``docs/usage.md``
FORMATS_BEGIN = ("<!-- formats: generated from the writer registry (src/gpusbom/writers/) by "
                 "scripts/gen-format-docs; do not edit -->")
FORMATS_END = "<!-- /formats -->"


def formats_markdown() -> str:
    """The output formats section of ``docs/usage.md``: every registered writer, by the
    commands that write it, with its description (``scripts/gen-format-docs``)."""
    from ..writers import subjects

    order = list(SUBJECT_COMMANDS)
    out = [FORMATS_BEGIN, "", "| Commands | Format | Writes |", "|---|---|---|"]
    for subject in sorted(subjects(), key=lambda s: (
            order.index(s) if s in order else len(order), s)):
        if subject not in SUBJECT_COMMANDS:
            raise KeyError(f"writers of subject {subject!r}: name its commands in "
                           "gpusbom.cli.output.SUBJECT_COMMANDS")
        commands = SUBJECT_COMMANDS[subject]
        for fmt, cls in all_writers(subject).items():
            desc = " ".join(cls.description.split()).replace("|", "\\|")
            out.append(f"| {commands} | `{fmt}` | {desc} |")
            commands = ""  # named on the subject's first row only
    return "\n".join([*out, "", FORMATS_END]) + "\n"
