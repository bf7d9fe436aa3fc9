"""A filesystem view of a host built from the directories collectors need.

A host is not an image: walking all of ``/`` would read network mounts, caches
and home directories. Only the install roots collectors look at are walked
(``HOST_ROOTS`` plus ``--paths``); links are recorded, never followed;
``/proc``, ``/sys``, ``/dev``, ``/run``, ``/tmp`` are never walked.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from ..fsview.spec import PathMatcher
from ..fsview.types import Entry, EntryKind, Limits, Spool
from ..fsview.view import FsView
from ..model import LayerRef
from .parwalk import walk_parallel
from .walker import (
    HOST_ROOTS,
    SKIP_NAMES,
    SKIP_PATHS,
    _HostWalker,
    _walk_roots,
    expand_roots,
)

__all__ = ["HOST_ROOTS", "SKIP_NAMES", "SKIP_PATHS", "expand_roots", "host_view"]


def host_view(
    root: str,
    matcher: PathMatcher,
    spool: Spool,
    limits: Limits,
    extra: Iterable[str] = (),
    analyze_binaries: bool = False,
    workers: int = 1,
    started: Callable[[], None] | None = None,
) -> FsView:
    """The one-layer view of the walk roots below ``root``; ``view.unreadable`` lists EACCES.

    ``extra`` adds walk roots (``--paths``). OS package licenses (``/usr/share/doc``) are
    not read unless ``extra`` names that directory. ``workers`` > 1 walks the directories
    in that many forked processes (``host/parwalk.py``; the same view); ``started`` is
    called once they run (at once when there are none).
    """
    real_root = os.path.realpath(root)
    walker = _HostWalker(matcher, spool, limits, skip_host=True)
    walker.analyze = analyze_binaries
    walker._keep(Entry("/", EntryKind.DIR, mode=0o755))
    roots = expand_roots(real_root, [*HOST_ROOTS, *extra])
    if workers > 1:
        walker.defer = []
        _walk_roots(walker, real_root, roots)
        walk_parallel(walker, real_root, roots, workers, started)
    else:
        if started is not None:
            started()
        _walk_roots(walker, real_root, roots)
    view = FsView(walker.entries, [LayerRef(index=0, diff_id=None)], limits)
    view.unreadable = walker.unreadable
    view.file_count = walker.count
    if walker.premade:
        view.premade = walker.premade
    return view


