"""Package-declared file digests as evidence: dpkg ``md5sums`` and a wheel's ``RECORD``.

A package manager records a digest of every file it installs: dpkg writes
``/var/lib/dpkg/info/<pkg>.md5sums`` (``<md5>  <path relative to />``), pip writes the
dist-info ``RECORD`` (``path,sha256=<urlsafe base64, no padding>,size``). The package
catalogers (dpkg, python) register each package's manifest while they claim its files;
after fusion, each file that is evidence of that package (a library a stack collector
found, a GPU binary, the dist-info ``METADATA``) gets the digest its manifest declares
(``Evidence.declared_digest``, ``md5:HEX`` / ``sha256:HEX``).

No extra read of layer data: the manifests were captured in the single layer pass (the
python collector reads ``RECORD`` for ownership anyway; dpkg captures ``info/*.md5sums``),
and only the manifests of packages with file evidence are parsed, only for those files.
A declared digest says what the package shipped, not what the file now holds: a file
changed after installation keeps its declared digest (the GPU binary's computed
``sha256`` beside it tells). ``GPUSBOM_NO_DECLARED_DIGESTS=1`` turns this off
(benchmarks/scan_gpu_binaries.py measures the cost).
"""

from __future__ import annotations

import base64
import binascii
import csv
import dataclasses
import logging
import posixpath
import re
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any

from .. import settings
from ..model import Component
from ._premade import PremadeParser, text_of
from .base import OwnershipIndex
from .python import _under, record_base

__all__ = ["attach_declared_digests", "parse_md5sums_digests", "parse_record_digests"]

log = logging.getLogger(__name__)


def _enabled() -> bool:
    return not settings.get("no_declared_digests")


def parse_md5sums_digests(text: str, names: Collection[str] | None = None
                          ) -> Iterator[tuple[str, str]]:
    """(absolute path, ``md5:HEX``) of a dpkg ``md5sums`` file; with ``names``, only the
    lines of files with one of those base names (the others are not checked at all)."""
    for ln in _chunks_naming(text, names) if names is not None else text.split("\n"):
        if len(ln) < 35 or ln[32] != " ":
            continue
        rel = (ln[34:] if ln[33] in " *" else ln[33:]).lstrip("/")
        if names is not None and rel.rsplit("/", 1)[-1] not in names:
            continue
        digest = ln[:32].lower()
        if rel and rel != "." and all(c in "0123456789abcdef" for c in digest):
            yield "/" + rel, "md5:" + digest


def _chunks_naming(text: str, names: Collection[str]) -> list[str]:
    """The newline-separated chunks of ``text`` that contain one of ``names``, in order (all
    of them when a name is empty): a file's base name is part of its manifest line, and
    finding the few lines that hold it is C-level work instead of a Python test per line."""
    if any(not n for n in names):
        return text.split("\n")
    starts: set[int] = set()
    for n in names:
        i = text.find(n)
        while i >= 0:
            start = text.rfind("\n", 0, i) + 1
            starts.add(start)
            end = text.find("\n", i)
            i = text.find(n, end) if end >= 0 else -1
    out = []
    for start in sorted(starts):
        end = text.find("\n", start)
        out.append(text[start:end] if end >= 0 else text[start:])
    return out


#: a RECORD path whose base name is "", "." or ".." (it names another file once normalised,
#: so its line need not hold that file's name); conservative: "/..." and ",,"-like rows too
_SPECIAL_RECORD_PATH = re.compile(r"(?:^|[/\s])[\s.]*,")
#: what precedes the comma of every _SPECIAL_RECORD_PATH match in ASCII text (the regex
#: tries every position of a RECORD of megabytes; str.find does not)
_SPECIAL_PAIRS = tuple(c + "," for c in "/. \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f")


def _special_names(text: str, base: str, names: Collection[str]) -> bool:
    """Whether a row whose path ends in "", "." or ".." could name one of ``names``: such a
    path, normalised, ends in one of its own components (then followed by "/" in the text)
    or in one of ``base``'s. Seldom so (a wanted METADATA is never a directory)."""
    parts = set(posixpath.normpath(base).split("/"))
    return any(n + "/" in text or n in parts for n in names)


def _special_record_rows(text: str) -> bool:
    """Whether ``text`` may hold a row whose path's base name is "", "." or "..": a comma
    at the start or after "/", "." or white space (the regex only for non-ASCII text)."""
    if not text.isascii():
        return _SPECIAL_RECORD_PATH.search(text) is not None
    return text.startswith(",") or any(p in text for p in _SPECIAL_PAIRS)


def _record_digest(value: str) -> str | None:
    """``sha256=<urlsafe b64>`` -> ``sha256:HEX`` (None when empty or malformed)."""
    alg, sep, b64 = value.strip().partition("=")
    if not sep or not b64 or not alg.isalnum():
        return None
    try:
        raw = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4))
    except (binascii.Error, ValueError):
        return None
    return f"{alg.lower()}:{raw.hex()}" if raw else None


def parse_record_digests(text: str, base: str, names: Collection[str] | None = None
                         ) -> Iterator[tuple[str, str]]:
    """(absolute path, ``ALG:HEX``) of a dist-info ``RECORD`` (``base``: the directory
    holding the ``.dist-info``); rows without a hash (RECORD itself, .pyc) are skipped.
    With ``names``, only rows whose file has one of those base names are decoded."""
    rows: Iterable[list[str]]
    if '"' in text:  # quoted fields may span lines: the csv module reads the whole text
        rows = csv.reader(text.splitlines())
    else:
        if names is not None and (not _special_names(text, base, names)
                                  or not _special_record_rows(text)):
            # only the lines holding a wanted name (each chunk split as splitlines would)
            lines = [ln for chunk in _chunks_naming(text, names) for ln in chunk.splitlines()]
        else:
            lines = text.splitlines()
        rows = (ln.split(",") for ln in lines)
    for row in rows:
        if len(row) < 2 or not row[1]:
            continue
        if names is not None:
            last = row[0].strip().rsplit("/", 1)[-1]
            # "", "." and ".." name another file once normalised: those go the long way
            if last not in names and last not in ("", ".", ".."):
                continue
        path = _under(base, row[0])
        digest = _record_digest(row[1])
        if path is not None and digest is not None:
            yield path, digest


#: the file a package's component has as evidence unless fusion added more (a Python
#: distribution's METADATA, a Debian package's status file), by manifest kind: a host walk's
#: workers read those rows of each manifest they captured (``own_rows``)
OWN_NAMES = {"record": frozenset({"METADATA"}), "md5sums": frozenset({"status"})}


def own_rows(kind: str, text: str, base: str) -> list[tuple[str, str]]:
    """What ``attach_declared_digests`` reads of a manifest for a package whose only
    evidence is its own metadata file (``OWN_NAMES``): the same parse, made where the
    manifest was captured (``host/premake.py``)."""
    names = OWN_NAMES[kind]
    return list(parse_md5sums_digests(text, names) if kind == "md5sums"
                else parse_record_digests(text, base, names))


def attach_declared_digests(components: list[Component], ownership: OwnershipIndex,
                            read_text: Callable[[str], str],
                            premade: dict[tuple[str, str], Any] | None = None) -> None:
    """Set ``declared_digest`` on the file evidence of each package with a manifest.

    ``read_text``: the filesystem view's ``read_text`` (captured content, in memory).
    ``premade``: the view's parses made by a host walk's workers (``collectors/_premade.py``):
    a manifest's rows for the package's own metadata file are taken from there, not read
    again (decoding and searching a torch RECORD of megabytes, hundreds of md5sums)."""
    if not _enabled():
        return
    for c in components:
        m = ownership.manifest(c)
        if m is None:
            continue
        kind, manifest, base = m
        wanted: dict[str, list[int]] = {}
        for i, ev in enumerate(c.evidence):
            if ev.path and ev.path != manifest and ev.declared_digest is None:
                wanted.setdefault(ownership.key(ev.path), []).append(i)
        if not wanted:
            continue
        names = {k.rsplit("/", 1)[-1] for k in wanted}
        own = OWN_NAMES.get(kind)
        made = premade.get(("manifest-digests", manifest)) \
            if premade and own is not None and names == own else None
        if made is not None:
            _attach(c, wanted, ownership, names, made)
            continue
        try:
            text = read_text(manifest)
        except Exception as exc:  # noqa: BLE001 - a declared digest is extra evidence, never required
            log.debug("declared digests: cannot read %s: %s", manifest, exc)
            continue
        # most manifests name none of the wanted files (a dpkg package's only evidence is
        # the status file): a substring test skips those without parsing them. A file's
        # base name is in its manifest line or, for a RECORD path that climbs (..), in base;
        # a CSV-quoted name (with ") is unquoted by the parser, so it is never skipped.
        if not any(n in text or n in base or '"' in n for n in names):
            continue
        entries = (parse_md5sums_digests(text, names) if kind == "md5sums"
                   else parse_record_digests(text, base, names))
        _attach(c, wanted, ownership, names, entries)


def _attach(c: Component, wanted: dict[str, list[int]], ownership: OwnershipIndex,
            names: Collection[str], entries: Iterable[tuple[str, str]]) -> None:
    for path, digest in entries:
        if path.rsplit("/", 1)[-1] not in names:
            continue  # the cheap test first: most manifest lines are other files
        for i in wanted.get(ownership.key(path), ()):
            c.evidence[i] = dataclasses.replace(c.evidence[i], declared_digest=digest)


#: what a host walk's workers parse for the digests (``host/premake.py``): the row of a
#: distribution's METADATA in its RECORD, its declared digest
PREMADE = (
    PremadeParser("manifest-digests", lambda p: p.endswith(".dist-info/RECORD"),
                  lambda p, c: own_rows("record", text_of(c), record_base(p))),
)
