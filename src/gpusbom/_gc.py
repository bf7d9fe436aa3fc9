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

__all__ = ["freeze_loaded", "pause", "resume"]

_paused = False
_frozen = False


def freeze_loaded() -> None:
    """Once per process: what is loaded now (modules, the advisory database, templates)
    lives to the process's end; ``gc.freeze`` takes it out of the collector's passes, which
    then walk only what the work allocates. An inventory question at 10,000 hosts makes
    ~100,000 objects: with the advisory database in sight its full passes took 50-80 ms of
    the 60-70 ms answer (``affected --all``: 64-148 ms, 58-69 with no collection)."""
    global _frozen
    if not _frozen:
        _frozen = True
        gc.freeze()


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
