"""``docker:REF`` (and bare ``name:tag`` / ``name@sha256:...``): the local Docker Engine.

Where the Engine is local, its data root readable and its storage driver ``overlay2`` or
``vfs``, the layers are rebuilt from that storage (``docker_storage``: the same bytes as
``docker save``, checked against the diff_ids, layers in parallel). Otherwise, or on any
doubt there, the image is exported with the Engine's ``GET /images/{name}/get`` (what
``docker save`` uses) and the chunked response is read as a stream, once, by the
streaming outer-tar reader: no temp file of the whole export. Tags and repo digests come
from inspect.
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Iterator
from typing import Any

from ..errors import GpusbomError, LayerError, SourceNotFoundError, UsageError
from .archive import StreamingTarStore
from .base import ReadContext, Source, SourceResult
from .image import check_platform, make_target, plan_docker, read_layers, split_reference

log = logging.getLogger(__name__)


def docker_host() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


class _ChunkStream(io.RawIOBase):
    """A generator of byte chunks as a read-only raw stream."""

    def __init__(self, chunks: Iterator[bytes], where: str) -> None:
        self._it = chunks
        self._buf = b""
        self._where = where

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._buf:
            try:
                self._buf = next(self._it)
            except StopIteration:
                return 0
            except Exception as e:  # noqa: BLE001 - requests / urllib3 errors while streaming
                raise LayerError(
                    f"{self._where}: the export stream from the Docker Engine broke: {e}"
                ) from None
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


class DockerEngineSource(Source):
    """An image in the local Docker Engine (``DOCKER_HOST`` is honoured)."""

    scheme = "docker"

    def __init__(self, reference: str, location: str) -> None:
        super().__init__(reference, location)
        self._client: Any = None
        self._inspect: dict[str, Any] | None = None

    def _connect(self) -> Any:
        if self._client is None:
            import docker  # type: ignore[import-untyped]  # the SDK is heavy; import when used

            try:
                self._client = docker.from_env()
            except docker.errors.DockerException as e:
                raise SourceNotFoundError(
                    f"Docker Engine not reachable at {docker_host()}: {_short(e)}"
                ) from None
        return self._client

    def probe(self) -> str | None:
        """None when the Engine has the image, else why not (one line, for resolution)."""
        try:
            self.inspect()
        except SourceNotFoundError as e:
            return str(e)
        return None

    def inspect(self) -> dict[str, Any]:
        if self._inspect is not None:
            return self._inspect
        import docker
        import requests

        client = self._connect()
        ref = self.location
        try:
            info = client.api.inspect_image(ref)
        except docker.errors.ImageNotFound:
            raise SourceNotFoundError(
                f"no image {ref!r} in the Docker Engine at {docker_host()}"
            ) from None
        except docker.errors.APIError as e:
            if e.status_code == 404:
                raise SourceNotFoundError(
                    f"no image {ref!r} in the Docker Engine at {docker_host()}"
                ) from None
            raise SourceNotFoundError(
                f"docker:{ref}: the Docker Engine at {docker_host()} refused it: {_short(e)}"
            ) from None
        except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
            raise SourceNotFoundError(
                f"Docker Engine not reachable at {docker_host()}: {_short(e)}"
            ) from None
        if not isinstance(info, dict) or not isinstance(info.get("Id"), str):
            raise SourceNotFoundError(f"docker:{ref}: unexpected inspect answer from the Engine")
        self._inspect = info
        return info

    def read(self, ctx: ReadContext) -> SourceResult:
        import docker
        import requests

        info = self.inspect()
        label = f"docker:{self.location}"
        direct = self._read_direct(info, label, ctx)
        if direct is not None:
            return direct
        image_id: str = info["Id"]
        try:
            chunks = self._connect().api.get_image(image_id)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
            raise SourceNotFoundError(f"{label}: export failed: {_short(e)}") from None
        raw = io.BufferedReader(_ChunkStream(iter(chunks), label), 1 << 20)
        try:
            store = StreamingTarStore(raw, label, ctx)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        plan = plan_docker(
            store, ctx, image_id=image_id if image_id.startswith("sha256:") else None
        )
        return self._finish(info, store, plan, ctx, label)

    def _finish(
        self, info: dict[str, Any], store: Any, plan: Any, ctx: ReadContext, label: str
    ) -> SourceResult:
        tags = [t for t in info.get("RepoTags") or [] if isinstance(t, str)]
        digests = [d for d in info.get("RepoDigests") or [] if isinstance(d, str)]
        plan.tags = tags
        plan.name = split_reference(tags[0] if tags else digests[0] if digests else self.location)[
            0
        ]
        if digests:  # the registry digest (of the manifest, or of the index it came from)
            plan.manifest_digest = digests[0].partition("@")[2] or plan.manifest_digest
        check_platform(plan, ctx, label)
        layers = read_layers(store, plan, ctx)
        return SourceResult(
            target=make_target(self.reference, "docker", plan, layers), layers=layers
        )

    def _read_direct(
        self, info: dict[str, Any], label: str, ctx: ReadContext
    ) -> SourceResult | None:
        """The image read from the Engine's storage (``docker_storage``), or None where that
        does not apply or fails: the save stream then reads (and judges) the image."""
        from .docker_storage import plan_direct

        found = plan_direct(self._connect(), info, label)
        if found is None:
            return None
        store, plan = found
        try:
            return self._finish(info, store, plan, ctx, label)
        except (GpusbomError, OSError) as e:
            if isinstance(e, SourceNotFoundError | UsageError):
                raise  # not about the storage (a platform that does not match, ...)
            log.debug("%s: direct read of the Engine's storage gave way: %s", label, e)
            return None


def _short(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 200 else text[:197] + "..."
