"""The collectors stage of the pipeline (``gpusbom.pipeline``): which collectors run, the
paths they need (the matcher every source reads with), running them over a view (a failed
collector is an unknown), fusing what they saw, and linking the components."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from .collectors import CollectContext, Collector, all_collectors, load_failures
from .collectors.base import OwnershipIndex
from .errors import InputError, UsageError
from .fsview.spec import PathMatcher, PathSpec
from .fsview.types import EntryKind
from .model import Component, Relationship, Target, Unknown

if TYPE_CHECKING:
    from .fsview.view import FsView

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
    attach_declared_digests(components, ownership, fs.read_text, getattr(fs, "premade", None))
    fill_product_cpes(components)  # NVD's name for every GPU product found (catalog rows)
    from .identification import annotate

    annotate(components)  # which method decided each one, and how sure it is
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
