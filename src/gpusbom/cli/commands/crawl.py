"""``gpusbom crawl REGISTRY[/PREFIX] --push DB``: scan a registry into the fleet inventory,
sharded over several processes or pods (see ``gpusbom.crawl``).

Exit codes: 0 every image in the shard was stored or was already stored; 2 usage; 3 the
registry or the inventory could not be used, or some image failed (each named on stderr).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from .._common import EXIT_INPUT, EXIT_OK, exits
from ..app import app


@app.command()
@exits
def crawl(
    target: Annotated[
        str, typer.Argument(help="REGISTRY[/REPO-PREFIX], e.g. registry.example:5000/ml")
    ],
    push: Annotated[
        str, typer.Option("--push", help="Inventory database URL (sqlite:///PATH or "
                                         "postgresql://...), as for scan --push.")
    ],
    shard: Annotated[
        str | None,
        typer.Option("--shard", help="I/N: crawl only shard I of N (default: "
                                     "$JOB_COMPLETION_INDEX/$GPUSBOM_SHARDS, else 0/1)."),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="Skip images created before this ISO 8601 time or "
                                     "this long ago (30d, 12h, 90m)."),
    ] = None,
    include: Annotated[
        list[str] | None,
        typer.Option("--include", help="Glob on REPO or REPO:TAG to crawl; repeatable."),
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option("--exclude", help="Glob on REPO or REPO:TAG to skip; repeatable."),
    ] = None,
    platform: Annotated[
        str | None,
        typer.Option("--platform", help="Only this os/arch of multi-platform images "
                                        "(default: every platform)."),
    ] = None,
    insecure_registry: Annotated[
        list[str] | None,
        typer.Option("--insecure-registry", help="HOST[:PORT] over plain HTTP or "
                                                 "unverified TLS; repeatable."),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the summary line.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> int:
    """Walk a registry's catalog and tags (multi-platform indexes expanded), scan every image
    of this shard that the inventory does not hold yet, and store it there."""
    from ...crawl import Crawler, parse_shard, parse_since
    from ...sources.registry import RegistryOptions

    sh = parse_shard(shard)
    stats = Crawler(
        target, push, shard=sh, since=parse_since(since), include=list(include or []),
        exclude=list(exclude or []), platform=platform,
        registry_opts=RegistryOptions(insecure=tuple(insecure_registry or ())), quiet=quiet,
    ).run()
    for line in stats.failed:
        print(f"gpusbom: crawl: {line}", file=sys.stderr)
    print(stats.summary(sh), file=sys.stderr)
    return EXIT_INPUT if stats.failed else EXIT_OK
