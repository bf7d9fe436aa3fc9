"""Paragraphs of a deb822 file (dpkg status), as python-debian's own parser reads them.

``debian.deb822.Deb822.iter_paragraphs(lines, use_apt_pkg=False)`` builds a case-insensitive
ordered dict per paragraph through several generator layers and a per-line decode; for a
status file of hundreds of packages that is most of a small image's collection time, and the
module's import (with charset_normalizer) a tenth of the start-up. :func:`iter_paragraphs` is
the same algorithm on text lines, line for line (python-debian 1.1): ``#`` lines skipped
anywhere, leading blank lines of each paragraph skipped, ``\\r``/``\\n`` stripped from both
ends of a line, a paragraph ended by an empty or ASCII-whitespace line, the inline-PGP states,
a field line matched by the same expression, continuation lines kept whole, other lines
ignored, the iteration ended by the first paragraph without a field, later duplicate keys
replacing earlier ones, keys compared lower-cased, and ``Deb822.validate_input``'s
``ValueError`` on a value whose extra line breaks (``\\x0b``, ``\\x85``...) leave a line that
does not start with whitespace. ``tests/collectors/test_stanzas.py`` checks it against
python-debian on real status files and on odd input.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

# python-debian's Deb822._new_field_re and Deb822._gpgre (str instead of bytes: the lines
# are valid text, so the bytes and str forms match the same lines)
_FIELD_RX = re.compile(r"^(?P<key>[^: \t\n\r\f\v]+)\s*:\s*(?P<data>(?:\S+(\s+\S+)*)?)\s*$")
_GPG_RX = re.compile(r"^-----(?P<action>BEGIN|END) PGP (?P<what>[^-]+)-----[\r\t ]*$")
# bytes.isspace(): ASCII whitespace only
_ASCII_WS = " \t\n\r\x0b\x0c"
# str.splitlines() breaks a line on these besides \n and \r
_OTHER_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _blank(line: str) -> bool:
    return not line.strip(_ASCII_WS)


def _payload(lines: Iterator[str]) -> list[str]:
    """One paragraph's payload lines (``_skip_useless_lines`` + ``_split_gpg_and_payload``)."""
    pre: list[str] = []
    out: list[str] = []
    state = "SAFE"
    # the paragraph's leading lines: comments and blank lines (python-debian's at_beginning
    # and first_line skips together: an empty line is blank)
    for raw in lines:
        if raw.startswith("#"):
            continue
        line = raw.strip("\r\n")
        if _blank(line):
            continue
        break
    else:
        return out
    while True:
        c = line[:1]
        m = _GPG_RX.match(line) if c == "-" else None
        # a line whose first character is not ASCII whitespace is not blank
        empty = c in _ASCII_WS and _blank(line)
        if m is None:
            if state == "SAFE":
                if not empty:
                    out.append(line)
                elif not pre:
                    break
            elif state == "SIGNED MESSAGE":
                if empty:
                    state = "SAFE"
                else:
                    pre.append(line)
            # state "SIGNATURE" (or another armour name): the line is dropped
        else:
            if m.group("action") == "BEGIN":
                state = m.group("what")
            elif m.group("action") == "END":
                break
            if not empty and not out:
                pre.append(line)
        for raw in lines:
            if not raw.startswith("#"):
                line = raw.strip("\r\n")
                break
        else:
            break
    return out


def _validate(value: str) -> None:
    """``Deb822.validate_input`` for a value holding a line break other than ``\\n``."""
    if value.endswith("\n"):
        raise ValueError("value must not end in '\\n'")
    for no, line in enumerate(value.splitlines()):
        if no == 0:
            continue
        if not line:
            raise ValueError("value must not have blank lines")
        if not line[0].isspace():
            raise ValueError("each line must start with whitespace")


def _paragraph(payload: list[str]) -> dict[str, str]:
    fields: dict[str, str] = {}
    curkey: str | None = None
    content = ""
    for line in payload:
        # a line starting with a space or tab cannot be a field line (the key excludes them)
        m = None if line[0] in " \t" else _FIELD_RX.match(line)
        if m is not None:
            if curkey:
                _store(fields, curkey, content)
            curkey = m.group("key")
            content = m.group("data")
            continue
        # python-debian skips lines that are entirely whitespace (str.isspace: Unicode)
        if line and line[0].isspace() and not line.isspace():
            content += "\n" + line
    if curkey:
        _store(fields, curkey, content)
    return fields


def _store(fields: dict[str, str], key: str, value: str) -> None:
    if "\n" in value and _OTHER_BREAKS.search(value):
        _validate(value)
    fields[key.lower()] = value


def iter_paragraphs(lines: Iterable[str]) -> Iterator[dict[str, str]]:
    """Each paragraph of ``lines`` (text lines, line ends kept) as a dict keyed by the
    lower-cased field name, until the first paragraph without a field (as python-debian)."""
    it = iter(lines)
    while True:
        fields = _paragraph(_payload(it))
        if not fields:
            return
        yield fields
