"""The blob store of the inventory: scan bodies (component and finding sets as canonical
JSON, zlib-compressed) under the sha256 of their uncompressed bytes.

- a directory (``inventory_blobs`` = a path, or ``file:///PATH``): ``ab/cdef...`` files,
  written to a temporary name and renamed (a reader never sees half a blob); the default
  beside an SQLite file (``inventory.db`` -> ``inventory.blobs/``);
- ``s3://BUCKET/PREFIX``: S3-compatible object storage through boto3 (endpoint and
  credentials as boto3 reads them: ``$AWS_ENDPOINT_URL``, ``$AWS_ACCESS_KEY_ID``...);
- ``db``: the ``blobs`` table of the inventory database itself (the default on PostgreSQL:
  every pushing host writes to the one database, and a directory would be per host).

A blob is written before the database rows that reference it, so a crash leaves at most an
unreferenced blob (``prune`` removes those from a directory or the table), never a row
whose body is missing. A missing blob (deleted by hand, a wrong bucket) is one line
naming the store and the key (``BlobMissing``, exit 3); the index rows stay usable and
ingesting the scan again puts the blob back.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .database import InventoryError


class BlobMissing(InventoryError):
    """A blob the index references is not in the blob store."""


def key_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class BlobStore:
    """put/get/has/delete/keys of compressed blobs; ``get`` returns the uncompressed bytes
    and checks them against the key."""

    name = "blobs"

    def put_raw(self, key: str, packed: bytes) -> None:
        raise NotImplementedError

    def get_raw(self, key: str) -> bytes | None:
        raise NotImplementedError

    def has(self, key: str) -> bool:
        raise NotImplementedError

    def delete(self, key: str) -> None:
        raise NotImplementedError

    def keys(self) -> Iterator[str]:
        raise NotImplementedError

    def put(self, key: str, data: bytes) -> bool:
        """Store ``data`` under ``key`` unless there; True when written."""
        if self.has(key):
            return False
        self.put_raw(key, zlib.compress(data, 6))
        return True

    def get(self, key: str) -> bytes:
        packed = self.get_raw(key)
        if packed is None:
            raise BlobMissing(f"inventory blob store {self.name}: object {key} is missing "
                              "(ingest the scan again to restore it)")
        try:
            data = zlib.decompress(packed)
        except zlib.error:
            data = b""
        if key_of(data) != key:
            raise BlobMissing(f"inventory blob store {self.name}: object {key} is damaged "
                              "(its content does not hash to its name)")
        return data

    def close(self) -> None:
        return None


class DirStore(BlobStore):
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.name = str(self.root)

    def _path(self, key: str) -> Path:
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise InventoryError(f"inventory blob store: bad key {key[:80]!r}")
        return self.root / key[:2] / key[2:]

    def has(self, key: str) -> bool:
        return self._path(key).is_file()

    def put_raw(self, key: str, packed: bytes) -> None:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(packed)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise InventoryError(f"inventory blob store {self.name}: cannot write {key}: "
                                 f"{exc.strerror or exc}") from None

    def get_raw(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise InventoryError(f"inventory blob store {self.name}: cannot read {key}: "
                                 f"{exc.strerror or exc}") from None

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def keys(self) -> Iterator[str]:
        if not self.root.is_dir():
            return
        for sub in sorted(self.root.iterdir()):
            if len(sub.name) == 2 and sub.is_dir():
                for f in sorted(sub.iterdir()):
                    if not f.name.startswith(".tmp-"):
                        yield sub.name + f.name


class DbStore(BlobStore):
    """Blobs in the ``blobs`` table of the inventory database."""

    name = "db"

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def has(self, key: str) -> bool:
        from sqlalchemy import select

        from .schema import blobs

        with self.engine.connect() as conn:
            return conn.execute(select(blobs.c.key).where(blobs.c.key == key)).first() \
                is not None

    def put_raw(self, key: str, packed: bytes) -> None:
        from sqlalchemy.dialects import postgresql, sqlite

        from .schema import blobs

        insert: Any = postgresql.insert if self.engine.dialect.name == "postgresql" \
            else sqlite.insert
        with self.engine.connect().execution_options(gpusbom_write=True) as conn, \
                conn.begin():
            conn.execute(insert(blobs).values(key=key, data=packed).on_conflict_do_nothing())

    def get_raw(self, key: str) -> bytes | None:
        from sqlalchemy import select

        from .schema import blobs

        with self.engine.connect() as conn:
            got = conn.execute(select(blobs.c.data).where(blobs.c.key == key)).scalar()
        return bytes(got) if got is not None else None

    def delete(self, key: str) -> None:
        from .schema import blobs

        with self.engine.connect().execution_options(gpusbom_write=True) as conn, \
                conn.begin():
            conn.execute(blobs.delete().where(blobs.c.key == key))

    def keys(self) -> Iterator[str]:
        from sqlalchemy import select

        from .schema import blobs

        with self.engine.connect() as conn:
            yield from conn.execute(select(blobs.c.key).order_by(blobs.c.key)).scalars()


class S3Store(BlobStore):
    """S3-compatible object storage through boto3 (``pip install boto3``)."""

    def __init__(self, url: str) -> None:
        rest = url[len("s3://"):]
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise InventoryError(f"inventory blob store {url!r}: use s3://BUCKET[/PREFIX]")
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            raise InventoryError("inventory blob store s3://: boto3 is not installed "
                                 "(pip install boto3)") from None
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.name = url
        self.client = boto3.client(
            "s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None,
            config=Config(retries={"max_attempts": 5, "mode": "standard"},
                          connect_timeout=10, read_timeout=60))

    def _key(self, key: str) -> str:
        return f"{self.prefix}{key[:2]}/{key}"

    def _fail(self, what: str, key: str, exc: Exception) -> InventoryError:
        return InventoryError(f"inventory blob store {self.name}: cannot {what} {key}: "
                              f"{' '.join(str(exc).split())[:200]}")

    def has(self, key: str) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise self._fail("look up", key, exc) from None
        except BotoCoreError as exc:
            raise self._fail("look up", key, exc) from None

    def put_raw(self, key: str, packed: bytes) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=packed)
        except (BotoCoreError, ClientError) as exc:
            raise self._fail("write", key, exc) from None

    def get_raw(self, key: str) -> bytes | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            got = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
            return bytes(got["Body"].read())
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise self._fail("read", key, exc) from None
        except BotoCoreError as exc:
            raise self._fail("read", key, exc) from None

    def delete(self, key: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        except (BotoCoreError, ClientError) as exc:
            raise self._fail("delete", key, exc) from None

    def keys(self) -> Iterator[str]:
        pager = self.client.get_paginator("list_objects_v2")
        for page in pager.paginate(Bucket=self.bucket, Prefix=self.prefix):
            for obj in page.get("Contents", []):
                yield str(obj["Key"]).rsplit("/", 1)[-1]


def open_blobs(spec: str | None, url: Any, engine: Any) -> BlobStore:
    """The blob store named by ``spec`` (else the ``inventory_blobs`` setting, else the
    default for the database ``url``)."""
    from .. import settings

    text = (spec or "").strip() or settings.raw("inventory_blobs").strip()
    if not text:
        if url.get_backend_name() == "sqlite" and url.database:
            db = Path(url.database)
            return DirStore(db.with_name(db.stem + ".blobs"))
        return DbStore(engine)
    if text == "db":
        return DbStore(engine)
    if text.startswith("s3://"):
        return S3Store(text)
    if text.startswith("file://"):
        text = text[len("file://"):]
    if "://" in text:
        raise InventoryError(f"inventory blob store {text!r}: use a directory, "
                             "s3://BUCKET/PREFIX or db")
    return DirStore(os.path.abspath(os.path.expanduser(text)))
