"""The air-gapped path and the database's status.

``export_bundle``: the active database (bundled snapshot or the user's update) as a bundle
file plus ``PATH.sha256``. ``import_bundle``: on the machine without network, the bundle
is checked against its SHA-256 (the ``.sha256`` file beside it or ``--sha256``), parsed and
validated record by record, re-read from a staged copy and moved over the user database
with ``os.replace``; any failure raises ``InputError`` (exit 3) and leaves the current
database as it was. ``status_lines``: sources, counts, data date and build date.
"""

from __future__ import annotations

import collections
import hashlib
import os
import tempfile
from pathlib import Path

from .._checksum import verify_sha256
from ..errors import InputError
from .db import AdvisoryError, describe, load_active, load_bundle_text, load_bundled, user_db_path

__all__ = ["export_bundle", "import_bundle", "status_lines"]


def _bundle_text() -> str:
    db = load_active()
    if db.source == "bundled":
        from importlib import resources

        return resources.files("gpusbom").joinpath("data/advisories.json").read_text("utf-8")
    return Path(db.source).read_text(encoding="utf-8")


def export_bundle(path: str) -> str:
    """Write the active database to ``path`` and its SHA-256 to ``path.sha256``."""
    data = _bundle_text().encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()
    out = Path(path)
    try:
        out.write_bytes(data)
        Path(f"{path}.sha256").write_text(f"{digest}  {out.name}\n", encoding="ascii")
    except OSError as exc:
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None
    return digest


def import_bundle(path: str, sha256: str | None = None) -> tuple[Path, int]:
    """Check, validate and install an exported bundle; (destination, record count)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    verify_sha256(path, data, sha256)
    try:
        text = data.decode("utf-8")
        db = load_bundle_text(text, source=path)
    except (AdvisoryError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a valid advisory bundle: {exc}; nothing imported") from None
    dest = user_db_path()
    try:
        os.makedirs(dest.parent, mode=0o700, exist_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=dest.parent, prefix=".import-",
                                         delete=False) as tmp:
            tmp.write(data)
            tmp.flush()
            os.fsync(tmp.fileno())
        try:
            load_bundle_text(Path(tmp.name).read_text(encoding="utf-8"), source=str(dest))
            os.replace(tmp.name, dest)
        finally:
            if os.path.exists(tmp.name):
                os.unlink(tmp.name)
    except OSError as exc:
        raise InputError(f"{dest}: cannot install the bundle: {exc.strerror or exc}") from None
    return dest, len(db)


def status_lines() -> list[str]:
    db = load_active()
    info = describe(db)
    bundled = load_bundled()
    lines = [
        f"database: {db.source}" + (" (the snapshot shipped with gpusbom)"
                                     if db.source == "bundled" else " (updated or imported)"),
        f"build date: {info['built']} ({info['age_days']} days old)",
        f"newest data: {db.newest}",
        f"advisories: {len(db)}; vulnerabilities: {sum(len(a.vulnerabilities) for a in db)}",
    ]
    by_vendor = collections.Counter(a.vendor for a in db)
    lines.append("by vendor: " + ", ".join(f"{v} {n}" for v, n in sorted(by_vendor.items())))
    for f in db.feeds:
        extra = ", ".join(f"{k} {f[k]}" for k in ("records", "documents", "built") if k in f)
        lines.append(f"source: {f.get('name')}: {f.get('url') or 'bundled'}"
                     + (f" ({extra})" if extra else ""))
    from .phrase_counts import count_phrases

    pc = count_phrases(a.raw for a in db)
    lines.append(f"vendor version phrases: {pc.ranges} became ranges, {pc.review} make review, "
                 f"{pc.neither_total} make neither")
    lines.append(f"known exploited (CISA KEV): {len(db.kev)} CVEs" if db.kev else
                 "known exploited (CISA KEV): not fetched (advisories update fetches it)")
    lines.append(f"descriptions: {len(db.descriptions)}" if db.descriptions else
                 "descriptions: none (advisories update fetches them)")
    if db.source != "bundled":
        lines.append(f"bundled snapshot: built {bundled.built}, {len(bundled)} advisories")
    return lines
