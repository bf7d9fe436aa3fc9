"""Package catalogers end to end through the real FsView: image layers built as
tar streams, read with ``read_layer`` and squashed, or unpacked directory trees
read with ``FsView.from_directory``. Package data is real where this machine has
it (its own dpkg database and copyright files, rpm databases made with rpm's own
tools, PyPI wheels); apk and conda records are hand-written in their documented
formats (see test_apk.py / test_conda.py)."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest
import test_apk
import test_conda
import test_python_dist
import test_rpm

from gpusbom.collectors import CollectContext, all_collectors
from gpusbom.collectors.osrelease import OS_RELEASE_PATHS, read_os_release
from gpusbom.fsview.layer import read_layer
from gpusbom.fsview.spec import PathMatcher
from gpusbom.fsview.squash import squash
from gpusbom.fsview.types import Limits, NullProgress, Spool
from gpusbom.fsview.view import FsView
from gpusbom.model import Component, Target

MY_IDS = ("os-release", "dpkg", "rpm", "apk", "python", "conda")
HOST_STATUS = Path("/var/lib/dpkg/status")


class Link(str):
    """A symlink target in a layer spec."""


class Whiteout:
    pass


LayerSpec = dict[str, bytes | str | Link | Whiteout]


def matcher() -> PathMatcher:
    specs = list(OS_RELEASE_PATHS)
    for cid in MY_IDS:
        specs.extend(all_collectors()[cid].paths)
    return PathMatcher(specs)


def tar_layer(files: LayerSpec) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        dirs: set[str] = set()
        for path in sorted(files):
            parts = path.strip("/").split("/")
            for i in range(1, len(parts)):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    ti = tarfile.TarInfo(d)
                    ti.type = tarfile.DIRTYPE
                    ti.mode = 0o755
                    tf.addfile(ti)
            val = files[path]
            name = path.strip("/")
            if isinstance(val, Whiteout):
                head, _, base = name.rpartition("/")
                ti = tarfile.TarInfo((head + "/" if head else "") + ".wh." + base)
                tf.addfile(ti, io.BytesIO(b""))
            elif isinstance(val, Link):
                ti = tarfile.TarInfo(name)
                ti.type = tarfile.SYMTYPE
                ti.linkname = str(val)
                tf.addfile(ti)
            else:
                data = val.encode() if isinstance(val, str) else val
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                ti.mode = 0o644
                tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def spool() -> Spool:
    s = Spool()
    yield s
    s.close()


def image(layers: list[LayerSpec], spool: Spool, limits: Limits | None = None) -> FsView:
    limits = limits or Limits()
    m = matcher()
    idx = []
    for i, files in enumerate(layers):
        raw = tar_layer(files)
        li = read_layer(io.BytesIO(raw), index=i, name=f"layer{i}", matcher=m, spool=spool,
                        limits=limits, progress=NullProgress())
        assert li.ref.diff_id == "sha256:" + hashlib.sha256(raw).hexdigest()
        idx.append(li)
    return squash(idx, limits)


def run(cid: str, fs: FsView) -> tuple[list[Component], CollectContext]:
    ctx = CollectContext(
        fs=fs, target=Target(kind="image", reference="test", os_release=read_os_release(fs)),
        collector_id=cid,
    )
    comps = list(all_collectors()[cid]().collect(ctx))
    return comps, ctx


def by_name(comps: list[Component]) -> dict[str, Component]:
    out = {c.name: c for c in comps}
    assert len(out) == len(comps), "duplicate names"
    return out


DEBIAN_OS = (
    'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\n'
    'VERSION="12 (bookworm)"\nVERSION_CODENAME=bookworm\nID=debian\n'
    'HOME_URL="https://www.debian.org/"\n'
)
RHEL_OS = (
    'NAME="Red Hat Enterprise Linux"\nVERSION="9.4 (Plow)"\nID="rhel"\nID_LIKE="fedora"\n'
    'VERSION_ID="9.4"\nPRETTY_NAME="Red Hat Enterprise Linux 9.4 (Plow)"\n'
    'CPE_NAME="cpe:/o:redhat:enterprise_linux:9::baseos"\n'
)


def test_registered() -> None:
    reg = all_collectors()
    for cid in MY_IDS:
        assert cid in reg and reg[cid].id == cid


# -- os-release ------------------------------------------------------------------------------


def test_os_release_through_symlink(spool: Spool) -> None:
    fs = image([{"/usr/lib/os-release": RHEL_OS, "/etc/os-release": Link("../usr/lib/os-release")}],
               spool)
    assert read_os_release(fs)["ID"] == "rhel"
    (c,), ctx = run("os-release", fs)
    assert (c.name, c.version, c.type.value) == ("rhel", "9.4", "operating-system")
    assert c.cpe == "cpe:/o:redhat:enterprise_linux:9::baseos"
    assert c.supplier == "Red Hat Enterprise Linux"
    assert c.properties["pretty-name"] == "Red Hat Enterprise Linux 9.4 (Plow)"
    assert c.properties["id-like"] == "fedora"
    assert c.evidence[0].path == "/etc/os-release"
    assert c.evidence[0].layer == fs.layers[0].diff_id
    assert ctx.unknowns == []


def test_os_release_fallback_and_absent(spool: Spool) -> None:
    fs = image([{"/usr/lib/os-release": DEBIAN_OS}], spool)
    assert read_os_release(fs)["VERSION_CODENAME"] == "bookworm"
    (c,), _ = run("os-release", fs)
    assert c.evidence[0].path == "/usr/lib/os-release"
    fs2 = image([{"/bin/x": b"x"}], spool)
    assert read_os_release(fs2) == {}
    assert run("os-release", fs2)[0] == []


# -- dpkg -------------------------------------------------------------------------------------

needs_dpkg = pytest.mark.skipif(not HOST_STATUS.is_file(), reason="no host dpkg database")


def _host_stanzas() -> dict[str, str]:
    out: dict[str, str] = {}
    text = HOST_STATUS.read_text(encoding="utf-8", errors="replace")
    for s in text.split("\n\n"):
        s = s.strip("\n")
        if s.startswith("Package: ") and "\nStatus: install ok installed" in s:
            name = s.split("\n", 1)[0][9:]
            out.setdefault(name, s + "\n")
    return out


def _with_version(stanza: str, version: str) -> str:
    return "\n".join(
        f"Version: {version}" if ln.startswith("Version:") else ln for ln in stanza.split("\n")
    )


@needs_dpkg
def test_dpkg_layers_upgrade_and_removal(spool: Spool) -> None:
    st = _host_stanzas()
    names = sorted(st)[:40]
    assert len(names) >= 10
    up, gone, late = names[1], names[2], names[3]
    base = [st[n] for n in names if n != late]
    l1 = [st[n] for n in names]  # `late` installed in layer 1
    l1[names.index(up)] = _with_version(st[up], "99:1.0-1")  # `up` upgraded in layer 1
    l2 = [s for s, n in zip(l1, names) if n != gone]  # `gone` removed in layer 2
    # a real machine-readable copyright file from this host for one package
    lic_files: dict[str, bytes] = {}
    for n in names:
        cp = Path(f"/usr/share/doc/{n}/copyright")
        if cp.is_file() and cp.read_text(errors="replace").startswith("Format:"):
            lic_files[f"/usr/share/doc/{n}/copyright"] = cp.read_bytes()
            break
    fs = image(
        [
            {"/etc/os-release": DEBIAN_OS, "/var/lib/dpkg/status": "\n".join(base)},
            {"/var/lib/dpkg/status": "\n".join(l1), "/usr/bin/tool": b"\x7fELF"},
            {"/var/lib/dpkg/status": "\n".join(l2), **lic_files},
        ],
        spool,
    )
    d0, d1, _ = (r.diff_id for r in fs.layers)
    comps, ctx = run("dpkg", fs)
    assert ctx.unknowns == []
    got = by_name(comps)
    assert set(got) == set(names) - {gone}
    assert got[up].version == "99:1.0-1"
    assert got[up].layer == d1
    assert got[late].layer == d1
    assert got[names[0]].layer == d0
    assert {c.layer for c in comps} == {d0, d1}  # layer 2 only removed something
    c = got[names[0]]
    assert c.ecosystem == "deb"
    assert c.purl and c.purl.startswith(f"pkg:deb/debian/{names[0]}@")
    assert "distro=debian-12" in c.purl
    assert c.evidence[0].path == "/var/lib/dpkg/status"
    assert c.evidence[0].method == "package-db"
    assert c.evidence[0].collector == "dpkg"
    assert c.properties["source-package"]
    assert c.properties["architecture"]
    if lic_files:
        (lpath,) = lic_files
        lname = lpath.split("/")[4]
        assert got[lname].licenses


@needs_dpkg
def test_dpkg_status_rewritten_identically_keeps_first_layer(spool: Spool) -> None:
    st = _host_stanzas()
    names = sorted(st)[:5]
    text = "\n".join(st[n] for n in names)
    fs = image([{"/var/lib/dpkg/status": text}, {"/var/lib/dpkg/status": text}], spool)
    comps, _ = run("dpkg", fs)
    assert {c.layer for c in comps} == {fs.layers[0].diff_id}


@needs_dpkg
def test_dpkg_status_deleted_then_recreated(spool: Spool) -> None:
    st = _host_stanzas()
    names = sorted(st)[:4]
    text = "\n".join(st[n] for n in names)
    fs = image(
        [
            {"/var/lib/dpkg/status": text},
            {"/var/lib/dpkg/status": Whiteout()},
            {"/var/lib/dpkg/status": text},
        ],
        spool,
    )
    comps, _ = run("dpkg", fs)
    assert len(comps) == 4
    assert {c.layer for c in comps} == {fs.layers[2].diff_id}


@needs_dpkg
def test_dpkg_distroless_status_d(spool: Spool) -> None:
    st = _host_stanzas()
    a, b, c = sorted(st)[:3]
    strip = lambda s: "\n".join(ln for ln in s.split("\n") if not ln.startswith("Status:"))
    fs = image(
        [
            {"/etc/os-release": DEBIAN_OS,
             f"/var/lib/dpkg/status.d/{a}": strip(st[a]),
             f"/var/lib/dpkg/status.d/{a}.md5sums": b"d41d8cd98f00b204e9800998ecf8427e  usr/x\n"},
            {f"/var/lib/dpkg/status.d/{b}": st[b] + "\n" + strip(st[c]),
             "/var/lib/dpkg/status.d/broken": b"\xff\xfe\x00garbage"},
        ],
        spool,
    )
    comps, ctx = run("dpkg", fs)
    assert ctx.unknowns == []
    got = by_name(comps)
    assert set(got) == {a, b, c}
    assert got[a].layer == fs.layers[0].diff_id
    assert got[b].layer == got[c].layer == fs.layers[1].diff_id
    assert got[c].evidence[0].path == f"/var/lib/dpkg/status.d/{b}"


def test_dpkg_stanza_without_version_is_unknown(spool: Spool) -> None:
    limits = Limits()
    fs = image([{"/var/lib/dpkg/status": "Package: a\nStatus: install ok installed\n"}], spool,
               limits)
    comps, ctx = run("dpkg", fs)
    assert comps == []
    assert [u.reason for u in ctx.unknowns] == ["dpkg status: package a has no Version"]


# -- rpm --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rpmdbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if shutil.which("rpm") is None or shutil.which("rpmbuild") is None:
        pytest.skip("rpm and rpmbuild are not installed (Debian/Ubuntu: apt-get install rpm)")
    return test_rpm.build_rpmdbs(tmp_path_factory.mktemp("rpmfs"))


@pytest.mark.parametrize("spooled", [False, True])
def test_rpm_layers(rpmdbs: dict[str, Path], spool: Spool, spooled: bool) -> None:
    # spooled: force the database into a temp file (large-file path of ContentRef)
    limits = Limits(max_memory_content=1024) if spooled else Limits()
    db = "/var/lib/rpm/rpmdb.sqlite"
    fs = image(
        [
            {"/etc/os-release": RHEL_OS, db: rpmdbs["db1"].read_bytes()},
            {db: rpmdbs["db2"].read_bytes()},
            {db: rpmdbs["db3"].read_bytes()},
        ],
        spool,
        limits,
    )
    _, d1, d2 = (r.diff_id for r in fs.layers)
    comps, ctx = run("rpm", fs)
    assert ctx.unknowns == []
    got = by_name(comps)
    assert set(got) == {"base-lib", "hello-gpu", "cuda-stub"}
    assert got["base-lib"].version == "1.0-2.el9"
    assert got["base-lib"].layer == d2  # upgraded in layer 2
    assert got["hello-gpu"].layer == d1
    assert got["cuda-stub"].layer == d1
    h = got["hello-gpu"]
    assert h.version == "2:1.2.3-4.el9"
    assert h.purl == ("pkg:rpm/rhel/hello-gpu@1.2.3-4.el9?arch=noarch&distro=rhel-9.4&epoch=2"
                      "&upstream=hello-gpu-1.2.3-4.el9.src.rpm")
    assert h.licenses == ["MIT and BSD"]
    assert h.supplier == "Example Corp"
    assert h.depends_on == ["base-lib"]
    assert h.properties["source-rpm"] == "hello-gpu-1.2.3-4.el9.src.rpm"
    assert h.evidence[0].path == db and h.evidence[0].method == "package-db"
    assert got["cuda-stub"].depends_on == ["hello-gpu"]


def test_rpm_fedora_layout_symlinked_dbpath(rpmdbs: dict[str, Path], spool: Spool) -> None:
    fs = image(
        [{"/usr/lib/sysimage/rpm/rpmdb.sqlite": rpmdbs["db2"].read_bytes(),
          "/var/lib/rpm": Link("../../usr/lib/sysimage/rpm")}],
        spool,
    )
    comps, ctx = run("rpm", fs)
    assert ctx.unknowns == []
    assert sorted(c.name for c in comps) == ["base-lib", "cuda-stub", "hello-gpu"]
    assert comps[0].evidence[0].path == "/usr/lib/sysimage/rpm/rpmdb.sqlite"
    for c in comps:  # no os-release: no namespace, no distro qualifier
        assert c.purl and c.purl.startswith(f"pkg:rpm/{c.name}@") and "distro=" not in c.purl


def test_rpm_garbage_berkeley_db_is_unknown(spool: Spool) -> None:
    # real Berkeley DB rpmdbs are covered by test_rpm_bdb.py; this one has no hash magic
    fs = image([{"/var/lib/rpm/Packages": b"\x00\x06\x15\x61" + b"\x00" * 4092}], spool)
    comps, ctx = run("rpm", fs)
    assert comps == []
    assert [(u.reason, u.path) for u in ctx.unknowns] == [
        (
            "cannot read Berkeley DB rpmdb: not a Berkeley DB hash database (bad magic)",
            "/var/lib/rpm/Packages",
        )
    ]


def test_rpm_garbage_db_is_unknown(spool: Spool) -> None:
    fs = image([{"/var/lib/rpm/rpmdb.sqlite": b"garbage" * 1000}], spool)
    comps, ctx = run("rpm", fs)
    assert comps == []
    assert len(ctx.unknowns) == 1 and ctx.unknowns[0].reason.startswith("cannot read rpmdb")


# -- apk --------------------------------------------------------------------------------------

ALPINE_OS = 'NAME="Alpine Linux"\nID=alpine\nVERSION_ID=3.19.1\nPRETTY_NAME="Alpine Linux v3.19"\n'


def test_apk_layers_upgrade_and_removal(spool: Spool) -> None:
    db0 = test_apk.INSTALLED
    db1 = db0.replace("V:3.1.4-r5", "V:3.1.4-r6")  # libcrypto3 upgraded
    stanzas = db1.split("\n\n")
    db2 = "\n\n".join(s for s in stanzas if "\nP:ssl_client\n" not in s)  # ssl_client removed
    fs = image(
        [
            {"/etc/os-release": ALPINE_OS, "/lib/apk/db/installed": db0},
            {"/lib/apk/db/installed": db1},
            {"/lib/apk/db/installed": db2},
        ],
        spool,
    )
    d0, d1, _ = (r.diff_id for r in fs.layers)
    comps, ctx = run("apk", fs)
    assert ctx.unknowns == []
    got = by_name(comps)
    assert set(got) == {"musl", "libcrypto3", "busybox"}
    assert got["libcrypto3"].version == "3.1.4-r6"
    assert got["libcrypto3"].layer == d1
    assert got["musl"].layer == d0
    assert got["musl"].purl == (
        "pkg:apk/alpine/musl@1.2.4_git20230717-r4?arch=x86_64&distro=alpine-3.19.1"
    )
    assert got["libcrypto3"].depends_on == ["musl"]
    assert got["libcrypto3"].properties["source-package"] == "openssl"
    assert got["musl"].licenses == ["MIT"]


# -- python (from_directory on an unpacked tree) -----------------------------------------------


def _extract_dist_info(whl: str, site: Path) -> None:
    for name, data in test_python_dist.wheel_dist_info(whl).items():
        p = site / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


def test_python_from_directory(tmp_path: Path, spool: Spool) -> None:
    root = tmp_path / "root"
    site = root / "usr/local/lib/python3.11/site-packages"
    site.mkdir(parents=True)
    _extract_dist_info("six-1.16.0-py2.py3-none-any.whl", site)
    _extract_dist_info(
        "nvidia_cuda_runtime_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl", site
    )
    (site / "six-1.16.0.dist-info/INSTALLER").write_text("pip\n")
    # a legacy egg-info file and an egg-info directory (Debian dist-packages style)
    dist = root / "usr/lib/python3/dist-packages"
    dist.mkdir(parents=True)
    (dist / "crcmod-1.7.egg-info").write_text(
        "Metadata-Version: 1.1\nName: crcmod\nVersion: 1.7\nLicense: MIT\n"
    )
    (dist / "PyYAML-6.0.egg-info").mkdir()
    (dist / "PyYAML-6.0.egg-info/PKG-INFO").write_text(
        "Metadata-Version: 2.1\nName: PyYAML\nVersion: 6.0\nLicense: MIT\n"
        "Requires-Dist: pytest ; extra == 'test'\n"
    )
    # a broken one: reported, the others still found
    (site / "broken-1.0.dist-info").mkdir()
    (site / "broken-1.0.dist-info/METADATA").write_text("Metadata-Version: 2.1\n")
    fs = FsView.from_directory(root, matcher(), spool, Limits())
    comps, ctx = run("python", fs)
    got = by_name(comps)
    assert set(got) == {"six", "nvidia-cuda-runtime-cu12", "crcmod", "PyYAML"}
    six = got["six"]
    assert six.purl == "pkg:pypi/six@1.16.0"
    assert six.properties["location"] == "/usr/local/lib/python3.11/site-packages"
    assert six.properties["installer"] == "pip"
    assert six.evidence[0].path == "/usr/local/lib/python3.11/site-packages/six-1.16.0.dist-info/METADATA"
    assert six.evidence[0].method == "package-metadata"
    assert "installer" not in got["nvidia-cuda-runtime-cu12"].properties
    assert got["PyYAML"].purl == "pkg:pypi/pyyaml@6.0"
    assert got["PyYAML"].depends_on == []
    assert got["crcmod"].evidence[0].path == "/usr/lib/python3/dist-packages/crcmod-1.7.egg-info"
    assert [(u.collector, u.path) for u in ctx.unknowns] == [
        ("python", "/usr/local/lib/python3.11/site-packages/broken-1.0.dist-info/METADATA")
    ]


# -- conda ------------------------------------------------------------------------------------


def test_conda_envs(tmp_path: Path, spool: Spool) -> None:
    root = tmp_path / "root"
    base = root / "opt/conda/conda-meta"
    env = root / "opt/conda/envs/ml/conda-meta"
    base.mkdir(parents=True)
    env.mkdir(parents=True)
    (base / "cuda-cudart-12.4.127-h95ffa78_0.json").write_text(json.dumps(test_conda.CUDART))
    (base / "history").write_text("==> 2024-04-01 <==\n+conda-forge/linux-64::x-1-0\n")
    (env / "numpy-1.26.4-py311h64a7726_0.json").write_text(json.dumps(test_conda.NUMPY_OLD_STYLE))
    (env / "bad-1-0.json").write_text("{not json")
    fs = FsView.from_directory(root, matcher(), spool, Limits())
    comps, ctx = run("conda", fs)
    got = by_name(comps)
    assert set(got) == {"cuda-cudart", "numpy"}
    assert got["cuda-cudart"].properties["location"] == "/opt/conda"
    assert got["numpy"].properties["location"] == "/opt/conda/envs/ml"
    assert got["numpy"].purl and got["numpy"].purl.startswith("pkg:conda/numpy@1.26.4?")
    assert got["numpy"].licenses == ["BSD-3-Clause"]
    assert got["numpy"].evidence[0].method == "package-db"
    assert len(ctx.unknowns) == 1 and ctx.unknowns[0].path == "/opt/conda/envs/ml/conda-meta/bad-1-0.json"


def test_nothing_found_on_an_empty_image(spool: Spool) -> None:
    fs = image([{"/bin/true": b"\x7fELF"}], spool)
    for cid in MY_IDS:
        comps, ctx = run(cid, fs)
        assert comps == [] and ctx.unknowns == [], cid


def test_rpm_uncheckpointed_wal_is_applied(rpmdbs: dict[str, Path], tmp_path: Path,
                                           spool: Spool) -> None:
    # rpm checkpoints its WAL on exit; to get a database whose last transaction is
    # only in the -wal file, delete a package row with sqlite and copy the files
    # while the connection is still open (no checkpoint happens before close).
    import sqlite3

    db = tmp_path / "rpmdb.sqlite"
    shutil.copyfile(rpmdbs["db3"], db)
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    conn.execute("PRAGMA wal_autocheckpoint=0")
    (hello_hnum,) = [
        hnum for hnum, blob in conn.execute("SELECT hnum, blob FROM Packages")
        if test_rpm.parse_rpm_header(blob)[1000] == "hello-gpu"
    ]
    assert conn.execute("DELETE FROM Packages WHERE hnum = ?", (hello_hnum,)).rowcount == 1
    conn.commit()
    main, wal = db.read_bytes(), (tmp_path / "rpmdb.sqlite-wal").read_bytes()
    conn.close()
    assert len(wal) > 0
    p = "/var/lib/rpm/rpmdb.sqlite"
    fs = image([{p: main, p + "-wal": wal}], spool)
    comps, ctx = run("rpm", fs)
    assert ctx.unknowns == []
    assert sorted(c.name for c in comps) == ["base-lib", "cuda-stub"]
    fs2 = image([{p: main}], spool)  # without its WAL, the deleted row is still there
    assert sorted(c.name for c in run("rpm", fs2)[0]) == ["base-lib", "cuda-stub", "hello-gpu"]
