"""The one scan pipeline: every target goes through the same stages.

::

    target ──> Source ──> View ──> collectors ──> enrichers ──> ScanResult ──> analyses
    image, registry,   files (FsView),  collect.py     host facts    model.py      advisories,
    archive, layout,   host procfs/     (fused,        (host/source)              VEX
    directory          sysfs, or the    linked)        binary analysis            (analyses.py)
    (sources/), host   parsed SBOM                     (host walk), probes
    root (host/),      document
    SBOM (sbomin/)

The outputs (``writers/``) are the last stage, written by the caller. A host root is a
source like any other and host facts are an enricher; an SBOM is a source whose view is
the parsed document (no collectors run on it). ``scan_open`` keeps the view readable while
the caller looks at it (``host-snapshot`` reads the host view's files, matching nothing).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from . import __version__
from .errors import UsageError
from .fsview.types import Limits, NullProgress, ProgressSink, Spool

if TYPE_CHECKING:
    from .advisories.db import AdvisoryDB
    from .collectors import Collector
    from .fsview.spec import PathMatcher
    from .fsview.view import FsView
    from .host.source import HostFacts, HostView
    from .model import ScanResult, Target
    from .probe import ProbeResult
    from .sources.registry import RegistryOptions


@dataclass(frozen=True)
class HostOptions:
    """A host root: ``/`` (this machine), a mounted node root or a host snapshot."""

    root: str = "/"
    paths: tuple[str, ...] = ()  # more directories to inventory
    use_nvml: bool = True
    analyze_binaries: bool = False  # GPU code in the host's libraries (slow on big nodes)


@dataclass(frozen=True)
class ProbeOptions:
    """Run the smoke-test kernel on this machine's GPUs beside a host scan."""

    backends: tuple[str, ...] | None = None
    timeout: float = 20.0
    python: str | None = None


_T = TypeVar("_T")


class Pending(Generic[_T]):
    """A value the pipeline computes beside the host walk (the advisory database, while the
    walk's workers run), or, where nothing runs beside, when first asked for. ``get`` returns
    it or raises what computing it raised."""

    def __init__(self, fn: Callable[[], _T]) -> None:
        self._fn: Callable[[], _T] | None = fn
        self._value: _T | None = None
        self._error: BaseException | None = None

    def run(self) -> None:
        """Compute the value (once; a later call does nothing)."""
        fn, self._fn = self._fn, None
        if fn is None:
            return
        try:
            self._value = fn()
        except BaseException as exc:  # noqa: BLE001 - raised again by get(), in the scanning thread
            self._error = exc

    def get(self) -> _T:
        self.run()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # run() set it


@dataclass(frozen=True)
class ScanRequest:
    """What to scan (exactly one of ``reference``, ``host``, ``sbom``) and how.

    ``reference``: an image reference or ``dir:PATH`` (``source`` forces a source;
    ``registry``: credentials and insecure hosts). ``cache``: the layer-result cache (None:
    on unless ``GPUSBOM_NO_CACHE``). ``keep_env_secrets``: keep image env values whose names
    look secret. ``advisory_db``: None loads the active database; ``advisory_pending``: it,
    loaded beside a host walk (its error, a stale database, is raised before the analyses).
    ``vex``: VEX files whose not-affected statements suppress findings.
    """

    reference: str | None = None
    host: HostOptions | None = None
    sbom: str | None = None
    source: str | None = None
    platform: str | None = None
    registry: RegistryOptions | None = None
    collectors: Sequence[str] | None = None
    limits: Limits = field(default_factory=Limits)
    cache: bool | None = None
    cache_max_size: int | None = None
    keep_env_secrets: bool = False
    probe: ProbeOptions | None = None
    advisories: bool = True
    advisory_db: AdvisoryDB | None = None
    advisory_pending: Pending[AdvisoryDB] | None = field(default=None, compare=False)
    #: a host's NVML answers, asked before the scan started (``host.source.start_nvml``)
    nvml_answer: Callable[[], tuple[dict[str, Any] | None, str | None]] | None = field(
        default=None, compare=False)
    vex: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The target as the user named it (messages)."""
        if self.sbom is not None:
            return f"sbom:{self.sbom}"
        if self.host is not None:
            return f"host:{self.host.root}"
        return self.reference or ""


def check_request(req: ScanRequest) -> None:
    """Usage errors of a request, before anything is read."""
    if req.sbom is not None and (req.host is not None or req.reference):
        raise UsageError("--sbom matches an existing SBOM: give no image and no --host")
    if req.host is not None and req.reference:
        raise UsageError("--host/--root scan a machine: give no image")
    if req.probe is not None:
        if req.host is None:
            raise UsageError("--probe needs --host")
        if req.host.root != "/" and not same_machine(req.host.root):
            raise UsageError(
                f"--probe runs kernels on this machine's GPUs, but --root {req.host.root} is "
                "not this machine's root (its proc/sys/kernel/random/boot_id differs or is "
                "missing: a snapshot or another node)")
    if not (req.reference or req.host or req.sbom is not None):
        raise UsageError("nothing to scan: pass --image REF (see gpusbom scan --help)")


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


@dataclass
class View:
    """What a source gives: the target, and its files (``fs``) or, for an SBOM, the parsed
    ``document``; a host root also gives its ``host`` view (procfs/sysfs, NVML)."""

    target: Target
    fs: FsView | None = None
    host: HostView | None = None
    document: ScanResult | None = None


@dataclass
class Scanned:
    """The result and, while ``scan_open`` is open, the view it was read from."""

    result: ScanResult
    view: View


# -- the source stage ---------------------------------------------------------------------


@contextlib.contextmanager
def open_view(req: ScanRequest, classes: Sequence[type[Collector]],
              progress: ProgressSink) -> Iterator[View]:
    """The source stage: the target's view, readable until the context closes."""
    if req.sbom is not None:
        from .sbomin import load_sbom

        doc = load_sbom(req.sbom)
        yield View(target=doc.target, document=doc)
        return
    from .collect import build_matcher

    matcher = build_matcher(classes)
    if req.host is not None:
        from .host.source import open_host_view

        beside = () if req.advisory_pending is None else (req.advisory_pending.run,)
        with Spool(req.limits) as spool:
            hv, target = open_host_view(req.host.root, matcher, spool, req.limits,
                                        paths=req.host.paths, use_nvml=req.host.use_nvml,
                                        analyze_binaries=req.host.analyze_binaries,
                                        beside=beside, nvml_answer=req.nvml_answer)
            yield View(target=target, fs=hv.fs, host=hv)
        return
    with Spool(req.limits) as spool:
        yield _open_image(req, classes, matcher, spool, progress)


def _open_image(req: ScanRequest, classes: Sequence[type[Collector]], matcher: PathMatcher,
                spool: Spool, progress: ProgressSink) -> View:
    from .collect import check_needed_links
    from .fsview.squash import squash
    from .sources import resolve_source
    from .sources.base import ReadContext
    src = resolve_source(req.reference or "", source=req.source, registry=req.registry)
    layer_cache = None
    if req.cache is not False:  # --no-cache: not even imported (with sqlite3, ~5 ms)
        from .fsview import layercache
        if req.cache or not layercache.disabled_by_env():
            layer_cache = layercache.LayerCache.open(
                collectors={c.id: c.version for c in classes}, limits=req.limits,
                max_size=req.cache_max_size or layercache.DEFAULT_MAX_SIZE)
    ctx = ReadContext(matcher=matcher, spool=spool, limits=req.limits, progress=progress,
                      platform=req.platform, layer_cache=layer_cache)
    try:
        read = src.read(ctx)
    finally:
        if layer_cache is not None:
            layer_cache.close()
    view: FsView | None = getattr(read, "view", None)
    fs = view if view is not None else squash(read.layers, req.limits)
    check_needed_links(fs, matcher)
    return View(target=read.target, fs=fs)


# -- collectors, enrichers, the result ------------------------------------------------------


def _build(req: ScanRequest, view: View, classes: Sequence[type[Collector]]) -> ScanResult:
    """Collectors over the view, the enrichers, and the ScanResult they make."""
    from .clock import scan_timestamp
    from .collect import link_components, run_collectors
    from .collectors.osrelease import read_os_release
    from .model import Relationship, ScanResult, ToolInfo
    from .safetext import redact_env, sanitize_result
    from .stack import summarize

    assert view.fs is not None  # noqa: S101 - an SBOM's view is its document
    target = view.target
    target.os_release = read_os_release(view.fs)
    components, unknowns = run_collectors(view.fs, target, classes)
    tools = {c.id: c.version for c in classes}
    enrichers: list[HostFacts] = []
    if view.host is not None:
        from .host.source import HostFacts

        enrichers.append(HostFacts(view.host))
    for e in enrichers:
        components.extend(e.components())
        unknowns.extend(e.unknowns())
        tools[e.tool[0]] = e.tool[1]
    # collectors have read the env; what looks secret is not written anywhere
    if not req.keep_env_secrets:
        target.env = redact_env(target.env)
    # file names and image text (non-UTF-8, NUL, controls) escaped once, before refs are hashed
    sanitize_result((components, unknowns, target))
    relationships = link_components(components)
    findings = []
    if enrichers:
        rels = {(r.source, r.type, r.target) for r in relationships}
        for e in enrichers:
            pairs, found = e.finish(components)
            rels.update((a, "depends-on", b) for a, b in pairs)
            findings.extend(found)
        relationships = [Relationship(s, t, d) for s, t, d in sorted(rels)]
    return ScanResult(
        stacks=summarize(components), target=target, components=components,
        relationships=relationships, unknowns=unknowns,
        tool=ToolInfo(name="gpusbom", version=__version__, collectors=tools),
        timestamp=scan_timestamp(), findings=findings,
    )


# -- analyses -------------------------------------------------------------------------------


def analyse(result: ScanResult, req: ScanRequest) -> None:
    """The analyses stage: advisories matched, then VEX statements applied."""
    db = req.advisory_db
    if req.advisory_pending is not None:
        db = req.advisory_pending.get()
    if req.advisories:
        from .analyses import match_advisories

        match_advisories(result, db)
    if req.vex:
        from .advisories.vex import apply_vex

        apply_vex(result, req.vex)


# -- the whole pipeline ---------------------------------------------------------------------


@contextlib.contextmanager
def scan_open(req: ScanRequest, progress: ProgressSink | None = None) -> Iterator[Scanned]:
    """Every stage of ``req``; the view stays readable inside the context."""
    from .collect import select_collectors

    check_request(req)
    classes = [] if req.sbom is not None else select_collectors(req.collectors)
    probing = _start_probe(req.probe) if req.probe is not None else None
    with open_view(req, classes, progress or NullProgress()) as view:
        result = view.document if view.document is not None else _build(req, view, classes)
        if probing is not None:
            from .probe import attach_probes

            attach_probes(result, probing())
        analyse(result, req)
        yield Scanned(result=result, view=view)


def scan(req: ScanRequest, progress: ProgressSink | None = None) -> ScanResult:
    """The ScanResult of ``req``, analysed (``gpusbom scan`` before its outputs)."""
    with scan_open(req, progress) as scanned:
        return scanned.result


def _start_probe(opts: ProbeOptions) -> Callable[[], list[ProbeResult]]:
    """Start the probes beside the scan; returns a function that waits for their results."""
    import concurrent.futures

    from .probe import run_probes

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    fut = pool.submit(run_probes, list(opts.backends) if opts.backends else None,
                      timeout=opts.timeout, python=opts.python)
    pool.shutdown(wait=False)
    return fut.result
