"""Nothing gpusbom reads back from its own directories can run code (issue #33).

Each file format that gpusbom writes in its cache and reads back (layer results, the parsed
tables and the path matcher's layout, the advisory index, the updated advisory database, the
plug-in list, the host snapshot) is replaced with a pickle that would create a marker file
when unpickled (the layer-cache exploit of the issue: protocol 4 resolves the dotted name
``gpusbom.fsview.layercache`` / ``os.system``), and with garbage; then a real scan runs:
nothing runs, the scan succeeds with the same output, and the poisoned entry is gone.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.build import ensure
from gpusbom.fsview import layercodec

EPOCH = "1700000000"
_MAIN = "import sys; from gpusbom.cli.app import main; sys.exit(main(sys.argv[1:]))"


def _evil_pickle(marker: Path) -> bytes:
    """``gpusbom.fsview.layercache`` / ``os.system`` (the name the old unpickler let through:
    its module starts with ``gpusbom.``), called with ``touch MARKER``."""
    def s(text: str) -> bytes:
        b = text.encode()
        return b"\x8c" + bytes([len(b)]) + b

    cmd = f"touch {marker}"
    assert len(cmd) < 256
    return (b"\x80\x04" + s("gpusbom.fsview.layercache") + s("os.system") + b"\x93"
            + s(cmd) + b"\x85R.")


def _env(cache: Path) -> dict[str, str]:
    env = dict(os.environ, GPUSBOM_CACHE_DIR=str(cache), SOURCE_DATE_EPOCH=EPOCH)
    env.pop("GPUSBOM_NO_CACHE", None)  # tests/conftest.py turns the layer cache off
    return env


def _gpusbom(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _MAIN, *args], env=env, cwd=cwd, text=True,
                          capture_output=True, timeout=600, check=False)


def _scan(image: str, cache: Path, out: Path, *extra: str) -> str:
    r = _gpusbom(["scan", "-q", image, "-o", f"json={out}", *extra], _env(cache), out.parent)
    assert r.returncode == 0, r.stderr
    return out.read_text()


@pytest.fixture(scope="module")
def image() -> str:
    return str(ensure("multilayer").docker_archive)


def test_the_exploit_pickle_runs_when_unpickled(tmp_path: Path) -> None:
    # the poison is real: unpickled as the former cache did, it creates the marker
    import pickle

    marker = tmp_path / "pwned"
    pickle.loads(_evil_pickle(marker))  # noqa: S301 - the point of the test
    assert marker.exists()


@pytest.mark.parametrize("poison", ["pickle", "garbage", "magic-bad-header"])
def test_poisoned_layer_cache_runs_nothing_and_is_dropped(
        image: str, poison: str, tmp_path: Path) -> None:
    cache, marker = tmp_path / "cache", tmp_path / "pwned"
    good = _scan(image, cache, tmp_path / "a.json", "--offline")
    db = cache / "layers.sqlite"
    with sqlite3.connect(db) as c:
        keys = [k for (k,) in c.execute("SELECT key FROM layer_data")]
        bad = {"pickle": _evil_pickle(marker), "garbage": os.urandom(4096),
               "magic-bad-header": layercodec.MAGIC + b"\x0c\x00\x00\x00" + b'{"ref": "x"}'}[poison]
        c.execute("UPDATE layer_data SET data = ?", (bad,))
    assert len(keys) >= 2
    again = _scan(image, cache, tmp_path / "b.json", "--offline")
    assert not marker.exists()
    assert again == good
    with sqlite3.connect(db) as c:
        rows = dict(c.execute("SELECT key, data FROM layer_data"))
    # each poisoned entry was dropped, and the layer read and stored again in the safe format
    assert set(rows) == set(keys)
    assert all(bytes(v).startswith(layercodec.MAGIC) and bytes(v) != bad for v in rows.values())


def test_oversized_layer_entry_is_refused_unread(image: str, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    good = _scan(image, cache, tmp_path / "a.json", "--offline")
    with sqlite3.connect(cache / "layers.sqlite") as c:
        # zeroblob: SQLite's length() sees the size without the bytes being read
        c.execute("UPDATE layer_data SET data = zeroblob(?)", (layercodec.MAX_ENTRY_BYTES + 1,))
    assert _scan(image, cache, tmp_path / "b.json", "--offline") == good
    with sqlite3.connect(cache / "layers.sqlite") as c:
        sizes = [n for (n,) in c.execute("SELECT length(data) FROM layer_data")]
    assert sizes and max(sizes) < layercodec.MAX_ENTRY_BYTES


def _table_files(cache: Path) -> list[Path]:
    return sorted((cache / "tables").glob("*.json"))


@pytest.mark.parametrize("poison", ["pickle", "garbage", "wrong-shape"])
def test_poisoned_tables_and_advisory_index_run_nothing(
        image: str, poison: str, tmp_path: Path) -> None:
    """The catalog's parsed YAML, the path matcher's layout and the advisory index
    (``tables/*.json``, advisories matched: the index is written)."""
    cache, marker = tmp_path / "cache", tmp_path / "pwned"
    good = _scan(image, cache, tmp_path / "a.json", "--offline")
    files = _table_files(cache)
    names = {p.name for p in files}
    assert any(n.startswith("advisories-") for n in names) and len(files) >= 3
    bad = {"pickle": _evil_pickle(marker), "garbage": os.urandom(2048),
           "wrong-shape": json.dumps({"format": 1, "data": {"exact": {"x": [10 ** 9]}}}).encode()
           }[poison]
    for p in files:
        p.write_bytes(bad)
    assert _scan(image, cache, tmp_path / "b.json", "--offline") == good
    assert not marker.exists()
    # every poisoned file was removed and written again from the real data
    after = _table_files(cache)
    assert {p.name for p in after} == names
    assert all(p.read_bytes() != bad for p in after)


def test_poisoned_user_advisory_db_runs_nothing(image: str, tmp_path: Path) -> None:
    cache, marker = tmp_path / "cache", tmp_path / "pwned"
    good = _scan(image, cache, tmp_path / "a.json", "--offline")
    user_db = cache / "advisories" / "advisories.json"
    user_db.parent.mkdir(mode=0o700)
    user_db.write_bytes(_evil_pickle(marker))
    # not --offline: the user's database is read (and is not valid: the bundled one is used)
    env = _env(cache)
    env["GPUSBOM_DB_AUTO_UPDATE"] = "0"
    r = _gpusbom(["scan", "-q", image, "-o", f"json={tmp_path / 'b.json'}"], env, tmp_path)
    assert r.returncode == 0, r.stderr
    assert not marker.exists()
    assert (tmp_path / "b.json").read_text() == good


def test_plugin_list_cannot_name_code(image: str, tmp_path: Path) -> None:
    """A plug-in list naming a module (that would create the marker on import) with the
    right key: only 'no plug-ins' is ever taken from that file, so the module is not
    imported; the installation's own (empty) list is written back."""
    cache, marker = tmp_path / "cache", tmp_path / "pwned"
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "gpusbom_evil_plugin.py").write_text(
        f"open({str(marker)!r}, 'w').close()\ndef register():\n    pass\n")
    work = tmp_path / "work"  # the working directory is on sys.path: its mtime is in the key
    work.mkdir()
    env = _env(cache)
    env["PYTHONPATH"] = os.pathsep.join([str(mods), env.get("PYTHONPATH", "")])
    good = _gpusbom(["scan", "-q", image, "-o", f"json={tmp_path / 'a.json'}", "--offline"],
                    env, work)
    assert good.returncode == 0, good.stderr
    key = subprocess.run([sys.executable, "-c", "from gpusbom.collectors._plugins import _key; "
                          "print(_key())"], env=env, cwd=work, text=True,
                         capture_output=True, check=True).stdout.strip()
    plugins = cache / "plugins.json"
    assert json.loads(plugins.read_text())["key"] == key
    plugins.write_text(json.dumps({"key": key, "entry_points": [
        ["evil", "gpusbom_evil_plugin:register"]]}))
    r = _gpusbom(["scan", "-q", image, "-o", f"json={tmp_path / 'b.json'}", "--offline"],
                 env, work)
    assert r.returncode == 0, r.stderr
    assert not marker.exists()
    assert (tmp_path / "b.json").read_text() == (tmp_path / "a.json").read_text()
    assert json.loads(plugins.read_text()) == {"key": key, "entry_points": []}


@pytest.mark.parametrize("poison", ["pickle", "garbage", "huge"])
def test_poisoned_host_snapshot_runs_nothing(poison: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from gpusbom.compat.run import _load_host
    from gpusbom.host import cache as host_cache
    from gpusbom.host import scan_host

    monkeypatch.delenv("GPUSBOM_NO_CACHE", raising=False)  # (tests/conftest.py sets it)
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "os-release").write_text('ID=debian\nVERSION_ID="12"\n')
    marker = tmp_path / "pwned"
    calls: list[int] = []

    def scan() -> object:
        calls.append(1)
        return scan_host(str(root))

    d = tmp_path / "cache"
    first, cached = host_cache.cached_host_scan(scan, _load_host, directory=d)
    again, cached2 = host_cache.cached_host_scan(scan, _load_host, directory=d)
    assert (cached, cached2, len(calls)) == (False, True, 1)
    snap = d / host_cache.FILE
    if poison == "huge":
        with open(snap, "wb") as f:
            f.truncate(host_cache.MAX_BYTES + 1)
    else:
        snap.write_bytes(_evil_pickle(marker) if poison == "pickle" else os.urandom(4096))
    third, cached3 = host_cache.cached_host_scan(scan, _load_host, directory=d)
    assert not marker.exists()
    assert (cached3, len(calls)) == (False, 2)  # dropped and scanned again
    assert json.dumps(third.to_dict(), sort_keys=True) == json.dumps(first.to_dict(),
                                                                      sort_keys=True)
    assert json.loads(snap.read_text())  # the fresh scan, stored as JSON again
