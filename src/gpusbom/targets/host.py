"""A host root as a scan target (``scan --host``/``--root``): this machine's ``/``, a mounted
node root or a host snapshot, read by ``host.source`` (its files, and procfs/sysfs/NVML as
the host view the host-facts enricher reads)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..fsview.types import Spool
from .base import Pending, TargetSource, View

if TYPE_CHECKING:
    from ..advisories.db import AdvisoryDB
    from ..collectors import Collector
    from ..fsview.types import ProgressSink
    from ..pipeline import HostOptions, ScanRequest


class HostRootSource(TargetSource):
    can_probe = True
    # what the walk builds (the view's entries, the parsed package files, the components:
    # hundreds of thousands of objects) lives to the end, and the young-generation passes
    # over them took ~40 of the scanning process's passes (0.09-0.11 CPU-s) on the
    # development VM; the walk's workers run with it paused too
    keeps_gc_paused = True

    @staticmethod
    def named_by(req: ScanRequest) -> bool:
        return req.host is not None

    @property
    def host(self) -> HostOptions:
        assert self.req.host is not None  # noqa: S101 - named_by said so
        return self.req.host

    @property
    def name(self) -> str:
        return f"host:{self.host.root}"

    def check(self) -> None:
        if self.req.reference:
            raise UsageError("--host/--root scan a machine: give no image")
        if self.req.probe is not None and self.host.root != "/" \
                and not same_machine(self.host.root):
            raise UsageError(
                f"--probe runs kernels on this machine's GPUs, but --root {self.host.root} "
                "is not this machine's root (its proc/sys/kernel/random/boot_id differs or "
                "is missing: a snapshot or another node)")

    def prepare(self, load_db: Callable[[], AdvisoryDB]) -> ScanRequest:
        from ..host.source import start_nvml

        # NVML asked now, in a process of its own (before any thread: host/nvml.py), and the
        # advisory database loaded while the host walk's workers run (pipeline.Pending)
        return replace(self.req, advisory_db=None, advisory_pending=Pending(load_db),
                       nvml_answer=start_nvml(self.host.root, self.host.use_nvml))

    def node_root(self) -> str | None:
        return self.host.root

    @contextlib.contextmanager
    def open(self, classes: Sequence[type[Collector]], progress: ProgressSink
             ) -> Iterator[View]:
        from ..collect import build_matcher
        from ..host.source import open_host_view

        req, host = self.req, self.host
        matcher = build_matcher(classes)
        beside = () if req.advisory_pending is None else (req.advisory_pending.run,)
        with Spool(req.limits) as spool:
            hv, target = open_host_view(host.root, matcher, spool, req.limits,
                                        paths=host.paths, use_nvml=host.use_nvml,
                                        analyze_binaries=host.analyze_binaries,
                                        beside=beside, nvml_answer=req.nvml_answer)
            yield View(target=target, fs=hv.fs, host=hv)


def same_machine(root: str) -> bool:
    """Is ROOT this running machine's root (a node's / mounted in a container, with its /proc
    at ROOT/proc)? The kernel's boot id is the same only on the same running kernel."""
    rel = "proc/sys/kernel/random/boot_id"
    try:
        with open("/" + rel, encoding="ascii") as a, \
                open(os.path.join(root, rel), encoding="ascii") as b:
            mine, theirs = a.read(64).strip(), b.read(64).strip()
    except OSError:
        return False
    return bool(mine) and mine == theirs
