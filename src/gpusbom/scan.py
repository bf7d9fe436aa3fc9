"""Scan orchestration: source -> squashed view -> collectors -> ScanResult.

This is the library entry point (``gpusbom.scan``); the CLI is a thin layer
over it. Data flows one way; nothing here knows about output formats.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from . import __version__
from .analyses import match_advisories
from .clock import scan_timestamp
from .collectors import CollectContext, Collector, all_collectors, load_failures
from .collectors.base import OwnershipIndex
from .errors import InputError, UsageError
from .fsview.spec import PathMatcher, PathSpec
from .fsview.types import EntryKind, Limits, NullProgress, ProgressSink, Spool
from .model import Component, Relationship, ScanResult, Target, ToolInfo, Unknown
from .safetext import redact_env, sanitize_result
from .stack import summarize

if TYPE_CHECKING:
    from .advisories.db import AdvisoryDB
    from .fsview.view import FsView
    from .sources.registry import RegistryOptions

log = logging.getLogger(__name__)


def select_collectors(ids: Sequence[str] | None = None) -> list[type[Collector]]:
    registry = all_collectors()
    if not ids:
        return list(registry.values())
    unknown = [i for i in ids if i not in registry]
    if unknown:
        raise UsageError(
            f"unknown collector(s) {', '.join(unknown)}; available: {', '.join(registry)}"
        )
    return [registry[i] for i in ids]


def build_matcher(collectors: Iterable[type[Collector]]) -> PathMatcher:
    from .collectors.osrelease import OS_RELEASE_PATHS

    specs: list[PathSpec] = list(OS_RELEASE_PATHS)
    for c in collectors:
        specs.extend(c.paths)
    return PathMatcher(specs)


def _run_one(cls: type[Collector], ctx: CollectContext) -> list[Component]:
    from .fsview.view import NotCapturedError

    try:
        return list(cls().collect(ctx))
    except InputError:
        raise
    except NotCapturedError as exc:
        ctx.unknown(f"file not captured: {exc}")
    except Exception as exc:  # noqa: BLE001 - isolation is the point
        log.debug("collector %s failed", cls.id, exc_info=True)
        ctx.unknown(f"collector failed: {type(exc).__name__}: {exc}")
    return []


def run_collectors(
    fs: FsView, target: Target, collectors: Iterable[type[Collector]]
) -> tuple[list[Component], list[Unknown]]:
    """Run package catalogers, then stack collectors; fuse what they saw.

    A collector that fails becomes an Unknown and the scan goes on. Input
    errors (a hostile image: symlink loops and the like) are not collector
    bugs: they propagate and fail the scan with exit 3.
    """
    from .fusion import fuse

    ownership = OwnershipIndex(fs)
    unknowns = [Unknown(collector=f"plugin:{name}", reason=f"collector plug-in did not load: {why}")
                for name, why in load_failures()]
    packages: list[Component] = []
    observations: list[Component] = []
    for cls in sorted(collectors, key=lambda c: (c.phase, c.id)):
        ctx = CollectContext(fs=fs, target=target, collector_id=cls.id, ownership=ownership)
        found = _run_one(cls, ctx)
        (packages if cls.phase <= 1 else observations).extend(found)
        unknowns.extend(ctx.unknowns)
    from .identity import fill_product_cpes

    components = fuse(packages, observations, ownership.owner)
    from .collectors._digests import attach_declared_digests

    # the digests dpkg md5sums / wheel RECORD declare for files that are evidence
    attach_declared_digests(components, ownership, fs.read_text)
    fill_product_cpes(components)  # NVD's name for every GPU product found (catalog rows)
    return components, unknowns


def check_needed_links(fs: FsView, matcher: PathMatcher) -> None:
    """Fail on a symlink loop at a path some collector needs.

    Loops elsewhere in an image are harmless (nothing follows them), but a
    loop where a package database or version file should be means the image
    cannot be described: that is an input error (exit 3), not a silent gap.
    """
    for entry in fs.entries():
        if entry.kind is EntryKind.SYMLINK and matcher.match(entry.path) is not None:
            fs.lookup(entry.path)  # raises UnsafeArchiveError naming the loop


def _sort_key(c: Component) -> tuple[str, str, str, str, str]:
    path = c.evidence[0].path if c.evidence and c.evidence[0].path else ""
    return (c.type.value, c.ecosystem or "", c.name, c.version or "", path)


def link_components(components: list[Component]) -> list[Relationship]:
    """Assign deterministic bom-refs and turn ``depends_on`` names into relationships.

    A name resolves within the same ecosystem; when several copies exist (two
    site-packages, say) the dependency points at each of them.
    """
    components.sort(key=_sort_key)
    taken: set[str] = set()
    by_name: dict[tuple[str, str], list[str]] = {}
    for c in components:
        ref = c.assign_ref(taken)
        by_name.setdefault((c.ecosystem or "", _norm(c.name)), []).append(ref)
    rels: set[tuple[str, str, str]] = set()
    for c in components:
        for dep in c.depends_on:
            for ref in by_name.get((c.ecosystem or "", _norm(dep)), []):
                if ref != c.bom_ref:
                    rels.add((c.bom_ref, "depends-on", ref))
    return [Relationship(s, t, d) for s, t, d in sorted(rels)]


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def scan(
    reference: str,
    *,
    source: str | None = None,
    platform: str | None = None,
    collectors: Sequence[str] | None = None,
    limits: Limits | None = None,
    progress: ProgressSink | None = None,
    registry: RegistryOptions | None = None,
    advisories: bool = True,
    advisory_db: AdvisoryDB | None = None,
    cache: bool | None = None,
    cache_max_size: int | None = None,
    keep_env_secrets: bool = False,
) -> ScanResult:
    """Scan an image reference (or ``dir:PATH``) and return the model.

    ``registry``: credentials and insecure hosts for registry pulls.
    ``cache``: keep and reuse per-layer results (``fsview.layercache``); None: on unless
    ``GPUSBOM_NO_CACHE`` is set. ``cache_max_size``: bytes the cache file may hold.
    ``keep_env_secrets``: keep image env values whose names look secret (redacted by default).
    """
    from .collectors.osrelease import read_os_release
    from .fsview import layercache
    from .fsview.squash import squash
    from .sources import resolve_source
    from .sources.base import ReadContext

    limits = limits or Limits()
    classes = select_collectors(collectors)
    matcher = build_matcher(classes)
    src = resolve_source(reference, source=source, registry=registry)
    layer_cache = None
    if cache or (cache is None and not layercache.disabled_by_env()):
        layer_cache = layercache.LayerCache.open(
            collectors={c.id: c.version for c in classes},
            limits=limits,
            max_size=cache_max_size or layercache.DEFAULT_MAX_SIZE,
        )
    with Spool(limits) as spool:
        ctx = ReadContext(
            matcher=matcher,
            spool=spool,
            limits=limits,
            progress=progress or NullProgress(),
            platform=platform,
            layer_cache=layer_cache,
        )
        try:
            read = src.read(ctx)
        finally:
            if layer_cache is not None:
                layer_cache.close()
        view: FsView | None = getattr(read, "view", None)
        fs = view if view is not None else squash(read.layers, limits)
        check_needed_links(fs, matcher)
        target = read.target
        target.os_release = read_os_release(fs)
        components, unknowns = run_collectors(fs, target, classes)
    # collectors have read the env; what looks secret is not written anywhere
    if not keep_env_secrets:
        target.env = redact_env(target.env)
    # image text (non-UTF-8 names, NUL, controls) escaped once, before refs are hashed
    sanitize_result((components, unknowns, target))
    relationships = link_components(components)
    result = ScanResult(
        stacks=summarize(components),
        target=target,
        components=components,
        relationships=relationships,
        unknowns=unknowns,
        tool=ToolInfo(
            name="gpusbom",
            version=__version__,
            collectors={c.id: c.version for c in classes},
        ),
        timestamp=scan_timestamp(),
    )
    if advisories:
        match_advisories(result, advisory_db)
    return result


def scan_sbom(path: str, *, advisory_db: AdvisoryDB | None = None) -> ScanResult:
    """Read an existing SBOM (CycloneDX, SPDX or gpusbom JSON; ``-`` for stdin) and match its
    components against the advisory database (``gpusbom scan --sbom``)."""
    from .sbomin import load_sbom

    result = load_sbom(path)
    match_advisories(result, advisory_db)
    return result
