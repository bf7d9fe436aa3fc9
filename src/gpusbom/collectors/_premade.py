"""Package-database files parsed where they were read: in the host walk's workers
(``host/premake.py`` parses them there).

The parsing that package catalogers do per package (a wheel's ``METADATA`` and ``RECORD``,
dpkg's ``status`` and ``info/*.list``) is a pure function of one file's bytes. On a host the
walk runs in forked workers (``host/parwalk.py``); each worker parses the files of these
kinds it captured and sends the results back with the entries, so the parsing runs on
every core instead of after the walk on one. A collector asks ``premade`` for the result:
it gets the worker's when there is one (the same function of the same bytes), else it
parses as always; a file a worker could not parse is parsed again by the collector, so
its error is reported the usual way. Views other than a host's carry no results and nothing changes.

The parses are declared by the modules that own them (each module's ``PREMADE``: a
``PremadeParser`` per kind, with the errors its parse may raise on a bad file), and
gathered by ``gpusbom.collectors.premade_parsers``: the host walk derives what it parses
from these declarations, not from copies of the collectors' file patterns.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .base import VIEW_ERRORS

if TYPE_CHECKING:
    from ..fsview.types import ContentRef

__all__ = ["PARSE_ERRORS", "PremadeParser", "premade", "text_of"]

T = TypeVar("T")

#: what a parse of a bad or unreadable captured file raises: the file's read (view and
#: source errors, OSError), a malformed value (ValueError, UnicodeError), a missing field
#: (LookupError), a malformed CSV row (csv.Error)
PARSE_ERRORS: tuple[type[Exception], ...] = (*VIEW_ERRORS, ValueError, LookupError, csv.Error)


@dataclass(frozen=True)
class PremadeParser:
    """One kind of result a walk worker may make: for a captured file whose path ``wants``
    accepts, ``parse(path, content)`` is kept under ``(kind, path)``; a parse that raises
    one of ``errors`` is skipped (the collector parses the file again and reports it).
    ``returns``: the classes whose instances a result may hold besides plain values (the
    only ones the parent may read back from a worker: ``gpusbom._wire``)."""

    kind: str
    wants: Callable[[str], bool]
    parse: Callable[[str, ContentRef], Any]
    errors: tuple[type[Exception], ...] = PARSE_ERRORS
    returns: tuple[type, ...] = ()


def text_of(content: ContentRef) -> str:
    """A captured file's text (UTF-8, undecodable bytes replaced: as the collectors read)."""
    return content.read().decode("utf-8", errors="replace")


def premade(fs: Any, kind: str, path: str, parse: Callable[[], T]) -> T:
    """The result of ``kind`` for ``path`` a walk worker made, else ``parse()``."""
    got = getattr(fs, "premade", None)
    if got:
        hit = got.get((kind, path))
        if hit is not None:
            return hit  # type: ignore[no-any-return]
    return parse()
