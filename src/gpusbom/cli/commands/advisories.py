"""``gpusbom advisories``: the advisory database."""

from __future__ import annotations

from typing import Annotated

import typer

from ...errors import UsageError
from .._common import fail as _fail
from ..app import app

advisories_app = typer.Typer(
    help="The advisory database (bundled snapshot): list and show records.",
    no_args_is_help=True,
)
app.add_typer(advisories_app, name="advisories")


@advisories_app.command("list")
def advisories_list() -> None:
    """One line per advisory: id, date, vendor, CVEs, title."""
    from ...advisories.db import load_bundled

    db = load_bundled()
    for a in db:
        cves = ",".join(v.id for v in a.vulnerabilities)
        print(f"{a.id}\t{a.published[:10]}\t{a.vendor}\t{cves}\t{a.title}")
    print(f"{len(db)} advisories ({db.source}, data as of {db.built or db.newest})")


@advisories_app.command("show")
def advisories_show(
    ident: Annotated[str, typer.Argument(help="Advisory id or CVE.")],
) -> None:
    """The record of one advisory (by id or CVE) as JSON."""
    import json as _json

    from ...advisories.db import load_bundled

    a = load_bundled().get(ident)
    if a is None:
        raise typer.Exit(_fail(UsageError(f"no advisory {ident!r} in the database"), False))
    print(_json.dumps(a.raw, indent=2, ensure_ascii=False))


