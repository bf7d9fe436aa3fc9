"""Database URLs, engines and schema migrations of the inventory store.

- No URL: an SQLite file in the user data dir (``$XDG_DATA_HOME/gpusbom/inventory.db``,
  else ``~/.local/share/gpusbom/inventory.db``).
- ``sqlite:///PATH`` or a bare path: SQLite in WAL mode with a busy timeout; write
  transactions start with ``BEGIN IMMEDIATE`` so concurrent writers queue on the lock
  instead of failing half-way (readers are not blocked in WAL mode).
- ``postgresql://`` / ``postgres://`` / ``postgresql+psycopg://``: PostgreSQL through psycopg 3.

Every URL shown to a person goes through ``redact`` (the password becomes ``***``).
Migrations are Alembic scripts shipped inside the package (``migrations/``); ``Store`` runs
them on open, serialised by the database itself (PostgreSQL advisory lock, SQLite write
lock), so many hosts opening a fresh database at once create the schema once.
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

from ..errors import InputError

__all__ = ["InventoryError", "default_url", "normalize_url", "open_engine", "redact"]

#: an arbitrary constant: the PostgreSQL advisory lock that serialises migrations
_PG_MIGRATION_LOCK = 0x67707573626F6D  # "gpusbom"


class InventoryError(InputError):
    """The inventory database cannot be used (bad URL, unreachable, refused, wrong schema)."""


# greedy up to the last "@": a password may hold "@", "/" or spaces when not percent-encoded
_CRED_RX = re.compile(r"(?P<pre>[A-Za-z][A-Za-z0-9+.-]*://[^/:@\s]*:)(?P<pw>.*)@")


def redact(url: str) -> str:
    """``postgresql://u:secret@h/db`` -> ``postgresql://u:***@h/db`` (also for URLs that
    do not parse), and ``password=...`` query/DSN parameters."""
    out = _CRED_RX.sub(lambda m: m.group("pre") + "***@", url)
    return re.sub(r"(?i)(password=)[^&\s]*", r"\1***", out)


def default_url() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                           "share")
    return "sqlite:///" + os.path.join(base, "gpusbom", "inventory.db")


def normalize_url(url: str | None) -> Any:
    """A SQLAlchemy ``URL`` for ``url`` (None/empty: the ``inventory_db`` setting, else the
    default SQLite file)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from .. import settings

    text = (url or "").strip() or settings.raw("inventory_db").strip() or default_url()
    if "://" not in text:  # a bare path: an SQLite file
        text = "sqlite:///" + os.path.abspath(os.path.expanduser(text))
    try:
        u = make_url(text)
    except (ArgumentError, ValueError) as exc:
        raise InventoryError(f"inventory database URL {redact(text)!r}: not a database URL "
                             f"({str(exc).splitlines()[0][:120]})") from None
    backend = u.get_backend_name()
    if backend in ("postgresql", "postgres"):
        if u.drivername in ("postgresql", "postgres", "postgresql+psycopg2", "postgres+psycopg"):
            u = u.set(drivername="postgresql+psycopg")
        elif u.drivername != "postgresql+psycopg":
            raise InventoryError(f"inventory database URL {redact(text)!r}: driver "
                                 f"{u.drivername!r} is not supported (use postgresql://)")
    elif backend == "sqlite":
        if u.drivername != "sqlite":
            raise InventoryError(f"inventory database URL {redact(text)!r}: driver "
                                 f"{u.drivername!r} is not supported (use sqlite:///PATH)")
        if not u.database or u.database == ":memory:":
            raise InventoryError(f"inventory database URL {redact(text)!r}: give an SQLite "
                                 "file (sqlite:///PATH); an in-memory database keeps nothing")
    else:
        raise InventoryError(f"inventory database URL {redact(text)!r}: unsupported database "
                             f"{backend!r} (use sqlite:///PATH or postgresql://...)")
    return u


def _scrub(msg: str, url: Any) -> str:
    line = " ".join(str(msg).split())
    pw = getattr(url, "password", None)
    if pw:
        line = line.replace(str(pw), "***")
    line = redact(line)
    # psycopg/sqlite messages carry SQL and background links after the first sentence
    line = re.split(r"\s*\(Background on this error|\s*\[SQL:", line)[0]
    return line[:300]


def describe_error(exc: BaseException, url: Any) -> InventoryError:
    """One line naming the database (password hidden) and the problem."""
    orig = getattr(exc, "orig", None) or exc
    shown = url.render_as_string(hide_password=True) if hasattr(url, "render_as_string") \
        else redact(str(url))
    return InventoryError(f"inventory database {shown}: {_scrub(str(orig), url)}")


def _sqlite_setup(engine: Any) -> None:
    from sqlalchemy import event

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _rec: Any) -> None:
        # pysqlite's own transaction handling would BEGIN lazily (DEFERRED): take it over
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA busy_timeout = 60000")
        cur.execute("PRAGMA foreign_keys = ON")
        for attempt in range(50):
            try:
                cur.execute("PRAGMA journal_mode = WAL")
                break
            except sqlite3.OperationalError as exc:  # "database is locked": another opener
                if "locked" not in str(exc) or attempt == 49:
                    raise
                time.sleep(0.05 * (attempt + 1))
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        write = conn.get_execution_options().get("gpusbom_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def open_engine(url: str | None, blobs: Any = None) -> tuple[Any, Any, Any]:
    """(engine, URL, blob store) with the schema at the newest migration; raises
    ``InventoryError``. ``blobs``: a function of (URL, engine) returning the blob store
    (``blobs.open_blobs``), which migration 0004 moves scan bodies to."""
    from sqlalchemy import create_engine
    from sqlalchemy.exc import SQLAlchemyError


    u = normalize_url(url)
    if u.get_backend_name() == "sqlite":
        path = Path(u.database)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InventoryError(f"inventory database {path}: cannot create its directory: "
                                 f"{exc.strerror}") from None
        engine = create_engine(u, connect_args={"timeout": 60})
        _sqlite_setup(engine)
    else:
        q = dict(u.query)
        connect_args: dict[str, Any] = {}
        if "connect_timeout" not in q:
            connect_args["connect_timeout"] = 10
        engine = create_engine(u, connect_args=connect_args, pool_pre_ping=True)
    try:
        store = blobs(u, engine) if blobs is not None else None
        migrate(engine, store)
    except InventoryError:
        engine.dispose()
        raise
    except SQLAlchemyError as exc:
        engine.dispose()
        raise describe_error(exc, u) from None
    except OSError as exc:
        engine.dispose()
        raise describe_error(exc, u) from None
    return engine, u, store


@functools.lru_cache(maxsize=1)
def _alembic_head() -> str:
    from alembic.script import ScriptDirectory

    return str(ScriptDirectory.from_config(_alembic_config()).get_current_head())


def _alembic_config() -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", "gpusbom.inventory:migrations")
    return cfg


def migrate(engine: Any, blobs: Any = None) -> None:
    """Bring the schema to the newest revision (a no-op when it is there). ``blobs``: the
    blob store migration 0004 moves the scan bodies to."""
    from alembic import command
    from alembic.runtime.migration import MigrationContext

    head = _alembic_head()
    with engine.connect() as probe_conn:
        ctx = MigrationContext.configure(probe_conn)
        current = ctx.get_current_revision()
        probe_conn.rollback()
    if current == head:
        return
    with engine.connect().execution_options(gpusbom_write=True) as conn, conn.begin():
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_MIGRATION_LOCK})")
        current = MigrationContext.configure(conn).get_current_revision()
        if current == head:
            return
        if current is not None and current not in _known_revisions():
            raise InventoryError(
                f"inventory database schema revision {current!r} is newer than this "
                "gpusbom knows: upgrade gpusbom")
        cfg = _alembic_config()
        cfg.attributes["connection"] = conn
        cfg.attributes["blobs"] = blobs
        command.upgrade(cfg, "head")


def _known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    return {s.revision for s in ScriptDirectory.from_config(_alembic_config()).walk_revisions()}
