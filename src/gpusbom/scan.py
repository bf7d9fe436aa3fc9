"""The library side of ``gpusbom scan``: the pipeline (``gpusbom.pipeline``), then what the
command does with the result after writing it: push it to an inventory, scan the node's
images, apply ``--fail-on`` and ``--strict``. Also the library entry points ``scan`` and
``scan_sbom`` (one call each into the pipeline).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from .collect import (  # noqa: F401 - the collectors stage, re-exported for library users
    build_matcher,
    check_needed_links,
    link_components,
    run_collectors,
    select_collectors,
)
from .errors import GpusbomError, IncompleteError, InputError, PolicyFailed
from .fsview.types import Limits, ProgressSink
from .pipeline import ScanRequest

if TYPE_CHECKING:
    from .advisories.db import AdvisoryDB
    from .model import ScanResult
    from .sources.registry import RegistryOptions


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
    """Scan an image reference (or ``dir:PATH``) and return the model (see ``ScanRequest``)."""
    from . import pipeline

    return pipeline.scan(ScanRequest(
        reference=reference, source=source, platform=platform, collectors=collectors,
        limits=limits or Limits(), registry=registry, advisories=advisories,
        advisory_db=advisory_db, cache=cache, cache_max_size=cache_max_size,
        keep_env_secrets=keep_env_secrets), progress)


def scan_sbom(path: str, *, advisory_db: AdvisoryDB | None = None) -> ScanResult:
    """Read an existing SBOM (CycloneDX, SPDX or gpusbom JSON; ``-`` for stdin) and match its
    components against the advisory database (``gpusbom scan --sbom``)."""
    from . import pipeline

    return pipeline.scan(ScanRequest(sbom=path, advisory_db=advisory_db))


@dataclass(frozen=True)
class Followups:
    """What ``gpusbom scan`` does besides the pipeline. ``offline``: no advisory database
    update first; ``max_db_age``: days, a staler database is an input error; ``push``: an
    inventory URL; ``node_images``: also scan the host root's container images;
    ``fail_on``: a severity that fails (``PolicyFailed``); ``strict``: unknowns fail
    (``IncompleteError``)."""

    offline: bool = False
    max_db_age: float | None = None
    push: str | None = None
    node_images: bool = False
    fail_on: str | None = None
    strict: bool = False
    quiet: bool = False


@dataclass
class Outcome:
    """The result, what to say on stderr, and why the scan failed after writing its outputs
    (``failed``: the node's images could not all be scanned, an ``InputError``; or
    ``--fail-on``'s policy said no, ``PolicyFailed``), None when it did not. An error
    returned, not raised: the outputs are written and ``messages`` already say it; the CLI
    turns it into the exit code (``gpusbom.cli``)."""

    result: ScanResult
    messages: list[str] = field(default_factory=list)
    failed: GpusbomError | None = None


_frozen = False


def _freeze_loaded(req: ScanRequest) -> None:
    """Once per process: move what the command has loaded (modules, the advisory database,
    the catalog, the collectors: ~50,000 objects that live to its end) out of the cyclic
    garbage collector's sight (``gc.freeze``), so that its passes over older objects walk
    the scan's own only: 10-100 ms of CPU per scan on a 2-core VM (nvidia-wheels: 1.87 ->
    1.78 CPU-s). Nothing of a scan is frozen, so repeated scans in one process (``--images``)
    free theirs as before."""
    global _frozen
    if _frozen:
        return
    _frozen = True
    import gc

    if req.runs_collectors:
        select_collectors(req.collectors)  # imported now, frozen with the rest
    gc.freeze()


def run(req: ScanRequest, then: Followups, write: Callable[[ScanResult], None],
        progress: ProgressSink | None = None) -> Outcome:
    """``gpusbom scan``: the advisory database, the pipeline, ``write`` (the outputs), then
    the inventory push, the node's images, ``--fail-on`` and ``--strict``."""
    from . import pipeline, stagetime
    from .advisories.db import load_active

    stagetime.startup()
    pipeline.check_request(req)
    # the target decides what runs around the pipeline (targets.base.TargetSource): what
    # starts before it, what loads beside it, the garbage collector's pause, node images
    src = pipeline.target_source(req)
    assert src is not None  # noqa: S101 - check_request raised for a request naming none
    if then.fail_on:
        from .policy import parse_severity

        parse_severity(then.fail_on)  # a bad value is a usage error before any work
    node = src.node_root()
    if then.node_images and node is None:
        from .errors import UsageError

        raise UsageError("--images needs --host or --root")
    # the user's updated copy or the bundled snapshot; a stale one is an input error
    if not then.offline:
        from .advisories.autoupdate import auto_update

        auto_update(quiet=then.quiet)
    with stagetime.stage("advisory database, collectors loaded"):
        req = src.prepare(partial(load_active, max_age_days=then.max_db_age))
        _freeze_loaded(req)
    from . import _gc

    if not src.keeps_gc_paused:
        _gc.resume()  # paused by the CLI while it loaded (gpusbom._gc)
    manager: Any = progress if isinstance(progress, contextlib.AbstractContextManager) \
        else contextlib.nullcontext()
    with manager, stagetime.stage("pipeline"):
        result = pipeline.scan(req, progress)
    with stagetime.stage("outputs"):
        write(result)
    stagetime.report()
    _gc.resume()  # a kind that keeps_gc_paused: its reading's objects are done with
    out = Outcome(result)
    if then.push:
        from .inventory import push_scan

        push_scan(result, then.push)
    if then.node_images and node is not None:
        from .node_images import scan_node_images

        _n, failures = scan_node_images(node, result.target.name or "unknown",
                                        push=then.push, quiet=then.quiet,
                                        advisory_db=req.advisory_pending.get()
                                        if req.advisory_pending is not None
                                        else req.advisory_db)
        out.messages += [f"gpusbom: {line}\n" for line in failures]
        if failures:
            out.failed = InputError(f"{len(failures)} of the node's images not scanned")
            return out
    if then.fail_on:
        from .policy import fail_on_severity, print_summary

        decision = fail_on_severity(result, then.fail_on)
        if not decision.passed:
            buf = io.StringIO()
            print_summary(decision, buf)
            out.messages.append(buf.getvalue())
            out.failed = PolicyFailed(f"--fail-on {then.fail_on}: policy failed")
            return out
    if then.strict and result.unknowns:
        raise IncompleteError(
            f"{req.name}: scan incomplete: {len(result.unknowns)} unknown(s), "
            f"first: {result.unknowns[0].collector}: {result.unknowns[0].reason}")
    return out
