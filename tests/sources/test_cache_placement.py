"""Cache placement (issue #33): the cache directory is created 0700; a cache directory or
file owned by another user, or writable by group or others, is refused with one line and
exit 3, unless ``--cache-dir`` names it. Run as root with a second user (``nobody``: root
chowns the directory to it); as another user, a root-owned directory is the foreign one."""

from __future__ import annotations

import os
import pwd
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.build import ensure

_MAIN = "import sys; from gpusbom.cli.app import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture(scope="module")
def image() -> str:
    return str(ensure("multilayer").docker_archive)


def _run(args: list[str], cache: Path | None, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")
    env.pop("GPUSBOM_NO_CACHE", None)
    env.pop("GPUSBOM_CACHE_DIR", None)
    env["XDG_CACHE_HOME"] = str(cwd / "xdg")
    if cache is not None:
        env["GPUSBOM_CACHE_DIR"] = str(cache)
    return subprocess.run([sys.executable, "-c", _MAIN, *args], env=env, cwd=cwd, text=True,
                          capture_output=True, timeout=600, check=False)


def _foreign(d: Path) -> None:
    """Make ``d`` another user's: root gives it to nobody; anyone else gets a root-owned one."""
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(d, nobody.pw_uid, nobody.pw_gid)
    else:
        d.rmdir()
        d.symlink_to("/usr/share")  # root's, and not this user's


def _one_line_refusal(r: subprocess.CompletedProcess[str], what: str) -> None:
    assert r.returncode == 3, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and what in lines[0] and "refusing" in lines[0], r.stderr


def test_default_cache_dir_is_created_0700(image: str, tmp_path: Path) -> None:
    os.umask(0o022)
    r = _run(["scan", "-q", image, "--offline", "-o", f"json={tmp_path / 'a.json'}"], None,
             tmp_path)
    assert r.returncode == 0, r.stderr
    base = tmp_path / "xdg" / "gpusbom"
    assert base.stat().st_mode & 0o777 == 0o700
    assert (base / "layers.sqlite").stat().st_mode & 0o777 == 0o600
    assert (base / "tables").stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("how", ["foreign-owner", "group-writable", "other-writable"])
def test_misplaced_cache_dir_is_refused_unless_named(image: str, how: str, tmp_path: Path) -> None:
    cache = tmp_path / "shared"
    cache.mkdir(mode=0o700)
    if how == "foreign-owner":
        _foreign(cache)
    else:
        cache.chmod(0o770 if how == "group-writable" else 0o707)
    out = tmp_path / "a.json"
    r = _run(["scan", "-q", image, "--offline", "-o", f"json={out}"], cache, tmp_path)
    _one_line_refusal(r, f"cache directory {cache}")
    assert not out.exists()  # no partial output
    if how == "foreign-owner" and os.geteuid() != 0:
        return  # /usr/share: not writable, nothing more to show
    # named with --cache-dir: the user's explicit choice (a shared CI cache)
    r = _run(["scan", "-q", image, "--offline", "-o", f"json={out}", "--cache-dir", str(cache)],
             None, tmp_path)
    assert r.returncode == 0, r.stderr
    assert out.exists() and (cache / "layers.sqlite").exists()


@pytest.mark.parametrize("how", ["foreign-owner", "group-writable"])
def test_misplaced_cache_file_is_refused(image: str, how: str, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    r = _run(["scan", "-q", image, "--offline", "-o", f"json={tmp_path / 'a.json'}"], cache,
             tmp_path)
    assert r.returncode == 0, r.stderr
    db = cache / "layers.sqlite"
    with sqlite3.connect(db) as c:
        assert c.execute("SELECT COUNT(*) FROM layer_data").fetchone()[0] >= 1
    if how == "foreign-owner":
        if os.geteuid() != 0:
            pytest.fail("chown to another user needs root (CI runs the tests as root)")
        nobody = pwd.getpwnam("nobody")
        os.chown(db, nobody.pw_uid, nobody.pw_gid)
    else:
        db.chmod(0o660)
    r = _run(["scan", "-q", image, "--offline", "-o", f"json={tmp_path / 'b.json'}"], cache,
             tmp_path)
    _one_line_refusal(r, f"cache file {db}")
    # a table file too (read through read_bounded)
    db.unlink()
    table = sorted((cache / "tables").glob("*.json"))[0]
    table.chmod(0o666)
    r = _run(["scan", "-q", image, "--offline", "-o", f"json={tmp_path / 'b.json'}"], cache,
             tmp_path)
    _one_line_refusal(r, f"cache file {table}")


def test_second_user_refuses_roots_cache(image: str) -> None:
    """The other direction, as that user: nobody (setpriv) refuses root's cache directory."""
    import shutil
    import tempfile

    if os.geteuid() != 0:
        pytest.fail("needs root to drop to a second user (CI runs the tests as root)")
    nobody = pwd.getpwnam("nobody")
    top = Path(tempfile.mkdtemp(prefix="gpusbom-second-user-"))
    try:
        top.chmod(0o755)  # nobody reaches the image and the cache, writes neither
        img = top / "image.tar"
        shutil.copyfile(image, img)
        img.chmod(0o644)
        cache = top / "roots"
        cache.mkdir(mode=0o755)
        out = top / "out"
        out.mkdir()
        out.chmod(0o777)
        cmd = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
               "--clear-groups", sys.executable, "-c", _MAIN, "scan", "-q", str(img),
               "--offline", "-o", f"json={out / 'a.json'}"]
        env = dict(os.environ, GPUSBOM_CACHE_DIR=str(cache), HOME="/nonexistent",
                   XDG_CACHE_HOME=str(cache), TMPDIR=str(out))
        env.pop("GPUSBOM_NO_CACHE", None)
        r = subprocess.run(cmd, env=env, cwd="/", text=True, capture_output=True, timeout=600,
                           check=False)
        _one_line_refusal(r, f"cache directory {cache}")
        assert "owned by uid 0" in r.stderr and f"(uid {nobody.pw_uid})" in r.stderr
        assert not (out / "a.json").exists()
        # the same user with a cache of its own: the scan runs
        env["GPUSBOM_CACHE_DIR"] = str(out / "own")
        r = subprocess.run(cmd, env=env, cwd="/", text=True, capture_output=True, timeout=600,
                           check=False)
        assert r.returncode == 0, r.stderr
        assert (out / "own").stat().st_uid == nobody.pw_uid
    finally:
        shutil.rmtree(top, ignore_errors=True)
