"""The ``osv`` feed: OSV ecosystem archives ``<base>/<ECOSYSTEM>/all.zip`` (PyPI, Debian,
Ubuntu by default; ``--ecosystem``), checked against the MD5 in Google Cloud Storage's
``x-goog-hash`` header when the server sends one, filtered to GPU-stack packages
(``importers.osv.gpu_relevant``) and imported with the OSV importer; the entries' details
become the CVEs' descriptions."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from typing import Any

from ..db import AdvisoryError, validate_record
from ..enrich import osv_description
from ..fetch import UpdateError, parse_json, short
from . import Feed, Output, Run, register

DEFAULT_ECOSYSTEMS = ("PyPI", "Debian", "Ubuntu")


@register
class Osv(Feed):
    name = "osv"
    order = 20
    progress = "OSV archives"
    default_url = "https://osv-vulnerabilities.storage.googleapis.com"
    setting = "osv_url"

    def fetch(self, run: Run, url: str | None
              ) -> tuple[list[dict[str, Any]], Iterator[tuple[str, zipfile.ZipFile]]]:
        """The archives' summaries (filled as they arrive) and each archive, downloaded
        when the one before has been read."""
        archives: list[dict[str, Any]] = []

        def each() -> Iterator[tuple[str, zipfile.ZipFile]]:
            for eco in run.ecosystems:
                zip_url = f"{url}/{eco}/all.zip"
                dest = run.tmp / f"osv-{eco}.zip"
                sums = run.fetch.get_to_file(zip_url, dest)
                archives.append({"ecosystem": eco, **sums})
                try:
                    zf = zipfile.ZipFile(dest)
                except zipfile.BadZipFile as exc:
                    raise UpdateError(f"{zip_url}: invalid data: {short(exc)}") from None
                with zf:
                    yield zip_url, zf

        return archives, each()

    def parse(self, run: Run, url: str | None,
              fetched: tuple[list[dict[str, Any]], Iterator[tuple[str, zipfile.ZipFile]]]
              ) -> tuple[list[dict[str, Any]], Iterator[tuple[str, dict[str, Any]]]]:
        """The OSV entries that name a GPU-stack package, with where each was."""
        archives, each = fetched

        def entries() -> Iterator[tuple[str, dict[str, Any]]]:
            for zip_url, zf in each:
                for name in sorted(zf.namelist()):
                    if not name.endswith(".json"):
                        continue
                    try:
                        raw = zf.read(name)
                    except (zipfile.BadZipFile, OSError, ValueError) as exc:
                        raise UpdateError(f"{zip_url}: invalid data in {name}: "
                                          f"{short(exc)}") from None
                    if not _mentions_gpu_package(raw):
                        continue
                    doc = parse_json(raw, f"{zip_url}!{name}")
                    if not isinstance(doc, dict):
                        raise UpdateError(f"{zip_url}!{name}: invalid data: not an OSV entry")
                    yield f"{zip_url}!{name}", doc

        return archives, entries()

    def records(self, run: Run, url: str | None,
                parsed: tuple[list[dict[str, Any]], Iterator[tuple[str, dict[str, Any]]]]
                ) -> Output:
        from ..importers import MalformedDocumentError
        from ..importers.osv import gpu_relevant, import_osv

        archives, entries = parsed
        records = []
        for where, doc in entries:
            try:
                imp = import_osv(doc, keep=gpu_relevant)
            except MalformedDocumentError as exc:
                run.skipped.append(f"{where}: {exc}")
                continue
            if imp.record is None:
                continue
            try:
                validate_record(imp.record)
            except AdvisoryError as exc:
                run.skipped.append(f"{where}: {exc}")
                continue
            records.append(imp.record)
            text = osv_description(doc)
            if text:
                for v in imp.record["vulnerabilities"]:
                    run.descriptions.setdefault(v["id"], text)
        return Output({"name": "osv", "url": url, "archives": archives,
                       "records": len(records)}, records=records)


def _mentions_gpu_package(raw: bytes) -> bool:
    """A cheap prefilter before JSON parsing (archives hold tens of thousands of entries):
    the ``"name"`` of a GPU-stack package must appear somewhere."""
    from ..importers.osv import GPU_DEB_PREFIXES, GPU_PYPI, GPU_PYPI_PREFIXES

    low = raw.lower()
    words = (*GPU_PYPI, *GPU_PYPI_PREFIXES, *GPU_DEB_PREFIXES, "github.com/nvidia/")
    return any(f'"{w}'.encode() in low for w in words)
