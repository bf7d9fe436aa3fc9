"""Docker Engine images read from the Engine's own storage (``sources.docker_storage``):
the same output as the ``docker save`` stream, and no link in that storage followed."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fixtures.build import ensure
from gpusbom.fsview import PathMatcher, PathSpec, Spool
from gpusbom.sources import ReadContext
from gpusbom.sources.docker_engine import DockerEngineSource
from gpusbom.sources.docker_storage import (
    DirectReadError,
    EngineDirStore,
    TarSplitStream,
    chain_ids,
    plan_direct,
)

MATCHER = PathMatcher([PathSpec("/etc/os-release"), PathSpec("/usr/**")])

pytestmark = pytest.mark.docker


def _scan(ref: str, out: Path, host: str, direct: str) -> bytes:
    env = {
        **os.environ,
        "DOCKER_HOST": host,
        "GPUSBOM_DOCKER_DIRECT": direct,
        "SOURCE_DATE_EPOCH": "1700000000",
        "GPUSBOM_NO_CACHE": "1",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "gpusbom", "scan", ref, "-q", "-o", f"json={out}"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out.read_bytes()


def _direct(tag: str) -> tuple[EngineDirStore, Any]:
    src = DockerEngineSource(f"docker:{tag}", tag)
    found = plan_direct(src._connect(), src.inspect(), f"docker:{tag}")
    assert found is not None, "the test Engine (vfs, root) should be read directly"
    return found


@pytest.mark.parametrize("name", ["multilayer", "demo"])
def test_direct_read_is_byte_identical_to_the_save_stream(
    name: str, tmp_path: Path, docker_env: str, docker_load: Any
) -> None:
    fx = ensure(name)
    docker_load(fx.docker_archive)
    store, plan = _direct(fx.tag)
    assert store.driver == "vfs"
    assert [la.diff_id for la in plan.layers] == [
        la["diff_id"] for la in fx.load_expectations()["layers"]
    ]
    # the direct read succeeds (does not give way to the save stream)
    src = DockerEngineSource(f"docker:{fx.tag}", fx.tag)
    with Spool() as spool:
        got = src._read_direct(src.inspect(), "x", ReadContext(matcher=MATCHER, spool=spool))
    assert got is not None and got.target.source == "docker"
    direct = _scan(f"docker:{fx.tag}", tmp_path / "direct.json", docker_env, "1")
    saved = _scan(f"docker:{fx.tag}", tmp_path / "saved.json", docker_env, "0")
    assert direct == saved


def test_rebuilt_layers_hash_to_their_diff_ids(docker_env: str, docker_load: Any) -> None:
    fx = ensure("multilayer")
    docker_load(fx.docker_archive)
    store, plan = _direct(fx.tag)
    assert [c[7:] for c in chain_ids(plan.config.diff_ids)] == [la.path for la in plan.layers]
    for la in plan.layers:
        split, d = store.layer_dir(la.path, la.diff_id)
        with TarSplitStream(split, d) as s:
            h = hashlib.sha256()
            while chunk := s.read(1 << 20):
                h.update(chunk)
        assert "sha256:" + h.hexdigest() == la.diff_id


def _copy_layer(store: EngineDirStore, la: Any, tmp_path: Path) -> tuple[str, Path]:
    split, d = store.layer_dir(la.path, la.diff_id)
    copy = tmp_path / "layer"
    shutil.copytree(d, copy, symlinks=True)
    return split, copy


def _read_all(split: str, d: Path) -> bytes:
    with TarSplitStream(split, str(d)) as s:
        return s.read()


def test_links_in_the_storage_are_never_followed(
    tmp_path: Path, docker_env: str, docker_load: Any
) -> None:
    fx = ensure("multilayer")
    docker_load(fx.docker_archive)
    store, plan = _direct(fx.tag)
    la = plan.layers[0]
    split, copy = _copy_layer(store, la, tmp_path)
    assert hashlib.sha256(_read_all(split, copy)).hexdigest() == la.diff_id[7:]
    # a file of the layer replaced by a link to a "host" file of the same size
    target = next(p for p in sorted(copy.rglob("*")) if p.is_file() and not p.is_symlink()
                  and p.stat().st_size > 0)  # fmt: skip
    host = tmp_path / "host-secret"
    host.write_bytes(b"S" * target.stat().st_size)
    target.unlink()
    target.symlink_to(host)
    with pytest.raises(DirectReadError, match="cannot open"):
        _read_all(split, copy)
    # a directory on the way replaced by a link to a copy of itself elsewhere
    shutil.rmtree(copy)
    split, copy = _copy_layer(store, la, tmp_path)
    parent = target.parent
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(parent, elsewhere, symlinks=True)
    shutil.rmtree(parent)
    parent.symlink_to(elsewhere)
    with pytest.raises(DirectReadError, match="cannot open"):
        _read_all(split, copy)


def test_changed_content_is_caught_by_the_diff_id(
    tmp_path: Path, docker_env: str, docker_load: Any
) -> None:
    fx = ensure("multilayer")
    docker_load(fx.docker_archive)
    store, plan = _direct(fx.tag)
    la = plan.layers[0]
    split, copy = _copy_layer(store, la, tmp_path)
    target = next(p for p in sorted(copy.rglob("*")) if p.is_file() and p.stat().st_size > 0)
    size = target.stat().st_size
    target.write_bytes(b"X" * size)  # same size, other bytes: only the digest can tell
    assert hashlib.sha256(_read_all(split, copy)).hexdigest() != la.diff_id[7:]
    target.write_bytes(b"X" * (size + 1))
    with pytest.raises(DirectReadError, match="another size"):
        _read_all(split, copy)


def test_damaged_tar_split_is_a_direct_read_error(
    tmp_path: Path, docker_env: str, docker_load: Any
) -> None:
    fx = ensure("multilayer")
    docker_load(fx.docker_archive)
    store, plan = _direct(fx.tag)
    la = plan.layers[0]
    split, d = store.layer_dir(la.path, la.diff_id)
    data = Path(split).read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: len(data) // 2])  # a truncated gzip stream
    with pytest.raises(DirectReadError, match="unreadable tar-split"):
        _read_all(str(cut), Path(d))
    with pytest.raises(DirectReadError, match="cannot open the layer directory"):
        TarSplitStream(split, str(tmp_path / "missing"))
