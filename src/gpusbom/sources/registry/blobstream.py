"""One layer blob as an unbroken stream: a connection that drops mid-stream resumes with a
``Range`` request (or skips what it already read when the registry ignores ranges).
"""

from __future__ import annotations

import io
import logging
import re
import threading
import time
from typing import TYPE_CHECKING, Any

from ...errors import (
    InputError,
    LayerError,
)

if TYPE_CHECKING:
    pass

from ..image import LayersCancelled
from .client import MAX_ATTEMPTS, RegistryClient, backoff, short_exc

log = logging.getLogger(__name__)


class Cancelled(LayersCancelled):
    pass


#: a layer stream that read this much since its last drop starts its retry count afresh
RESET_RETRIES_AFTER = 8 << 20


READ_CHUNK = 1 << 20


class BlobStream(io.RawIOBase):
    """A layer blob as one unbroken raw stream; dropped connections resume transparently.

    After a drop the blob is asked for again from the current offset (``Range``); a
    registry that ignores the range answers 200, and the bytes already read are skipped.
    Either way the reader upstream sees each byte once, in order.
    """

    def __init__(
        self,
        client: RegistryClient,
        digest: str,
        size: int | None,
        where: str,
        cancel: threading.Event,
    ) -> None:
        self._client = client
        self._digest = digest
        self._size = size
        self._where = where
        self._cancel = cancel
        self._resp: Any = None
        self._raw: Any = None
        self.pos = 0
        self.drops = 0
        self._fails = 0
        self._since_fail = 0

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if self._resp is not None:
            self._resp.close()
            self._resp = self._raw = None
        super().close()

    def _open(self) -> None:
        resp = self._client.open_blob(self._digest, self._where, offset=self.pos)
        raw = resp.raw
        if self.pos and resp.status_code == 206:
            cr = resp.headers.get("Content-Range", "")
            m = re.match(r"bytes (\d+)-", cr)
            if not m or int(m.group(1)) != self.pos:
                resp.close()
                raise LayerError(f"{self._where}: the registry answered a bad range ({cr!r})")
        elif self.pos:  # 200: the whole blob again; skip what we have
            left = self.pos
            while left > 0:
                chunk = raw.read(min(READ_CHUNK, left), decode_content=False)
                if not chunk:
                    resp.close()
                    raise ConnectionError("connection closed while skipping to the resume offset")
                left -= len(chunk)
        self._resp, self._raw = resp, raw

    def _drop(self, why: str) -> None:
        if self._resp is not None:
            self._resp.close()
        self._resp = self._raw = None
        self.drops += 1
        if self._since_fail >= RESET_RETRIES_AFTER:
            self._fails = 0
        self._fails += 1
        self._since_fail = 0
        total = f" of {self._size}" if self._size is not None else ""
        if self._fails >= MAX_ATTEMPTS:
            raise LayerError(
                f"{self._where}: the registry connection dropped {self._fails} times in a row "
                f"(last at byte {self.pos}{total}: {why}); giving up"
            )
        delay = backoff(self._fails)
        log.debug(
            "%s: connection dropped at byte %d (%s); resuming in %.2fs",
            self._where,
            self.pos,
            why,
            delay,
        )
        time.sleep(delay)

    def readinto(self, b: Any) -> int:
        if len(b) == 0:
            return 0
        while True:
            if self._cancel.is_set():
                raise Cancelled()
            try:
                if self._raw is None:
                    self._open()
                data = self._raw.read(len(b), decode_content=False)
            except InputError:
                raise
            except Exception as e:  # noqa: BLE001 - resets, IncompleteRead, timeouts
                self._drop(short_exc(e))
                continue
            n = len(data)
            if n == 0:
                if self._size is not None and self.pos < self._size:
                    self._drop(f"connection closed after {self.pos} bytes")
                    continue
                return 0
            b[:n] = data
            self.pos += n
            self._since_fail += n
            return n
