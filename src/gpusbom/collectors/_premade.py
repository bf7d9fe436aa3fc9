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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def premade(fs: Any, kind: str, path: str, parse: Callable[[], T]) -> T:
    """The result of ``kind`` for ``path`` a walk worker made, else ``parse()``."""
    got = getattr(fs, "premade", None)
    if got:
        hit = got.get((kind, path))
        if hit is not None:
            return hit  # type: ignore[no-any-return]
    return parse()
