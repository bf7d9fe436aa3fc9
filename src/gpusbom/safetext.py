"""Text from untrusted input, made safe for every output, and bounded JSON parsing.

Image file names are bytes. Tar headers and the host's file system may hold names that
are not UTF-8 (old locales: ``caf\\xe9``); gpusbom decodes them with ``surrogateescape``
so that look-ups stay exact, but such strings cannot be written as UTF-8 (JSON, XML, the
inventory) and PostgreSQL rejects NUL in text. Every scan result therefore passes
through :func:`sanitize_result` once, before any writer, log line or the inventory
sees it. The escaped form is lossless and documented in the README (Safety):

- a byte that is not valid UTF-8 is written ``\\xNN`` (two lower-case hex digits);
- NUL and the other C0 control characters and DEL are written ``\\xNN`` too (a newline
  in a file name must not split an SBOM line, a table row or an error line; text fields
  such as descriptions keep their newlines and tabs);
- a backslash that comes before ``x`` or another backslash is doubled, so a name that
  really holds ``\\xe9`` reads back as those four characters.

Decoding (:func:`unescape_text`) reverses it exactly.

JSON from an image, a registry, an SBOM or an advisory file is parsed with
:func:`loads_json`: a size bound and a nesting bound (``MAX_JSON_DEPTH``) turn a
hostile document into a ``JSONDecodeError`` (so each caller's existing handling names the
input and exits 3) rather than a ``RecursionError`` deep in a writer.
"""

from __future__ import annotations

import json
import re
from dataclasses import fields, is_dataclass
from typing import Any

from .errors import GpusbomError

MAX_JSON_DEPTH = 128
"""Nesting bound for untrusted JSON. Real manifests, configs, SBOMs and advisories nest
fewer than 20 levels; the stdlib decoder fails near 1000 and our walkers recurse."""

MAX_JSON_BYTES = 512 << 20
"""Size bound for one untrusted JSON document held in memory (512 MiB)."""

# surrogates (undecodable bytes), C0 controls, DEL, and a backslash that needs doubling; the
# surrogates a class of their own: one class spanning both compiled 5-10x slower (a charset
# beyond Latin-1 with several ranges is tabulated), 3 ms of every run; they match the same
_PATH_NEEDS = re.compile(r"[\x00-\x1f\x7f]|[\ud800-\udfff]|\\(?=[x\\])")
_TEXT_NEEDS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|[\ud800-\udfff]|\\(?=[x\\])")
_ESCAPED = re.compile(r"\\(\\|x[0-9a-f]{2})")


def _sub(m: re.Match[str]) -> str:
    ch = m.group(0)
    if ch == "\\":
        return "\\\\"
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape: the original byte
        return f"\\x{code - 0xDC00:02x}"
    if 0xD800 <= code <= 0xDFFF:  # a lone surrogate from JSON "\\udXXX": not a byte
        return f"\\u{code:04x}"
    return f"\\x{code:02x}"


def escape_path(s: str) -> str:
    """The lossless escaped form of a file name (every control character escaped)."""
    return _PATH_NEEDS.sub(_sub, s) if _PATH_NEEDS.search(s) else s


def escape_text(s: str) -> str:
    """The lossless escaped form of free text (newline, tab and CR kept)."""
    return _TEXT_NEEDS.sub(_sub, s) if _TEXT_NEEDS.search(s) else s


def unescape_text(s: str) -> str:
    """Reverse :func:`escape_path` / :func:`escape_text`: undecodable bytes come back as
    surrogateescape characters (``os.fsencode`` gives the original bytes)."""

    def back(m: re.Match[str]) -> str:
        g = m.group(1)
        if g == "\\":
            return "\\"
        code = int(g[1:], 16)
        return chr(0xDC00 + code) if code >= 0x80 else chr(code)

    return _ESCAPED.sub(back, s)


def one_line(s: str) -> str:
    """``s`` for an error or log line: one line, every control character visible."""
    return escape_path(s)


_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}


def _field_names(cls: type) -> tuple[str, ...] | None:
    """A dataclass's field names (None for any other type), once per class: ``fields()``
    builds its tuple on every call, and a result has thousands of model objects."""
    try:
        return _FIELD_NAMES[cls]
    except KeyError:
        # is_dataclass(obj) and not a class itself: a class's type (a metaclass) has no fields
        names = tuple(f.name for f in fields(cls)) if is_dataclass(cls) and not issubclass(
            cls, type) else None
        _FIELD_NAMES[cls] = names
        return names


def sanitize(obj: Any, *, _depth: int = 0) -> Any:
    """Escape every string inside ``obj`` (model dataclasses, lists, dicts), in place where
    the container is mutable; returns the (possibly new) object."""
    if isinstance(obj, str):
        return escape_text(obj)
    if _depth > 64:  # the model is shallow; anything deeper came from input we already bound
        return obj
    names = _field_names(type(obj))
    if names is not None:
        for name in names:
            value = getattr(obj, name)
            if name == "path" and isinstance(value, str):
                new = escape_path(value)
            else:
                new = sanitize(value, _depth=_depth + 1)
            if new is not value:
                object.__setattr__(obj, name, new)
        return obj
    if isinstance(obj, list):
        for i, v in enumerate(obj):
            new = sanitize(v, _depth=_depth + 1)
            if new is not v:
                obj[i] = new
        return obj
    if isinstance(obj, dict):
        changed = {}
        for k, v in obj.items():
            nk = sanitize(k, _depth=_depth + 1) if isinstance(k, str) else k
            nv = sanitize(v, _depth=_depth + 1)
            if nk is not k or nv is not v:
                changed[k] = (nk, nv)
        for k, (nk, nv) in changed.items():
            del obj[k]
            obj[nk] = nv
        return obj
    if isinstance(obj, tuple):
        items = tuple(sanitize(v, _depth=_depth + 1) for v in obj)
        return items if any(a is not b for a, b in zip(items, obj, strict=False)) else obj
    return obj


def sanitize_result(result: Any) -> Any:
    """Escape every string of a ScanResult or its parts (see the module docstring);
    call exactly once per string (escaping is not idempotent for backslashes)."""
    return sanitize(result)


REDACTED = "[REDACTED]"

# names of environment variables whose values are credentials (case-insensitive, whole name)
_SECRET_ENV = re.compile(
    r"(?i)^(?:.*(?:TOKEN|PASSWORD|PASSWD|PASSPHRASE|SECRET|CREDENTIALS?|_PASS|_PWD|"
    r"API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|SECRET_?KEY|AUTH_?KEY|_AUTH)(?:_[A-Z0-9]+)?"
    r"|AWS_SECRET_.*|.*_DSN|DB_URL|DATABASE_URL)$"
)
# a URL with a password in its user information: scheme://user:password@host
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*:)([^/\s@]+)@")


def secret_env_name(name: str) -> bool:
    """Does an environment variable of this name hold a credential?"""
    return bool(_SECRET_ENV.match(name))


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with secret-looking values replaced by ``[REDACTED]`` (by name:
    ``*_TOKEN``, ``*_PASSWORD``, ``AWS_SECRET_*``, ``*_API_KEY``, ...; by value: the
    password of a ``scheme://user:password@host`` URL)."""
    out: dict[str, str] = {}
    for k, v in env.items():
        if secret_env_name(k):
            out[k] = REDACTED if v else v
        else:
            out[k] = _URL_PASSWORD.sub(lambda m: m.group(1) + REDACTED + "@", v)
    return out


class JSONTooDeepError(GpusbomError, json.JSONDecodeError):
    """Nesting beyond ``MAX_JSON_DEPTH`` (a ``JSONDecodeError``, so callers' handling of
    malformed JSON applies)."""


def _too_deep(text: str | bytes, limit: int) -> JSONTooDeepError:
    doc = text if isinstance(text, str) else text[:200].decode("utf-8", "replace")
    return JSONTooDeepError(f"JSON nested deeper than {limit} levels", doc, 0)


def _depth_exceeds(doc: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, d = stack.pop()
        if d > limit:
            return True
        if isinstance(node, dict):
            stack.extend((v, d + 1) for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((v, d + 1) for v in node if isinstance(v, (dict, list)))
    return False


def loads_json(
    data: str | bytes | bytearray,
    *,
    max_depth: int = MAX_JSON_DEPTH,
    max_bytes: int = MAX_JSON_BYTES,
) -> Any:
    """``json.loads`` for untrusted input, with a size and a nesting bound.

    Raises ``json.JSONDecodeError`` (malformed, too deep, too large) or
    ``UnicodeDecodeError`` (bytes that are not UTF-8), both ``ValueError``.
    """
    if len(data) > max_bytes:
        head = data[:200] if isinstance(data, str) else bytes(data[:200]).decode("utf-8", "replace")
        raise json.JSONDecodeError(
            f"JSON document of {len(data)} bytes is larger than the {max_bytes}-byte bound",
            head,
            0,
        )
    if isinstance(data, bytearray):
        data = bytes(data)
    try:
        doc = json.loads(data)
    except RecursionError:
        raise _too_deep(data, max_depth) from None
    # a document with fewer brackets than the bound cannot nest deeper (cheap C count)
    opens = data.count("[") + data.count("{") if isinstance(data, str) else data.count(b"[") + data.count(b"{")
    if opens > max_depth and _depth_exceeds(doc, max_depth):
        raise _too_deep(data, max_depth)
    return doc
