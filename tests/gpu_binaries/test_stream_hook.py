"""The StreamAnalyzer hook of the layer reader and of from_directory."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path
from typing import Any

from gpusbom.fsview.layer import read_layer
from gpusbom.fsview.spec import PathMatcher, PathSpec
from gpusbom.fsview.squash import squash
from gpusbom.fsview.types import Limits, NullProgress, Spool
from gpusbom.fsview.view import FsView


class Count:
    def __init__(self) -> None:
        self.n = 0
        self.chunks = 0
        self.head = b""

    def feed(self, chunk: bytes) -> None:
        self.n += len(chunk)
        self.chunks += 1
        if len(self.head) < 8:
            self.head += chunk[: 8 - len(self.head)]

    def close(self) -> dict[str, Any] | None:
        return {"count": {"bytes": self.n, "head": self.head.decode()}} if self.n else None


class Boom:
    def feed(self, chunk: bytes) -> None:
        raise RuntimeError("boom")

    def close(self) -> dict[str, Any] | None:
        return {"never": 1}


def _layer(files: dict[str, bytes], links: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for p, data in files.items():
            ti = tarfile.TarInfo(p)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
        for p, target in links.items():
            ti = tarfile.TarInfo(p)
            ti.type = tarfile.LNKTYPE
            ti.linkname = target
            tf.addfile(ti)
    return buf.getvalue()


def _view(blob: bytes, specs: list[PathSpec]) -> FsView:
    limits = Limits(max_memory_content=1024)
    with Spool(limits) as spool:
        idx = read_layer(
            io.BytesIO(blob), index=0, name="l0", matcher=PathMatcher(specs), spool=spool,
            limits=limits, progress=NullProgress(),
        )  # fmt: skip
        return squash([idx], limits)


def test_layer_analyzers_see_every_byte_and_keep_nothing() -> None:
    big = b"ELFDATA!" + os.urandom(3 << 20)
    blob = _layer(
        {"usr/lib/libbig.so.1": big, "usr/lib/small.so": b"tiny", "etc/x.conf": b"no"},
        {"usr/lib/hard.so.1": "usr/lib/libbig.so.1"},
    )
    specs = [PathSpec("/**/*.so*", max_size=0, stream=Count), PathSpec("/**/*.so", stream=Boom)]
    fs = _view(blob, specs)
    a = fs.analysis("/usr/lib/libbig.so.1")
    assert a == {"count": {"bytes": len(big), "head": "ELFDATA!"}}
    assert fs.lookup("/usr/lib/libbig.so.1").content is None  # max_size=0: not kept
    assert fs.analysis("/usr/lib/hard.so.1") == a  # hard link shares its target's result
    small = fs.analysis("/usr/lib/small.so")
    assert small is not None and small["count"]["bytes"] == 4  # both factories ran
    assert "analyzer_errors" in small and "never" not in small  # Boom dropped, not fatal
    assert fs.analysis("/etc/x.conf") is None


def test_spec_merge_keeps_factories() -> None:
    m = PathMatcher([PathSpec("/a/*.so", stream=Count), PathSpec("/a/lib*", stream=Boom)])
    spec = m.match("/a/libx.so")
    assert spec is not None and set(spec.analyzers) == {Count, Boom}
    assert PathSpec("/x").analyzers == () and hash(spec)


def test_from_directory_runs_analyzers(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    data = b"ELFDATA!" + os.urandom(5 << 20)
    (tmp_path / "lib" / "libq.so").write_bytes(data)
    (tmp_path / "lib" / "libr.so").symlink_to("libq.so")
    matcher = PathMatcher([PathSpec("/**/*.so", max_size=1 << 30, stream=Count)])
    with Spool() as spool:
        fs = FsView.from_directory(tmp_path, matcher, spool)
        assert fs.analysis("/lib/libq.so") == {"count": {"bytes": len(data), "head": "ELFDATA!"}}
        assert fs.analysis("/lib/libr.so") == fs.analysis("/lib/libq.so")  # via the link
        assert fs.read_bytes("/lib/libq.so") == data  # captured as well
