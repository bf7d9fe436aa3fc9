"""Berkeley DB rpmdb reader (``collectors/rpm_bdb.py``) on databases written by the real
Berkeley DB, with rpm's own read-only BDB backend as the oracle.

The packages are built by ``rpmbuild`` and installed with ``rpm --justdb`` into a sqlite
rpmdb (Debian's rpm cannot write BDB); their installed header blobs are then loaded into a
Berkeley DB hash database by ``db5.3_load`` (Debian ``db5.3-util``), keyed by header
instance as rpm does, at several page sizes and both byte orders. ``rpm --dbpath D
--define '_db_backend bdb_ro' -qa`` lists what rpm itself reads from each database.
One package owns 600 files: its header spans a chain of overflow pages.
"""

from __future__ import annotations

import io
import shutil
import sqlite3
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import test_rpm
from test_pkg_collectors_fsview import RHEL_OS, image, run

from gpusbom.collectors.rpm import read_bdb_content
from gpusbom.collectors.rpm_bdb import BdbError, read_bdb_headers
from gpusbom.fsview.types import ContentRef, Spool

QF = "%{NAME}|%{EPOCHNUM}|%{VERSION}|%{RELEASE}|%{ARCH}\\n"
BIG_SPEC = """Name: big-files
Version: 3.0
Release: 1.el8
Summary: A package whose header is larger than several pages
License: MIT
BuildArch: noarch
%description
Big.
%install
mkdir -p %{buildroot}/usr/share/big-files
for i in $(seq 1 600); do echo $i > %{buildroot}/usr/share/big-files/file-with-a-long-name-$i.txt; done
%files
/usr/share/big-files
"""


def _run(*args: str) -> str:
    r = subprocess.run(list(args), check=False, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{args}: {r.stderr}")
    return r.stdout


def _load(blobs: list[tuple[int, bytes]], out: Path, config: list[str]) -> None:
    """``db5.3_load`` a hash database keyed like rpm's: instance 0 is rpm's counter."""
    lines = ["VERSION=3", "format=bytevalue", "type=hash", *config, "HEADER=END"]
    pairs = [(0, struct.pack("<I", max(h for h, _ in blobs) + 1))] + blobs
    for hnum, blob in pairs:
        lines += [" " + struct.pack("<I", hnum).hex(), " " + blob.hex()]
    lines.append("DATA=END")
    out.parent.mkdir(parents=True, exist_ok=True)
    dump = out.parent.parent / (out.parent.name + ".dump")  # only Packages in the dbpath
    dump.write_text("\n".join(lines) + "\n")
    _run("db5.3_load", "-f", str(dump), str(out))


def _oracle(dbdir: Path) -> set[str]:
    text = _run("rpm", "--dbpath", str(dbdir), "--define", "_db_backend bdb_ro", "-qa", "--qf", QF)
    return {line for line in text.splitlines() if line}


def _ours(path: Path) -> tuple[set[str], list[str]]:
    pkgs, problems = read_bdb_content(ContentRef(data=path.read_bytes()), files=True)
    return {
        f"{p.name}|{p.epoch or 0}|{p.version}|{p.release}|{p.arch}" for p in pkgs
    }, problems


@pytest.fixture
def spool() -> Iterator[Spool]:
    s = Spool()
    yield s
    s.close()


@pytest.fixture(scope="module")
def bdbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    for tool in ("rpm", "rpmbuild", "db5.3_load"):
        assert shutil.which(tool), f"{tool} is missing (scripts/test installs rpm and db5.3-util)"
    root = tmp_path_factory.mktemp("bdb")
    (root / "base").mkdir()
    built = test_rpm.build_rpmdbs(root / "base")  # base-lib 1.0, hello-gpu, cuda-stub
    top = root / "top"
    spec = root / "big-files.spec"
    spec.write_text(BIG_SPEC)
    _run("rpmbuild", "--define", f"_topdir {top}", "--define", "_db_backend sqlite", "-bb",
         str(spec))
    (rpm,) = (top / "RPMS").rglob("big-files-*.rpm")
    dbdir = root / "sqlite"
    dbdir.mkdir()
    shutil.copyfile(built["db3"], dbdir / "rpmdb.sqlite")
    _run("rpm", "-i", "--justdb", "--nodeps", "--noscripts", "--dbpath", str(dbdir),
         "--define", "_db_backend sqlite", str(rpm))
    conn = sqlite3.connect(dbdir / "rpmdb.sqlite")
    blobs = [(int(h), bytes(b)) for h, b in conn.execute("SELECT hnum, blob FROM Packages")]
    conn.close()
    assert len(blobs) == 4 and max(len(b) for _, b in blobs) > 4 * 4096
    out: dict[str, Path] = {}
    for label, config in {
        "p4096": [],
        "p512": ["db_pagesize=512"],
        "p8192be": ["db_pagesize=8192", "db_lorder=4321"],
    }.items():
        db = root / label / "Packages"
        _load(blobs, db, config)
        out[label] = db
    return out


@pytest.mark.parametrize("label", ["p4096", "p512", "p8192be"])
def test_bdb_equals_rpm_bdb_ro(bdbs: dict[str, Path], label: str) -> None:
    oracle = _oracle(bdbs[label].parent)
    ours, problems = _ours(bdbs[label])
    assert problems == []
    assert len(oracle) == 4 and "big-files|0|3.0|1.el8|noarch" in oracle
    assert ours == oracle


def test_bdb_file_lists_and_overflow_chain(bdbs: dict[str, Path]) -> None:
    pkgs, _ = read_bdb_content(ContentRef(data=bdbs["p512"].read_bytes()), files=True)
    big = next(p for p in pkgs if p.name == "big-files")
    assert len([f for f in big.files if f.endswith(".txt")]) == 600
    hello = next(p for p in pkgs if p.name == "hello-gpu")
    assert hello.epoch == 2 and "/usr/share/hello/hi.txt" in hello.files


def _pages(data: bytes, pagesize: int) -> list[tuple[int, int, int]]:
    """(pgno, type, next_pgno) of every page (little-endian file)."""
    out = []
    for pgno in range(len(data) // pagesize):
        pg = data[pgno * pagesize : (pgno + 1) * pagesize]
        out.append((pgno, pg[25], struct.unpack_from("<I", pg, 16)[0]))
    return out


def _corrupt(src: Path, dst: Path, pagesize: int, how: str) -> Path:
    data = bytearray(src.read_bytes())
    mids = [(p, n) for p, t, n in _pages(bytes(data), pagesize) if t == 7 and n != 0]
    assert mids, "no multi-page overflow chain in the fixture"
    pgno, _next = mids[len(mids) // 2]
    base = pgno * pagesize
    if how == "page-type":
        data[base + 25] = 0x55  # the next page of a chain is no overflow page
    elif how == "loop":
        struct.pack_into("<I", data, base + 16, pgno)
    elif how == "past-end":
        struct.pack_into("<I", data, base + 16, 10_000_000)
    elif how == "truncated-chain":
        struct.pack_into("<I", data, base + 16, 0)
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(bytes(data))
    return dst


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("page-type", "not an overflow page"),
        ("loop", "loops at page"),
        ("past-end", "outside the file"),
        ("truncated-chain", "bytes, expected"),
    ],
)
def test_bdb_corrupt_overflow_chain_is_unknown(
    bdbs: dict[str, Path], tmp_path: Path, spool: Spool, how: str, reason: str
) -> None:
    bad = _corrupt(bdbs["p512"], tmp_path / how / "Packages", 512, how)
    ours, problems = _ours(bad)
    good = _ours(bdbs["p512"])[0]
    assert len(problems) == 1 and reason in problems[0], problems
    assert ours < good and len(ours) == len(good) - 1  # the other headers are still read
    fs = image([{"/etc/os-release": RHEL_OS, "/var/lib/rpm/Packages": bad.read_bytes()}], spool)
    comps, ctx = run("rpm", fs)
    assert len(comps) == len(good) - 1
    assert [u.path for u in ctx.unknowns] == ["/var/lib/rpm/Packages"]
    assert ctx.unknowns[0].reason.startswith("Berkeley DB rpmdb: overflow chain from page")
    assert reason in ctx.unknowns[0].reason


@pytest.mark.parametrize(
    ("offset", "value", "reason"),
    [
        (32, 1 << 30, "the metadata names page"),  # last_pgno past the end of the file
        (20, 1000, "bad page size 1000"),
        (24, 1, "encrypted"),
    ],
)
def test_bdb_bad_metadata_is_unknown(
    bdbs: dict[str, Path], spool: Spool, offset: int, value: int, reason: str
) -> None:
    data = bytearray(bdbs["p4096"].read_bytes())
    if offset == 24:
        data[24] = value
    else:
        struct.pack_into("<I", data, offset, value)
    with pytest.raises(BdbError, match=reason):
        read_bdb_headers(io.BytesIO(bytes(data)), len(data))
    fs = image([{"/var/lib/rpm/Packages": bytes(data)}], spool)
    comps, ctx = run("rpm", fs)
    assert comps == []
    assert len(ctx.unknowns) == 1 and reason in ctx.unknowns[0].reason
    assert ctx.unknowns[0].reason.startswith("cannot read Berkeley DB rpmdb: ")


def test_bdb_hash_page_bad_item_offset(bdbs: dict[str, Path]) -> None:
    data = bytearray(bdbs["p4096"].read_bytes())
    pgno = next(
        p for p, t, _ in _pages(bytes(data), 4096)
        if t in (2, 13) and struct.unpack_from("<H", data, p * 4096 + 20)[0] >= 2
    )
    struct.pack_into("<H", data, pgno * 4096 + 26 + 2, 0xFFF0)  # first data item's offset
    _, problems = read_bdb_headers(io.BytesIO(bytes(data)), len(data))
    assert any("bad offset" in p for p in problems)


def test_rpm_collector_reads_bdb(bdbs: dict[str, Path], spool: Spool) -> None:
    db = "/var/lib/rpm/Packages"
    fs = image([{"/etc/os-release": RHEL_OS, db: bdbs["p4096"].read_bytes()}], spool)
    comps, ctx = run("rpm", fs)
    assert ctx.unknowns == []
    got = {f"{c.name}|{c.version}" for c in comps}
    assert "hello-gpu|2:1.2.3-4.el9" in got and "big-files|3.0-1.el8" in got and len(got) == 4


def test_mutated_bdbs_never_crash(bdbs: dict[str, Path]) -> None:
    """Seeded random byte changes: packages and problems, or BdbError; nothing else."""
    import random

    data = bdbs["p512"].read_bytes()
    rng = random.Random(18)
    problems = 0
    for _ in range(400):
        d = bytearray(data)
        for _ in range(rng.randint(1, 6)):
            d[rng.randrange(len(d))] = rng.randrange(256)
        try:
            _, probs = read_bdb_content(ContentRef(data=bytes(d)), files=True)
            problems += bool(probs)
        except BdbError:
            problems += 1
    assert problems > 10
