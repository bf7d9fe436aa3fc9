"""The host root as a source of the pipeline (``gpusbom.pipeline``), and host facts as an
enricher.

``open_host_view``: a host root (``/``, a mounted node root, or a host snapshot) gives a
``HostView``: the one-layer file view of its walk roots (what collectors read), the
``HostRoot`` that reads procfs/sysfs (and records what it read, for ``host-snapshot``), and
NVML's answers. ``HostFacts``: the enricher that adds what only a running machine shows:
devices, kernel modules, firmware (``discover``), the links between them and the libraries,
the consistency findings, and the unknowns of the walk.
"""

from __future__ import annotations

import os
import platform as _platform
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import SourceNotFoundError
from ..fsview.spec import PathMatcher
from ..fsview.types import Limits, Spool
from ..fsview.view import FsView
from ..model import Component, Finding, Target, Unknown
from ..safetext import loads_json
from . import consistency, discover, nvml
from .parwalk import default_workers
from .root import SNAPSHOT_DIR, HostRoot
from .walk import host_view

_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64le", "s390x": "s390x"}
#: user-space driver libraries that depend on the kernel module
_KMOD_USERS = ("libcuda", "libnvidia-ml", "libnvidia-ptxjitcompiler")


@dataclass
class HostView:
    """What a host root gives the pipeline: its files, its procfs/sysfs, NVML's answers."""

    fs: FsView
    root: HostRoot
    nvml: dict[str, Any] | None
    nvml_why: str | None  # why NVML was not queried (an unknown when there are NVIDIA GPUs)


def start_nvml(root: str, use_nvml: bool = True
               ) -> Callable[[], tuple[dict[str, Any] | None, str | None]]:
    """``open_host_view``'s NVML answers for host root ``root``, asked now: ``scan`` asks
    before it loads the collectors, so that a slow driver (every GPU of a node answers in
    turn) is done by the end of the walk. Call it while no other thread runs."""
    return _load_nvml(HostRoot(root), use_nvml)


def _load_nvml(root: HostRoot, use_nvml: bool
               ) -> Callable[[], tuple[dict[str, Any] | None, str | None]]:
    """NVML's answers, or why there are none: a function that gives them once the walk is
    done (a live query runs meanwhile in its own process: ``nvml.query_beside``)."""
    recorded = root.snapshot_file("nvml.json")
    if os.path.isfile(recorded):
        with open(recorded, encoding="utf-8") as f:
            data: dict[str, Any] = loads_json(f.read())
        return lambda: (data, None)
    if not root.live:
        return lambda: (None, "NVML not queried: a mounted root's GPUs are not this machine's "
                              "(no nvml.json)")
    if not use_nvml:
        return lambda: (None, "NVML not queried (--no-nvml)")
    return nvml.query_beside()


#: what the stages after the walk import (collect, fuse, analyse, write JSON)
_LATER = ("gpusbom.collectors._digests", "gpusbom.fusion", "gpusbom.identity", "gpusbom.stack",
          "gpusbom.clock", "gpusbom.compat", "gpusbom.analyses", "gpusbom.advisories.matcher",
          "gpusbom.writers._jsonfast")


def _import_later_stages(beside: Sequence[Callable[[], None]] = ()) -> None:
    """Import the modules of the stages after the walk and of the outputs asked for (the
    CycloneDX writer's library: 0.15 s), then run ``beside`` (the advisory database's load),
    while the walk's workers run."""
    from ..writers import asked_modules, preload

    preload((*_LATER, *asked_modules()))
    for fn in beside:
        fn()


def host_target(root: HostRoot) -> Target:
    info: dict[str, Any] = {}
    meta = root.snapshot_file("host.json")
    if os.path.isfile(meta):
        with open(meta, encoding="utf-8") as f:
            info = loads_json(f.read())
    machine = info.get("machine") or (_platform.machine() if root.live else None)
    hostname = root.read_value("/proc/sys/kernel/hostname") or info.get("hostname")
    from ..identity import machine_id_hash

    # the root bom-ref names the machine by a hash of its machine-id (identity.py)
    machine_id = root.read_value("/etc/machine-id") or info.get("machine_id")
    return Target(
        kind="host",
        reference="host:/" if root.live else f"host:{root.root}",
        source="host",
        name=hostname or "host",
        platform=f"linux/{_ARCH.get(machine, machine)}" if machine else None,
        host_id=machine_id_hash(machine_id) if isinstance(machine_id, str) and machine_id else None,
    )


def open_host_view(root: str, matcher: PathMatcher, spool: Spool, limits: Limits, *,
                   paths: Sequence[str] = (), use_nvml: bool = True,
                   analyze_binaries: bool = False,
                   beside: Sequence[Callable[[], None]] = (),
                   nvml_answer: Callable[[], tuple[dict[str, Any] | None, str | None]] | None
                   = None) -> tuple[HostView, Target]:
    """The host root ``root`` as a view and its target (``SourceNotFoundError`` when it is
    not a directory). ``beside``: work run in a thread while the walk's workers run (each
    must keep its own errors; with the walk in this process, nothing runs beside it).
    ``nvml_answer``: NVML's answers asked earlier (``start_nvml``), else asked now."""
    if not os.path.isdir(root):
        raise SourceNotFoundError(f"--root {root}: no such directory")
    hroot = HostRoot(root)
    # NVML beside the walk, in a process of its own (forked before any thread starts):
    # loading pynvml and the driver's library and asking each GPU waits on the driver
    # while the walk waits on the disk
    if nvml_answer is None:
        nvml_answer = _load_nvml(hroot, use_nvml)
    workers = default_workers()
    threads = []
    if workers > 1:  # this process waits while the workers walk: import what comes after
        threads.append(threading.Thread(target=_import_later_stages, args=(beside,),
                                        name="gpusbom-imports", daemon=True))

    def started() -> None:
        # once the walk's workers are forked: a fork copies only the forking thread, and a
        # worker must not inherit a lock (the import lock) that another thread holds
        for t in threads:
            t.start()

    fs = host_view(root, matcher, spool, limits, extra=paths, analyze_binaries=analyze_binaries,
                   workers=workers, started=started)
    for t in threads:  # no import runs in two threads at once past this point
        t.join()
    nvml_data, nvml_why = nvml_answer()
    return HostView(fs=fs, root=hroot, nvml=nvml_data, nvml_why=nvml_why), host_target(hroot)


class HostFacts:
    """The host-facts enricher. ``components``: the devices, kernel modules and firmware
    (before the components are linked); ``finish``: after linking, the relationships
    (bom-ref pairs), the consistency findings and the host's unknowns."""

    tool = ("host", "1")  # its entry in the result's tool.collectors

    def __init__(self, view: HostView) -> None:
        self.view = view
        self.facts: discover.HostFacts | None = None

    def components(self) -> list[Component]:
        found, self.facts = discover.discover(self.view.root, self.view.nvml)
        return found

    def unknowns(self) -> list[Unknown]:
        assert self.facts is not None  # noqa: S101 - components() runs first
        facts, out = self.facts, []
        if self.view.nvml_why and any(d.properties.get("vendor") == "nvidia"
                                      for d in facts.devices):
            out.append(Unknown("host", self.view.nvml_why))
        for s in self.view.root.skipped:
            out.append(Unknown("host", f"skipped: {s.reason}", s.path))
        for p in self.view.fs.unreadable:
            out.append(Unknown("host", "skipped: permission denied (needs root)", p))
        for note in facts.notes:
            out.append(Unknown("host", note))
        return out

    def finish(self, components: list[Component]) -> tuple[list[tuple[str, str]], list[Finding]]:
        assert self.facts is not None  # noqa: S101 - components() runs first
        facts = self.facts
        pairs: list[tuple[Component, Component]] = list(facts.links)
        kmod = facts.modules.get("nvidia")
        if kmod is not None:
            pairs.extend((c, kmod) for c in components
                         if c.product_name in _KMOD_USERS)
        return ([(a.bom_ref, b.bom_ref) for a, b in pairs],
                consistency.check(components, facts))


__all__ = ["SNAPSHOT_DIR", "HostFacts", "HostView", "host_target", "open_host_view",
           "start_nvml"]
