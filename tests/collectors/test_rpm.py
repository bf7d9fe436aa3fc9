"""rpm parser tests on a real sqlite rpmdb made at test time with rpm's own tools
(rpmbuild a few tiny noarch packages, install them with --justdb), with
``rpm -qa`` as the oracle. Skipped when rpm/rpmbuild are not installed
(Debian: ``apt-get install rpm``)."""

from __future__ import annotations

import shutil
import sqlite3
import struct
import subprocess
from pathlib import Path

import pytest

from gpusbom.collectors.rpm import (
    RpmHeaderError,
    RpmPackage,
    parse_rpm_header,
    read_rpmdb_bytes,
    read_rpmdb_file,
    resolve_requires,
    rpm_purl,
)

needs_rpm = pytest.mark.skipif(
    shutil.which("rpm") is None or shutil.which("rpmbuild") is None,
    reason="rpm and rpmbuild are not installed (Debian/Ubuntu: apt-get install rpm)",
)

SPECS = {
    "base-lib-0.9": """Name: base-lib
Version: 0.9
Release: 1
Summary: Base library
License: GPL-2.0-or-later
BuildArch: noarch
Provides: /bin/sh
%description
Base.
%files
""",
    "base-lib-1.0": """Name: base-lib
Version: 1.0
Release: 2.el9
Summary: Base library
License: GPL-2.0-or-later
BuildArch: noarch
Provides: /bin/sh
%description
Base.
%files
""",
    "hello-gpu": """Name: hello-gpu
Version: 1.2.3
Release: 4.el9
Epoch: 2
Summary: Tiny test package
License: MIT and BSD
Vendor: Example Corp
URL: https://example.com/hello
BuildArch: noarch
Provides: libhello.so.1()(64bit)
Requires: /bin/sh
Requires: base-lib >= 0.9
%description
Test.
%install
mkdir -p %{buildroot}/usr/share/hello
echo hi > %{buildroot}/usr/share/hello/hi.txt
%files
/usr/share/hello/hi.txt
""",
    "cuda-stub": """Name: cuda-stub
Version: 12.4.127
Release: 1
Summary: Depends on a capability of hello-gpu
License: NVIDIA Proprietary
BuildArch: noarch
Requires: libhello.so.1()(64bit)
%description
Stub.
%files
""",
}

QF = "%{NAME}|%{EPOCHNUM}|%{VERSION}|%{RELEASE}|%{ARCH}|%{LICENSE}|%{SOURCERPM}|%{VENDOR}\\n"


def _run(*args: str) -> str:
    r = subprocess.run(list(args), check=False, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{args}: {r.stderr}")
    return r.stdout


def build_rpmdbs(root: Path) -> dict[str, Path]:
    """Build the packages and three databases, one per "layer":
    db1: base-lib 0.9; db2: + hello-gpu, cuda-stub; db3: base-lib upgraded to 1.0."""
    top = root / "top"
    rpms: dict[str, Path] = {}
    for key, spec in SPECS.items():
        sp = root / f"{key}.spec"
        sp.write_text(spec)
        _run("rpmbuild", "--define", f"_topdir {top}", "--define", "_db_backend sqlite",
             "-bb", str(sp))
    for f in (top / "RPMS").rglob("*.rpm"):
        rpms[f.name] = f
    dbdir = root / "db"
    dbdir.mkdir()
    common = ["--dbpath", str(dbdir), "--define", "_db_backend sqlite"]
    _run("rpm", *common, "--initdb")
    out: dict[str, Path] = {}

    def install(opt: str, *names: str) -> None:
        _run("rpm", opt, "--justdb", "--nodeps", "--noscripts", *common,
             *[str(rpms[n]) for n in names])

    def snap(label: str) -> None:
        db = dbdir / "rpmdb.sqlite"
        wal = dbdir / "rpmdb.sqlite-wal"
        assert not wal.exists() or wal.stat().st_size == 0, "rpmdb left a non-empty WAL"
        with open(db, "rb") as f:
            assert f.read(16) == b"SQLite format 3\x00", "rpm did not write a sqlite rpmdb"
        dst = root / f"{label}.sqlite"
        shutil.copyfile(db, dst)
        out[label] = dst
        out[label + ".qa"] = root / f"{label}.qa"
        (root / f"{label}.qa").write_text(_run("rpm", *common, "-qa", "--qf", QF))

    install("-i", "base-lib-0.9-1.noarch.rpm")
    snap("db1")
    install("-i", "hello-gpu-1.2.3-4.el9.noarch.rpm", "cuda-stub-12.4.127-1.noarch.rpm")
    snap("db2")
    install("-U", "base-lib-1.0-2.el9.noarch.rpm")
    snap("db3")
    return out


@pytest.fixture(scope="module")
def rpmdbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_rpmdbs(tmp_path_factory.mktemp("rpm"))


def _oracle(qa: Path) -> set[tuple[str, ...]]:
    rows = set()
    for line in qa.read_text().splitlines():
        name, epoch, ver, rel, arch, lic, srpm, vendor = line.split("|")
        rows.add((name, epoch, ver, rel, arch, lic, srpm, "" if vendor == "(none)" else vendor))
    return rows


def _mine(pkgs: list[RpmPackage]) -> set[tuple[str, ...]]:
    return {
        (p.name, str(p.epoch or 0), p.version, p.release, p.arch or "", p.license or "",
         p.source_rpm or "", p.vendor or "")
        for p in pkgs
    }


@needs_rpm
@pytest.mark.parametrize("label", ["db1", "db2", "db3"])
def test_matches_rpm_qa(rpmdbs: dict[str, Path], label: str) -> None:
    pkgs, problems = read_rpmdb_file(str(rpmdbs[label]))
    assert problems == []
    oracle = _oracle(rpmdbs[label + ".qa"])
    assert oracle
    assert _mine(pkgs) == oracle


@needs_rpm
def test_fields_and_bytes_reader(rpmdbs: dict[str, Path]) -> None:
    pkgs, problems = read_rpmdb_bytes(rpmdbs["db3"].read_bytes())
    assert problems == []
    by = {p.name: p for p in pkgs}
    hello = by["hello-gpu"]
    assert hello.evr == "2:1.2.3-4.el9"
    assert hello.summary == "Tiny test package"
    assert hello.url == "https://example.com/hello"
    assert "libhello.so.1()(64bit)" in hello.provides
    assert "base-lib" in hello.requires and "/bin/sh" in hello.requires
    assert by["base-lib"].evr == "1.0-2.el9"
    deps = resolve_requires(pkgs)
    assert deps["hello-gpu"] == ["base-lib"]  # /bin/sh and base-lib both resolve to base-lib
    assert deps["cuda-stub"] == ["hello-gpu"]  # through a soname capability
    assert deps["base-lib"] == []
    assert rpm_purl(hello, {"ID": "rhel", "VERSION_ID": "9.4"}) == (
        "pkg:rpm/rhel/hello-gpu@1.2.3-4.el9?arch=noarch&distro=rhel-9.4&epoch=2"
        "&upstream=hello-gpu-1.2.3-4.el9.src.rpm"
    )


@needs_rpm
def test_bad_header_in_db_is_a_problem_not_a_crash(rpmdbs: dict[str, Path], tmp_path: Path) -> None:
    db = tmp_path / "rpmdb.sqlite"
    shutil.copyfile(rpmdbs["db2"], db)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE Packages SET blob = ? WHERE hnum = (SELECT MIN(hnum) FROM Packages)",
                 (b"\x00\x00\x00\x05garbage",))
    conn.commit()
    conn.close()
    pkgs, problems = read_rpmdb_file(str(db))
    assert len(problems) == 1 and "header" in problems[0]
    assert len(pkgs) == 2


def test_not_a_database() -> None:
    with pytest.raises(sqlite3.DatabaseError):
        read_rpmdb_bytes(b"this is not sqlite" * 100)


def _header(entries: list[tuple[int, int, int, int]], store: bytes) -> bytes:
    out = struct.pack(">ii", len(entries), len(store))
    for e in entries:
        out += struct.pack(">iiii", *e)
    return out + store


def test_header_parser_synthetic() -> None:
    store = b"foo\x00" + b"1.0\x00" + b"3\x00" + b"\x00" * 2 + struct.pack(">i", 7) + b"a\x00b\x00"
    blob = _header(
        [(1000, 6, 0, 1), (1001, 6, 4, 1), (1002, 6, 8, 1), (1003, 4, 12, 1), (1047, 8, 16, 2)],
        store,
    )
    h = parse_rpm_header(blob)
    assert h == {1000: "foo", 1001: "1.0", 1002: "3", 1003: [7], 1047: ["a", "b"]}


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"\x00\x00\x00\x01",
        struct.pack(">ii", 0, 0),  # no entries
        struct.pack(">ii", 0x7FFFFFFF, 0),  # absurd index count
        struct.pack(">ii", 1, -1) + b"\x00" * 16,  # negative data size
        struct.pack(">ii", 1, 0x7FFFFFFF) + b"\x00" * 16,  # absurd data size
        _header([(1000, 6, 0, 1)], b"x")[:-1],  # truncated
        _header([(1000, 6, 5, 1)], b"abc\x00"),  # offset beyond the store
        _header([(1000, 6, 0, 1)], b"abc"),  # unterminated string
        _header([(1047, 8, 0, 1000000)], b"a\x00"),  # count larger than the store
        _header([(1003, 4, 0, 4)], b"\x00" * 8),  # int32 array past the end
        _header([(1003, 4, 1, 1)], b"\x00" * 8),  # misaligned int32
    ],
)
def test_header_parser_rejects_hostile_input(blob: bytes) -> None:
    with pytest.raises(RpmHeaderError):
        parse_rpm_header(blob)
