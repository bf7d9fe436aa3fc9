"""``gpusbom fingerprints update | export | import``: the fingerprint database kept up to date
from NVIDIA's own artifacts, and carried to an air-gapped machine, as the advisory database
is (``gpusbom.advisories.update`` / ``transfer``).

- :func:`update`: from the database in use, fetch PyPI's release lists again (index listings
  of NVIDIA's CUDA-component distributions, the ``cuda-toolkit`` metapackage's pins; the
  other lists, built from distro archives and NVIDIA's Dockerfiles, are kept) and fingerprint
  the wheels the database lacks (uploaded since ``since``, no larger than ``max_wheel_mb``:
  cuDNN's 600 MB wheels only when asked), each checked against the index's sha256 (with
  ``redistrib``, also the archives of NVIDIA's ``redistrib_*.json`` manifests the database
  lacks: ``gpusbom.fingerprints.redistrib``). The new database is written to a staged file,
  loaded back (every row validated), then moved over the user copy with ``os.replace``. Any
  failure leaves the current database as it was.
- :func:`export_db`: the database in use as a file plus ``PATH.sha256``.
- :func:`import_db`: a file from ``export`` (or the builder), checked against its SHA-256
  (the ``.sha256`` beside it or ``--sha256``), then loaded as hostile input (bounded, JSON
  only, every key, column and row validated; never unpickled), staged, re-read and swapped in.
- :func:`reset`: drop the user copy (scans use the bundled snapshot).

The user copy lives in ``$GPUSBOM_CACHE_DIR/fingerprints/fingerprints.json`` (else
``$XDG_CACHE_HOME/gpusbom/...``, ``~/.cache/gpusbom/...``); scans use it when it is valid and
not older than the bundled snapshot (``gpusbom.fingerprints.active``).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from .._checksum import verify_sha256
from ..errors import InputError
from .active import clear, load_active, user_db_path
from .database import (
    MAX_DB_BYTES,
    FingerprintDB,
    FingerprintError,
    Record,
    Release,
    dumps,
    load_bytes,
)

__all__ = ["FingerprintUpdateError", "UpdateReport", "export_db", "import_db", "reset", "update"]

DEFAULT_INDEX = "https://pypi.org/simple"
#: wheels larger than this are not downloaded by default (cuDNN, cuBLAS and NCCL run to
#: hundreds of MB a wheel: pass --max-wheel-mb to take them)
DEFAULT_MAX_WHEEL_MB = 150.0


class FingerprintUpdateError(InputError):
    """The update or import could not complete; the current database is unchanged."""


@dataclass
class UpdateReport:
    path: Path
    records: int
    releases: int
    built: str
    added: list[str] = field(default_factory=list)  # "dist version (n files)"
    skipped: list[str] = field(default_factory=list)  # "dist version: why"

    def summary(self) -> str:
        what = ("wheel(s) or archive(s)" if any(a.startswith(("http", "file:"))
                                                for a in (*self.added, *self.skipped))
                else "wheel(s)")
        lines = [f"{self.path}: {self.records} files, {self.releases} listed releases "
                 f"(built {self.built})",
                 f"fingerprinted: {len(self.added)} new {what}"
                 + (": " + ", ".join(self.added) if self.added else "")]
        if self.skipped:
            lines.append(f"not fingerprinted: {len(self.skipped)} {what} (too large or "
                         "failed; see --max-wheel-mb): " + ", ".join(self.skipped[:20])
                         + (" ..." if len(self.skipped) > 20 else ""))
        return "\n".join(lines)


def _now() -> str:
    """The build time: the machine's clock (``clock.wall_now``), not the report clock that
    ``SOURCE_DATE_EPOCH`` fixes: a database built now must be newer than the bundled one."""
    from ..clock import iso, wall_now

    return iso(wall_now())


def _install(text: str, dest: Path) -> FingerprintDB:
    """Stage ``text`` beside ``dest``, load it back (validated), fsync and swap it in."""
    try:
        os.makedirs(dest.parent, mode=0o700, exist_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=dest.parent, prefix=".staged-",
                                         delete=False) as tmp:
            tmp.write(text.encode("utf-8"))
            tmp.flush()
            os.fsync(tmp.fileno())
        try:
            with open(tmp.name, "rb") as f:
                db = load_bytes(f.read(MAX_DB_BYTES + 1), name=str(dest), source=str(dest))
            os.replace(tmp.name, dest)
        finally:
            if os.path.exists(tmp.name):
                os.unlink(tmp.name)
    except FingerprintError as exc:
        raise FingerprintUpdateError(f"new database is invalid, kept the old one: {exc}") from None
    except OSError as exc:
        raise FingerprintUpdateError(f"{dest}: cannot install: {exc.strerror or exc}") from None
    clear()
    return db


def update(*, index: str = DEFAULT_INDEX, since: str | None = None,
           max_wheel_mb: float = DEFAULT_MAX_WHEEL_MB, dists: Iterable[str] | None = None,
           redistrib: Iterable[str] = (),
           progress: Callable[[str], None] | None = None) -> UpdateReport:
    """Refresh the PyPI release lists and fingerprint the wheels the database lacks; see the
    module docstring. ``since``: the oldest upload date considered (default: three years
    before today). ``redistrib``: NVIDIA ``redistrib_*.json`` manifests (URLs, files or
    directories) whose linux-x86_64 archives the database lacks are fingerprinted too
    (``gpusbom.fingerprints.redistrib``; an archive larger than ``max_wheel_mb`` is skipped)."""
    from . import pypi

    say = progress or (lambda _m: None)
    base = load_active()
    dest = user_db_path()
    from ..clock import wall_now

    since = since or (wall_now() - timedelta(days=3 * 365)).strftime("%Y-%m-%d")
    sess = pypi.session("gpusbom-fingerprints-update/1")
    have = {r.source for r in base.records}
    records: list[Record] = list(base.records)
    report = UpdateReport(path=dest, records=0, releases=0, built="")
    try:
        os.makedirs(dest.parent, mode=0o700, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".update-", dir=dest.parent) as tmpd:
            tmp = Path(tmpd)
            rows, complete = pypi.release_rows(sess, index, tmp, say)
            kept = [r for r in base.releases if not r.source.startswith(("pypi:", "pypi-index:"))]
            releases = pypi.with_cublaslt([*kept, *rows], complete)
            for dist in dists or [*pypi.SMALL, *pypi.LARGE]:
                say(f"wheels {dist}")
                for w in pypi.list_wheels(sess, index, dist, since):
                    src = f"pypi:{w['dist']}=={w['version']}"
                    if w.get("skip") or src in have:
                        continue
                    if (w.get("size") or 0) > max_wheel_mb * 1e6:
                        report.skipped.append(f"{dist} {w['version']}: "
                                              f"{(w.get('size') or 0) / 1e6:.0f} MB")
                        continue
                    say(f"fingerprint {dist} {w['version']}")
                    try:
                        path = pypi.download(sess, w, tmp)
                        try:
                            recs = pypi.fingerprint_wheel(path, w, tmp)
                        finally:
                            path.unlink(missing_ok=True)
                    except (pypi.UpdateError, OSError, ValueError) as exc:
                        report.skipped.append(f"{dist} {w['version']}: {exc}"[:200])
                        continue
                    records += recs
                    report.added.append(f"{dist} {w['version']} ({len(recs)})")
            for ref in redistrib:
                r_records, r_releases = _redistrib(sess, ref, have, max_wheel_mb, tmp, report,
                                                   say)
                records += r_records
                releases += r_releases
    except pypi.UpdateError as exc:
        raise FingerprintUpdateError(f"fingerprint update failed, kept the current database: "
                                     f"{exc}") from None
    built = _now()
    new = FingerprintDB(records, built=built, releases=[Release(*r) for r in sorted(
        {(r.product, r.version, r.source) for r in releases})], complete_from=complete
        or base.complete_from)
    db = _install(dumps(new.to_document()), dest)
    report.records, report.releases, report.built = len(db), len(db.releases), built
    return report


def _redistrib(sess: object, ref: str, have: set[str], max_mb: float, tmp: Path,
               report: UpdateReport, say: Callable[[str], None]
               ) -> tuple[list[Record], list[Release]]:
    """The records of the archives of the manifests ``ref`` names that the database lacks
    (by source), and the manifests' release rows; a manifest that cannot be read or parsed
    fails the update (UpdateError), an archive that fails is skipped and named."""
    from . import redistrib as rd
    from .pypi import UpdateError

    records: list[Record] = []
    releases: list[Release] = []
    for one in rd.manifest_refs(ref):
        say(f"manifest {one}")
        url, data = rd.read_manifest(sess, one)
        man = rd.parse_manifest(data, url)
        releases += rd.release_rows(man)
        for a in man.archives:
            src = man.source(a)
            if src in have:
                continue
            if (a.size or 0) > max_mb * 1e6:
                report.skipped.append(f"{src} {a.version}: {(a.size or 0) / 1e6:.0f} MB")
                continue
            say(f"fingerprint {a.label} {a.version}")
            try:
                path = rd.fetch_archive(sess, man, a, tmp, limit=int(max_mb * 1e6))
                try:
                    recs, _notes = rd.fingerprint_archive(path, man, a, tmp)
                finally:
                    path.unlink(missing_ok=True)
            except (UpdateError, OSError, ValueError) as exc:
                report.skipped.append(f"{src} {a.version}: {exc}"[:200])
                continue
            records += recs
            report.added.append(f"{src} {a.version} ({len(recs)})")
    return records, releases


def reset() -> Path | None:
    """Remove the user copy; its path when there was one."""
    p = user_db_path()
    try:
        p.unlink()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FingerprintUpdateError(f"{p}: cannot remove: {exc.strerror or exc}") from None
    clear()
    return p


def _active_bytes() -> bytes:
    db = load_active()
    if db.source == "bundled":
        from .._resources import read_bytes
        from .active import BUNDLED_NAME

        return read_bytes("gpusbom", BUNDLED_NAME)
    return Path(db.source).read_bytes()


def export_db(path: str) -> str:
    """Write the database in use to ``path`` and its SHA-256 to ``path.sha256``."""
    data = _active_bytes()
    digest = hashlib.sha256(data).hexdigest()
    out = Path(path)
    try:
        out.write_bytes(data)
        Path(f"{path}.sha256").write_text(f"{digest}  {out.name}\n", encoding="ascii")
    except OSError as exc:
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None
    return digest


def import_db(path: str, sha256: str | None = None) -> tuple[Path, FingerprintDB, bool]:
    """Check, validate and install a database file; (destination, database, whether scans
    use it: False when the bundled snapshot is newer)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_DB_BYTES + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_DB_BYTES:  # bounded before anything else is done with it
        raise InputError(f"{path}: more than {MAX_DB_BYTES} bytes: not a fingerprint database; "
                         "nothing imported")
    verify_sha256(path, data, sha256)
    try:
        load_bytes(data, name=path)  # hostile input: bounded, JSON only, every row checked
    except FingerprintError as exc:
        raise InputError(f"{path}: not a valid fingerprint database: {exc}; nothing "
                         "imported") from None
    dest = user_db_path()
    try:
        db = _install(data.decode("utf-8"), dest)
    except UnicodeDecodeError:  # load_bytes accepted it: cannot happen; never install it
        raise InputError(f"{path}: not UTF-8; nothing imported") from None
    used = load_active().source == str(dest)
    return dest, db, used
