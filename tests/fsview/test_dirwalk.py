"""fsview.dirwalk: a layer directory read as members (containers-storage overlay/vfs):
links are recorded, never followed onto the host; overlay whiteouts and opaque directories
become OCI whiteout members; hard links point at the first name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpusbom.errors import InputError
from gpusbom.fsview import PathMatcher, PathSpec, Spool
from gpusbom.fsview.dirwalk import walk_layer_dir
from gpusbom.fsview.layer import index_members
from gpusbom.fsview.types import EntryKind, Limits


def test_layer_dir_members(tmp_path: Path) -> None:
    d = tmp_path / "diff"
    (d / "etc").mkdir(parents=True)
    (d / "etc" / "passwd").symlink_to("/etc/shadow")  # must stay a link
    (d / "etc" / "os-release").write_text("ID=debian\n")
    os.link(d / "etc" / "os-release", d / "etc" / "os-release.bak")
    (d / "opt").mkdir()
    os.setxattr(d / "opt", "trusted.overlay.opaque", b"y")
    os.mknod(d / "gone", 0o600 | 0o020000, os.makedev(0, 0))  # overlay whiteout
    members = {m.name: m for m in walk_layer_dir(str(d), "layer")}
    assert members["etc/passwd"].kind is EntryKind.SYMLINK
    assert members["etc/passwd"].linkname == "/etc/shadow"
    assert members["etc/os-release.bak"].kind is EntryKind.HARDLINK
    assert members["etc/os-release.bak"].linkname == "etc/os-release"
    assert ".wh.gone" in members and "opt/.wh..wh..opq" in members
    with Spool() as spool:
        m = PathMatcher([PathSpec("/etc/passwd"), PathSpec("/etc/os-release")])
        entries, whiteouts, opaque, _, count = index_members(
            walk_layer_dir(str(d), "layer"), index=0, name="layer", matcher=m, spool=spool,
            limits=Limits())
    assert whiteouts == {"/gone"} and opaque == {"/opt"}
    assert entries["/etc/passwd"].kind is EntryKind.SYMLINK
    assert entries["/etc/passwd"].content is None  # nothing read through the link
    assert entries["/etc/os-release"].content is not None
    assert entries["/etc/os-release"].content.read() == b"ID=debian\n"
    assert count == len(members)  # every member, the root included


def test_layer_dir_missing_and_limits(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot open layer directory"):
        list(walk_layer_dir(str(tmp_path / "none"), "layer"))
    (tmp_path / "d").mkdir()
    for i in range(5):
        (tmp_path / "d" / f"f{i}").write_text("x")
    with pytest.raises(InputError, match="more than 3 entries"):
        list(walk_layer_dir(str(tmp_path / "d"), "layer", Limits(max_entries_per_layer=3)))
