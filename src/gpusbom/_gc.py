"""The cyclic garbage collector paused while a command loads what it keeps to its end.

A command first imports its modules and loads its tables (the catalog, the advisory
database, the collectors: most of a small scan's 300,000-odd allocations), none of which is
garbage; at the CLI's cadence (``cli.app.GC_THRESHOLD``) the collector still walked them a
few times in every small image's scan (full passes over the growing heap). The CLI pauses it
at start (:func:`pause`) and resumes it when the command starts its own work
(:func:`resume`: ``cli._common.exits`` before the command runs, or, for ``scan``, once the
loaded objects are frozen, ``scan.run``). Only a pause made here is undone, so a library user
who disabled the collector keeps it disabled.
"""

from __future__ import annotations

import gc

__all__ = ["pause", "resume"]

_paused = False


def pause() -> None:
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    global _paused
    if _paused:
        _paused = False
        gc.enable()
