"""The layer-result cache (fsview.layercache): same output with and without it, on every
fixture; hits really skip reading; bad layers are never stored; eviction; a planted
entry cannot run code."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import pickle
import sqlite3
import tarfile
from pathlib import Path

import pytest

from fixtures.build import ensure
from fixtures.recipes import RECIPES
from gpusbom.errors import GpusbomError
from gpusbom.fsview import layercache
from gpusbom.fsview.types import Limits
from gpusbom.scan import scan

EPOCH = "1700000000"


@pytest.fixture(autouse=True)
def _epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)


def _doc(ref: str, cache_dir: Path | None) -> str:
    if cache_dir is None:
        result = scan(ref, cache=False, advisories=False)
    else:
        os.environ["GPUSBOM_CACHE_DIR"] = str(cache_dir)
        result = scan(ref, cache=True, advisories=False)
    return json.dumps(result.to_dict(), indent=2, sort_keys=True)


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_output_identical_with_and_without_cache(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUSBOM_CACHE_DIR", str(tmp_path))
    fx = ensure(name)
    ref = str(fx.docker_archive)
    plain = _doc(ref, None)
    cold = _doc(ref, tmp_path)  # fills the cache
    with sqlite3.connect(tmp_path / "layers.sqlite") as db:
        stored = db.execute("SELECT COUNT(*) FROM layer_data").fetchone()[0]
    assert stored >= 1
    warm = _doc(ref, tmp_path)  # every layer from the cache
    assert cold == plain
    assert warm == plain
    # the OCI layout of the same image shares the layers (same digests): all hits
    oci = _doc(f"oci:{fx.oci_dir}", tmp_path)
    assert oci == _doc(f"oci:{fx.oci_dir}", None)


def _tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in members.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mtime = 1
            tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def _layout(root: Path, layers: list[bytes]) -> str:
    """An OCI layout of gzip ``layers`` (uncompressed tars); returns ``oci:DIR``."""
    blobs = root / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def put(data: bytes) -> str:
        d = hashlib.sha256(data).hexdigest()
        (blobs / d).write_bytes(data)
        return "sha256:" + d

    descs, diffs = [], []
    for raw in layers:
        gz = gzip.compress(raw, mtime=0)
        descs.append(
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": put(gz),
                "size": len(gz),
            }
        )
        diffs.append("sha256:" + hashlib.sha256(raw).hexdigest())
    cfg = json.dumps(
        {"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": diffs}}
    ).encode()
    man = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": put(cfg),
                "size": len(cfg),
            },
            "layers": descs,
        }
    ).encode()
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": put(man),
                "size": len(man),
            }
        ],
    }
    (root / "index.json").write_text(json.dumps(index))
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    return f"oci:{root}"


_OS = b'ID=debian\nVERSION_ID="12"\n'
_DPKG = b"Package: libfoo\nStatus: install ok installed\nVersion: 1.0\nArchitecture: amd64\n\n"


def test_shared_base_layers_are_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUSBOM_CACHE_DIR", str(tmp_path / "c"))
    base = _tar({"etc/os-release": _OS, "var/lib/dpkg/status": _DPKG, "usr/lib/x": b"x" * 100})
    a = _layout(tmp_path / "a", [base, _tar({"opt/a": b"a"})])
    # B's top layer replaces the base's dpkg status with an unmatched-then-matched mix and
    # deletes /usr/lib/x by shadowing it with a file of the same path
    b = _layout(tmp_path / "b", [base, _tar({"usr/lib/x": b"new", "opt/b": b"b"})])
    _doc(a, tmp_path / "c")
    reads: list[int] = []
    from gpusbom.sources.image import layers as image_mod

    real = image_mod.read_layer

    def spy(raw, **kw):  # type: ignore[no-untyped-def]
        reads.append(kw["index"])
        return real(raw, **kw)

    monkeypatch.setattr(image_mod, "read_layer", spy)
    cached = _doc(b, tmp_path / "c")
    assert reads == [1]  # only B's top layer was read
    assert cached == _doc(b, None)


@pytest.mark.parametrize(
    "bad",
    ["traversal", "corrupt"],
)
def test_bad_layers_never_cached(tmp_path: Path, bad: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUSBOM_CACHE_DIR", str(tmp_path / "c"))
    good = _tar({"etc/os-release": _OS})
    if bad == "traversal":
        ref = _layout(tmp_path / "img", [good, _tar({"../../evil": b"x"})])
    else:
        ref = _layout(tmp_path / "img", [good, _tar({"opt/x": os.urandom(4096)})])
        manifest_dir = tmp_path / "img" / "blobs" / "sha256"
        # damage the top blob's deflate data but keep its digest in the manifest: the digest
        # check or the inflater must refuse it, now and on every later scan
        top = max(manifest_dir.iterdir(), key=lambda p: p.stat().st_size)
        data = bytearray(top.read_bytes())
        data[len(data) // 2] ^= 0xFF
        top.write_bytes(bytes(data))
    for _ in range(2):
        with pytest.raises(GpusbomError):
            _doc(ref, tmp_path / "c")
    with sqlite3.connect(tmp_path / "c" / "layers.sqlite") as db:
        keys = db.execute("SELECT COUNT(*) FROM layer_data").fetchone()[0]
    # nothing is stored when a layer of the image fails
    assert keys == 0


def test_eviction_and_planted_entries(tmp_path: Path) -> None:
    lim = Limits()
    c = layercache.LayerCache(
        tmp_path / "l.sqlite", collectors={"x": "1"}, limits=lim, max_size=1000
    )
    from gpusbom.fsview.types import LayerIndex
    from gpusbom.model import LayerRef

    for i in range(5):
        li = LayerIndex(ref=LayerRef(index=0, diff_id=f"sha256:{i}"), file_count=i)
        li.entries = {}
        assert c.put(f"k{i}", li)
        c._db.execute("UPDATE layer_use SET size = 400 WHERE key = ?", (f"k{i}",))
        c.evict()
    left = c._db.execute("SELECT COUNT(*) FROM layer_use").fetchone()[0]
    assert c._db.execute("SELECT COUNT(*) FROM layer_data").fetchone()[0] == left
    assert 1 <= left <= 2

    class Evil:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (os.system, ("touch " + str(tmp_path / "pwned"),))

    c._db.execute("INSERT INTO layer_data VALUES ('evil', ?)", (pickle.dumps(Evil()),))
    c._db.execute("INSERT INTO layer_use VALUES ('evil', 10, 0)")
    assert c.get("evil", None, lim) is None
    assert not (tmp_path / "pwned").exists()
    # a damaged entry is a miss and is dropped
    assert c._db.execute("SELECT COUNT(*) FROM layer_data WHERE key = 'evil'").fetchone()[0] == 0
    assert c._db.execute("SELECT COUNT(*) FROM layer_use WHERE key = 'evil'").fetchone()[0] == 0
    c.close()


def test_entries_read_and_touched_in_batches(tmp_path: Path) -> None:
    """An image's layers are looked up in one query per batch (many layers: several), and
    the hits marked used; a key without an entry is simply absent."""
    c = layercache.LayerCache(tmp_path / "l.sqlite", collectors={"x": "1"}, limits=Limits())
    keys = [f"k{i}" for i in range(2 * layercache._BATCH + 7)]
    c._db.executemany("INSERT INTO layer_data VALUES (?, ?)", [(k, k.encode()) for k in keys[::3]])
    c._db.executemany("INSERT INTO layer_use VALUES (?, 1, 0)", [(k,) for k in keys[::3]])
    assert c._rows(keys) == {k: k.encode() for k in keys[::3]}
    c._touch(keys[::3][:-1])
    untouched = c._db.execute("SELECT key FROM layer_use WHERE used = 0").fetchall()
    assert untouched == [(keys[::3][-1],)]
    c.close()


def test_former_layout_is_dropped(tmp_path: Path) -> None:
    """A cache file of the one-table layout (data, size and use time in one row) loses that
    table on open; its entries are read afresh and stored in the current layout."""
    with sqlite3.connect(tmp_path / "l.sqlite") as db:
        db.execute("CREATE TABLE layers (key TEXT PRIMARY KEY, data BLOB NOT NULL, "
                   "size INTEGER NOT NULL, used REAL NOT NULL)")
        db.execute("INSERT INTO layers VALUES ('k', x'00', 1, 0)")
    c = layercache.LayerCache(tmp_path / "l.sqlite", collectors={"x": "1"}, limits=Limits())
    tables = {r[0] for r in c._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"meta", "layer_use", "layer_data"}
    assert c.get("k", None, Limits()) is None
    c.close()


def test_key_changes_with_collectors_and_limits(tmp_path: Path) -> None:
    a = layercache.LayerCache(tmp_path / "l.sqlite", collectors={"x": "1"}, limits=Limits())
    b = layercache.LayerCache(tmp_path / "l.sqlite", collectors={"x": "2"}, limits=Limits())
    c = layercache.LayerCache(
        tmp_path / "l.sqlite", collectors={"x": "1"}, limits=Limits(max_memory_content=1)
    )
    d = layercache.LayerCache(
        tmp_path / "l.sqlite", collectors={"x": "1"}, limits=Limits(max_memory=1 << 20)
    )
    keys = {x.key("sha256:a", "sha256:b", None) for x in (a, b, c)}
    assert len(keys) == 3
    assert d.key("sha256:a", "sha256:b", None) == a.key("sha256:a", "sha256:b", None)
    assert a.shadow_key == b.shadow_key  # one key per cache file
    for x in (a, b, c, d):
        x.close()
