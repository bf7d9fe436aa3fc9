"""``gpusbom fingerprints update | export | import`` (#38), as the advisory database's.

- update against a real local package index (plain HTTP on loopback, PEP 691 JSON) serving a
  real NVIDIA wheel the bundled database lacks (nvidia-cuda-runtime-cu12 12.1.105, pinned by
  sha256) and a cuda-toolkit metapackage written for the test: the wheel is fingerprinted
  (its libcudart's SHA-256 and build-id, the wheel's own version), the release lists are
  refreshed, the new database is swapped into the user cache and the next scan identifies a
  renamed copy of that file exactly; an index that fails leaves the database as it was;
- export then import on another cache (the air-gapped path): same bytes, used by scans;
- import of hostile files: a pickle, not JSON, too large, an unknown key, a bad row, a bad
  build time, a checksum that does not match, no checksum: exit 3 with one line, the
  current database byte for byte as it was;
- an imported database older than the bundled snapshot is installed but not used (status
  says so).
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import pickle
import shutil
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fixtures.fetch import Pin  # noqa: E402

from gpusbom.cli.app import main  # noqa: E402
from gpusbom.fingerprints import active  # noqa: E402
from gpusbom.fingerprints.database import MAX_DB_BYTES, dumps, load_path  # noqa: E402

CUDART_121 = Pin("wheel", "nvidia-cuda-runtime-cu12", "12.1.105",
                 "nvidia_cuda_runtime_cu12-12.1.105-py3-none-manylinux1_x86_64.whl",
                 "6e258468ddf5796e25f1dc591a31029fa317d97a0a94ed93468fc86301d61e40", 823596)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh user cache for this test (and a clean slate of loaded databases)."""
    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("GPUSBOM_CACHE_DIR", str(d))
    active.clear()
    yield d
    active.clear()


def _toolkit_wheel() -> bytes:
    meta = ("Metadata-Version: 2.4\nName: cuda-toolkit\nVersion: 12.0.0\n"
            "Requires-Dist: nvidia-cuda-runtime-cu12==12.0.107.*; extra == 'cudart'\n"
            "Requires-Dist: nvidia-cublas-cu12==12.0.1.189.*; extra == 'cublas'\n")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("cuda_toolkit-12.0.0.dist-info/METADATA", meta)
    return buf.getvalue()


class _Index:
    """A PEP 691 JSON index on loopback: /simple/<name>/ and /files/<file>."""

    def __init__(self, files: dict[str, tuple[str, str, bytes]]) -> None:
        # name -> [(filename, version, bytes)]
        self.files = files
        self.fail = False
        idx = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's API
                parts = self.path.strip("/").split("/")
                if idx.fail:
                    self.send_error(500)
                    return
                if parts[0] == "simple" and len(parts) == 2:
                    entries = [(f, v, b) for n, (f, v, b) in idx.files.items() if n == parts[1]]
                    if not entries:
                        self.send_error(404)
                        return
                    doc = {"meta": {"api-version": "1.1"}, "name": parts[1],
                           "versions": sorted({v for _, v, _ in entries}),
                           "files": [{"filename": f, "url": f"{idx.base}/files/{f}",
                                      "hashes": {"sha256": hashlib.sha256(b).hexdigest()},
                                      "size": len(b), "upload-time": "2026-11-01T00:00:00Z"}
                                     for f, _, b in entries]}
                    body = json.dumps(doc).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
                elif parts[0] == "files" and len(parts) == 2:
                    body = next((b for f, _, b in idx.files.values() if f == parts[1]), b"")
                    self.send_response(200 if body else 404)
                else:
                    self.send_error(404)
                    return
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"{self.base}/simple"


@pytest.fixture
def index() -> Iterator[_Index]:
    from fingerprints.test_old_cuda import pinned

    wheel = pinned(CUDART_121).read_bytes()
    idx = _Index({
        "nvidia-cuda-runtime-cu12": (CUDART_121.filename, "12.1.105", wheel),
        "cuda-toolkit": ("cuda_toolkit-12.0.0-py2.py3-none-any.whl", "12.0.0", _toolkit_wheel()),
    })
    yield idx
    idx.server.shutdown()


def _cli(*args: str) -> int:
    return main(list(args))


def test_update_fingerprints_a_new_wheel_and_the_next_scan_uses_it(
        cache: Path, index: _Index, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundled = active.load_bundled()
    assert not any(r.version == "12.1.105" for r in bundled.records)  # older than 3 years
    rc = _cli("fingerprints", "update", "--index", index.url, "--since", "2020-01-01",
              "--dist", "nvidia-cuda-runtime-cu12", "-q")
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "fingerprinted: 1 new wheel(s): nvidia-cuda-runtime-cu12 12.1.105" in out.out
    user = cache / "fingerprints" / "fingerprints.json"
    db = load_path(user)
    new = [r for r in db.records if r.source == "pypi:nvidia-cuda-runtime-cu12==12.1.105"]
    assert [(r.product, r.version, r.file) for r in new] == [
        ("cudart", "12.1.105", "libcudart.so.12")]
    from fingerprints.test_old_cuda import pinned

    with zipfile.ZipFile(pinned(CUDART_121)) as z:
        lib = z.read("nvidia/cuda_runtime/lib/libcudart.so.12")
    assert new[0].sha256 == hashlib.sha256(lib).hexdigest()
    assert len(db) == len(bundled) + 1
    # the release lists came from this index: its toolkit pins; the others were kept
    srcs = {r.source for r in db.releases}
    assert "pypi:cuda-toolkit==12.0.0" in srcs and "pypi-index:nvidia-cuda-runtime-cu12" in srcs
    assert any(s.startswith("nvidia-dockerfile:") for s in srcs)
    assert db.complete_from["cudart"] == "12.0.107"

    # the next scan identifies a renamed copy of that file, exactly
    active.clear()
    assert active.load_active().source == str(user)
    root = tmp_path / "root" / "opt" / "lib"
    root.mkdir(parents=True)
    (root / "libvendored.so").write_bytes(lib)
    out_json = tmp_path / "scan.json"
    assert _cli("scan", f"dir:{tmp_path / 'root'}", "-q", "-o", f"json={out_json}") == 0
    [c] = [c for c in json.loads(out_json.read_text())["components"] if c["name"] == "cudart"]
    assert c["version"] == "12.1.105"
    assert c["properties"]["identification-confidence"] == "exact"

    # status says which database
    capsys.readouterr()
    assert _cli("fingerprints", "status") == 0
    assert capsys.readouterr().out.splitlines()[0] == f"source: {user}"

    # an index that fails: exit 3, one line, the database as it was
    before = user.read_bytes()
    index.fail = True
    assert _cli("fingerprints", "update", "--index", index.url, "-q") == 3
    err = capsys.readouterr().err.strip()
    assert "kept the current database" in err and len(err.splitlines()) == 1
    assert user.read_bytes() == before

    # --reset: back to the bundled snapshot
    assert _cli("fingerprints", "update", "--reset") == 0
    assert not user.exists()
    assert active.load_active().source == "bundled"


def _newer_db(tmp_path: Path) -> Path:
    """The bundled database re-stamped as built a day later: what an update would write."""
    db = active.load_bundled()
    doc = db.to_document()
    doc["built"] = _later(db.built or "2026-01-01T00:00:00Z")
    p = tmp_path / "fingerprints-export.json"
    p.write_text(dumps(doc))
    return p


def _later(stamp: str) -> str:
    from datetime import datetime, timedelta

    t = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ") + timedelta(days=1)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_export_then_import_on_an_air_gapped_machine(
        cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fp.json"
    assert _cli("fingerprints", "export", str(out)) == 0
    data = out.read_bytes()
    from gpusbom._resources import read_bytes

    assert data == read_bytes("gpusbom", "data/fingerprints.json")  # the bundled file's bytes
    assert (tmp_path / "fp.json.sha256").read_text().split()[0] == hashlib.sha256(data).hexdigest()

    newer = _newer_db(tmp_path)
    digest = hashlib.sha256(newer.read_bytes()).hexdigest()
    capsys.readouterr()
    assert _cli("fingerprints", "import", str(newer), "--sha256", digest) == 0
    said = capsys.readouterr().out
    assert "imported from" in said and "bundled snapshot" not in said
    user = cache / "fingerprints" / "fingerprints.json"
    assert user.read_bytes() == newer.read_bytes()
    active.clear()
    assert active.load_active().source == str(user)

    # the same database stamped older than the bundled one: installed, not used
    older = tmp_path / "older.json"
    doc = json.loads(newer.read_text())
    doc["built"] = "2020-01-01T00:00:00Z"
    older.write_text(dumps(doc))
    (tmp_path / "older.json.sha256").write_text(
        hashlib.sha256(older.read_bytes()).hexdigest() + "  older.json\n")
    capsys.readouterr()
    assert _cli("fingerprints", "import", str(older)) == 0
    assert "scans keep the bundled snapshot, which is newer" in capsys.readouterr().out
    active.clear()
    assert active.load_active().source == "bundled"
    capsys.readouterr()
    assert _cli("fingerprints", "status") == 0
    assert "is not used" in capsys.readouterr().out


def _hostile() -> list[tuple[str, bytes, str]]:
    doc = active.load_bundled().to_document()
    bad_row = json.loads(json.dumps(doc))
    bad_row["rows"][0][5] = "not-a-sha256"
    unknown = json.loads(json.dumps(doc))
    unknown["exec"] = "rm -rf /"
    bad_built = json.loads(json.dumps(doc))
    bad_built["built"] = "yesterday"
    return [
        ("pickle", pickle.dumps({"format": "gpusbom-fingerprints"}), "not valid JSON"),
        ("text", b"rows: [1, 2]\n", "not valid JSON"),
        ("big", b"[" + b" " * (MAX_DB_BYTES + 8) + b"]", "more than"),
        ("unknown-key", json.dumps(unknown).encode(), "unknown key"),
        ("bad-row", json.dumps(bad_row).encode(), "bad sha256"),
        ("bad-built", json.dumps(bad_built).encode(), "is not a UTC time"),
    ]


def test_hostile_imports_change_nothing(cache: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    user = cache / "fingerprints" / "fingerprints.json"
    newer = _newer_db(tmp_path)
    assert _cli("fingerprints", "import", str(newer), "--sha256",
                hashlib.sha256(newer.read_bytes()).hexdigest()) == 0
    before = user.read_bytes()
    for name, data, says in _hostile():
        f = tmp_path / f"{name}.json"
        f.write_bytes(data)
        capsys.readouterr()
        rc = _cli("fingerprints", "import", str(f), "--sha256", hashlib.sha256(data).hexdigest())
        err = capsys.readouterr().err.strip()
        assert rc == 3, name
        assert says in err and len(err.splitlines()) == 1, (name, err)
        assert user.read_bytes() == before, name
    # a checksum that does not match, and none at all
    f = tmp_path / "fp.json"
    shutil.copyfile(newer, f)
    capsys.readouterr()
    assert _cli("fingerprints", "import", str(f), "--sha256", "0" * 64) == 3
    assert "checksum mismatch" in capsys.readouterr().err
    assert _cli("fingerprints", "import", str(f)) == 3
    assert "no checksum" in capsys.readouterr().err
    assert user.read_bytes() == before
    # no staged file is left beside the user copy
    assert sorted(p.name for p in user.parent.iterdir()) == ["fingerprints.json"]
