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
the parsed document (no collectors run on it). Each kind of target is a source of
``gpusbom.targets`` (:data:`KINDS`): the stages never branch on the input's kind.
``scan_open`` keeps the view readable while the caller looks at it (``host-snapshot``
reads the host view's files, matching nothing).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import __version__
from .errors import UsageError
from .fsview.types import Limits, NullProgress, ProgressSink
from .targets.base import Pending, TargetSource, View  # Pending: re-exported
from .targets.host import HostRootSource
from .targets.image import ImageSource
from .targets.sbom import SbomSource

if TYPE_CHECKING:
    from .advisories.db import AdvisoryDB
    from .collectors import Collector
    from .host.source import HostFacts
    from .model import ScanResult
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


@dataclass(frozen=True)
class ScanRequest:
    """What to scan (exactly one of ``reference``, ``host``, ``sbom``) and how.

    ``reference``: an image reference or ``dir:PATH`` (``source`` forces a source;
    ``registry``: credentials and insecure hosts). ``cache``: the layer-result cache (None:
    on unless ``GPUSBOM_NO_CACHE``). ``keep_env_secrets``: keep image env values whose names
    look secret. ``advisory_db``: None loads the active database; ``advisory_pending``: it,
    loaded beside a host walk (its error, a stale database, is raised before the analyses).
    ``vex``: VEX files whose not-affected statements suppress findings. ``exclude``: globs
    of paths left out of collection (``fsview.exclude``). ``scope``: ``squashed`` (the
    image as it runs) or ``all-layers`` (also what later layers deleted; ``fsview.scope``).
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
    exclude: tuple[str, ...] = ()
    scope: str = "squashed"

    @property
    def name(self) -> str:
        """The target as the user named it (messages)."""
        src = target_source(self)
        return src.name if src is not None else ""

    @property
    def runs_collectors(self) -> bool:
        """Do collectors run over the target's files (not over an SBOM's document)?"""
        src = target_source(self)
        return src is None or src.runs_collectors


#: the kinds of target a request can name (``gpusbom.targets``), asked in this order: the
#: first that the request names is its source, and says what else it must not name
KINDS: tuple[type[TargetSource], ...] = (SbomSource, HostRootSource, ImageSource)


def target_source(req: ScanRequest) -> TargetSource | None:
    """The source of the target ``req`` names (None: it names none)."""
    return next((kind(req) for kind in KINDS if kind.named_by(req)), None)


def check_request(req: ScanRequest) -> None:
    """Usage errors of a request, before anything is read."""
    src = target_source(req)
    if src is not None:
        src.check()
    if req.probe is not None and not (src is not None and src.can_probe):
        raise UsageError("--probe needs --host")
    if src is None:
        raise UsageError("nothing to scan: pass --image REF (see gpusbom scan --help)")
    if req.exclude:
        from .fsview.exclude import compile_excludes

        compile_excludes(req.exclude)  # a glob that excludes the root: the usage error now
    if req.scope not in ("squashed", "all-layers"):
        raise UsageError(f"--scope {req.scope!r}: choose squashed or all-layers")
    if req.scope == "all-layers" and not src.has_layers:
        raise UsageError("--scope all-layers reads an image's layers: not with --host, "
                         "--root or --sbom")


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
    src = target_source(req)
    if src is None:
        raise UsageError("nothing to scan: pass --image REF (see gpusbom scan --help)")
    with src.open(classes, progress) as view:
        yield view


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
    fs = view.fs
    if req.exclude:
        from .fsview.exclude import exclude

        fs = exclude(fs, req.exclude)
    target = view.target
    target.os_release = read_os_release(fs)
    components, unknowns = run_collectors(fs, target, classes)
    if view.earlier:  # --scope all-layers
        from .layerscope import deleted_components

        components.extend(deleted_components(view.earlier, components, target, classes,
                                             req.exclude))
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


def analyse(result: ScanResult, req: ScanRequest, attachments: Any = None) -> None:
    """The analyses stage: advisories matched, then VEX statements applied: the vendor's
    (attached to the image in its registry), then the ``--vex`` files."""
    db = req.advisory_db
    if req.advisory_pending is not None:
        db = req.advisory_pending.get()
    if req.advisories:
        from .analyses import match_advisories

        match_advisories(result, db)
    vendor: list[Any] = []
    subjects: list[str] = []
    if attachments is not None:
        vendor = _attachment_notes(result, attachments)
        subjects = [d.subject for d in attachments.discovered]  # the index names it too
    if req.vex or vendor:
        from .advisories.vex import apply_vex

        apply_vex(result, req.vex, vendor, also_target=subjects)


def _attachment_notes(result: ScanResult, attachments: Any) -> list[Any]:
    """The vendor's VEX statements; every attachment that could not be read (or is not
    valid VEX) becomes an unknown of the result (``--strict``: exit 4), one line each."""
    from .advisories.vendor_vex import vendor_statements
    from .model import Unknown

    statements, warnings = vendor_statements(attachments)
    for w in [*attachments.warnings, *warnings]:
        result.unknowns.append(Unknown(collector="registry-attachments", reason=w))
    return statements


# -- the whole pipeline ---------------------------------------------------------------------


@contextlib.contextmanager
def scan_open(req: ScanRequest, progress: ProgressSink | None = None) -> Iterator[Scanned]:
    """Every stage of ``req``; the view stays readable inside the context."""
    from .collect import select_collectors

    check_request(req)
    classes = select_collectors(req.collectors) if req.runs_collectors else []
    probing = _start_probe(req.probe) if req.probe is not None else None
    from . import stagetime

    with open_view(req, classes, progress or NullProgress()) as view:
        with stagetime.stage("collectors, enrichers"):
            result = view.document if view.document is not None else _build(req, view, classes)
            from .identification import annotate

            # host facts and an input SBOM's components too: every component says how it was
            # identified (one a collector decided keeps its own)
            annotate(result.components)
        if probing is not None:
            from .probe import attach_probes

            attach_probes(result, probing())
        with stagetime.stage("analyses"):
            analyse(result, req, view.attachments)
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
