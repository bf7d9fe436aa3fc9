"""A rich progress display on stderr (layers and bytes), only for terminals."""

from __future__ import annotations

import sys
from typing import Any


class RichProgress:
    """Implements ``fsview.types.ProgressSink``."""

    def __init__(self) -> None:
        # rich loads only when a terminal shows the progress (not for -q or redirected runs)
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TransferSpeedColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeElapsedColumn(),
            console=Console(file=sys.stderr),
            transient=True,
        )
        self._task: Any = None

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def layer_started(self, index: int, total: int, size: int | None, name: str) -> None:
        desc = f"layer {index + 1}/{total}" if total else f"layer {index + 1}"
        self._task = self._progress.add_task(desc, total=size)
        self._progress.refresh()  # show each layer at least once, even when it is quick

    def layers_started(self, total: int, size: int | None, name: str) -> None:
        """Several layers read at once, shown as one bar."""
        self._task = self._progress.add_task(f"{total} layers", total=size)
        self._progress.refresh()

    def advance(self, nbytes: int) -> None:
        if self._task is not None:
            self._progress.advance(self._task, nbytes)

    def layer_done(self, index: int) -> None:
        if self._task is not None:
            self._progress.remove_task(self._task)
            self._task = None


def wants_progress(quiet: bool) -> bool:
    return not quiet and sys.stderr is not None and sys.stderr.isatty()
