"""Downloads of ``advisories update``: one HTTPS client (``requests``) that streams a body
with a size limit and a length check, files checked against their published ``.sha256``
(NVIDIA's bulletins, with their CRLF-hash exception), and JSON read from the bytes. Every
failure is an ``UpdateError`` (an ``InputError``: exit 3) naming the URL. Used by
``update.py`` and the feeds (``feeds/``).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..safetext import loads_json

__all__ = ["UpdateError"]

_TIMEOUT = (10.0, 60.0)
_MAX_FILE = 4 << 20  # one CSAF document / index / checksum
_MAX_ARCHIVE = 2 << 30  # one OSV all.zip


class UpdateError(InputError):
    """The update could not complete; the current database is unchanged."""


class _Fetcher:
    def __init__(self) -> None:
        import requests

        self.requests = requests
        self.session = requests.Session()
        self.session.headers["User-Agent"] = "gpusbom-advisories-update"

    def _open(self, url: str, *, missing_ok: bool = False) -> Any:
        req = self.requests
        try:
            resp = self.session.get(url, stream=True, timeout=_TIMEOUT)
        except req.exceptions.SSLError as exc:
            raise UpdateError(f"{url}: TLS verification failed: {_short(exc)}") from None
        except req.exceptions.RequestException as exc:
            raise UpdateError(f"{url}: cannot connect (offline?): {_short(exc)}") from None
        if missing_ok and resp.status_code == 404:
            resp.close()
            return None
        if resp.status_code != 200:
            resp.close()
            raise UpdateError(f"{url}: HTTP {resp.status_code}")
        return resp

    def _chunks(self, resp: Any, url: str, limit: int) -> Iterable[bytes]:
        req = self.requests
        expected = resp.headers.get("Content-Length")
        got = 0
        try:
            for chunk in resp.raw.stream(1 << 16, decode_content=True):
                got += len(chunk)
                if got > limit:
                    raise UpdateError(f"{url}: larger than {limit} bytes")
                yield chunk
        except (req.exceptions.RequestException, OSError) as exc:
            raise UpdateError(f"{url}: download interrupted: {_short(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - urllib3 ProtocolError / IncompleteRead, re-raised as UpdateError
            if isinstance(exc, UpdateError):
                raise
            raise UpdateError(f"{url}: download interrupted: {_short(exc)}") from None
        finally:
            resp.close()
        if (expected is not None and expected.isdigit() and int(expected) != got
                and resp.headers.get("Content-Encoding") in (None, "identity")):
            raise UpdateError(f"{url}: download interrupted: got {got} of {expected} bytes")

    def get(self, url: str, *, missing_ok: bool = False, limit: int = _MAX_FILE) -> bytes | None:
        resp = self._open(url, missing_ok=missing_ok)
        if resp is None:
            return None
        return b"".join(self._chunks(resp, url, limit))

    def get_to_file(self, url: str, dest: Path, limit: int = _MAX_ARCHIVE) -> dict[str, str]:
        """Stream to ``dest``; returns the response's checksum headers."""
        resp = self._open(url)
        goog = resp.headers.get("x-goog-hash", "")
        md5 = hashlib.md5(usedforsecurity=False)
        sha = hashlib.sha256()
        with open(dest, "wb") as f:
            for chunk in self._chunks(resp, url, limit):
                f.write(chunk)
                md5.update(chunk)
                sha.update(chunk)
        sums = dict(x.strip().split("=", 1) for x in goog.split(",") if "=" in x)
        if "md5" in sums:
            want = sums["md5"].strip()
            have = base64.b64encode(md5.digest()).decode()
            if want != have:
                raise UpdateError(f"{url}: checksum mismatch (x-goog-hash md5 {want}, "
                                  f"got {have})")
        return {"sha256": sha.hexdigest(), "checked": "x-goog-hash md5" if "md5" in sums
                else "length only (the server published no checksum)"}


def _short(exc: BaseException) -> str:
    s = " ".join(str(exc).split())
    return s[:160] + ("..." if len(s) > 160 else "")


def _sha256_of(text: bytes, url: str) -> str:
    word = text.decode("ascii", "replace").strip().split()
    if not word or len(word[0]) != 64 or any(c not in "0123456789abcdefABCDEF" for c in word[0]):
        raise UpdateError(f"{url}: not a sha256 checksum file")
    return word[0].lower()


def _verified(fetch: _Fetcher, url: str) -> bytes:
    """The file at ``url``, checked against ``url.sha256``."""
    want = _sha256_of(fetch.get(url + ".sha256") or b"", url + ".sha256")
    data = fetch.get(url) or b""
    have = hashlib.sha256(data).hexdigest()
    if have != want:
        raise UpdateError(f"{url}: checksum mismatch (published {want[:16]}..., "
                          f"downloaded {have[:16]}...)")
    return data


class _TransportError(UpdateError):
    """The server could not be read (connection, HTTP error, short body)."""


def _verified_bulletin(fetch: _Fetcher, url: str) -> bytes:
    """One bulletin checked against its published ``.sha256``. NVIDIA published a few
    hashes of the CRLF form of their file (5449, 5586, 5703, 5708): that form is accepted
    only when the published hash is exactly the CRLF form's. Anything else raises
    ``UpdateError`` for this bulletin alone."""
    try:
        published = fetch.get(url + ".sha256", missing_ok=True)
        data = fetch.get(url, missing_ok=True)
    except UpdateError as exc:
        raise _TransportError(str(exc)) from None
    if published is None or data is None:
        raise UpdateError(f"{url}: not published (HTTP 404{' for .sha256' if data else ''}); "
                          "bulletin skipped")
    want = _sha256_of(published, url + ".sha256")
    if hashlib.sha256(data).hexdigest() == want:
        return data
    crlf = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    if hashlib.sha256(crlf).hexdigest() == want:
        return data
    raise UpdateError(f"{url}: checksum mismatch (published {want[:16]}..., downloaded "
                      f"{hashlib.sha256(data).hexdigest()[:16]}...); bulletin skipped")


def _json(data: bytes, url: str) -> Any:
    try:
        return loads_json(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UpdateError(f"{url}: invalid data: not JSON ({_short(exc)})") from None


# the names the feeds (``advisories/feeds/``, a package of their own) use: public, so no
# module imports another package's private names
Fetcher = _Fetcher
TransportError = _TransportError
short = _short
verified = _verified
verified_bulletin = _verified_bulletin
parse_json = _json
