"""Build the seed corpus of every fuzz target from the test fixtures.

    python fuzz/seeds.py OUT_DIR      -> OUT_DIR/<target>/seed-NNN

Seeds are valid inputs of each parser, made by the same code the tests use: image layers
and layouts from ``fixtures.imagetools``, ELF/fatbin/bundle files from the binary tests'
builders, real sqlite and Berkeley DB rpmdbs written by rpm's own tools (as the rpm tests
do), the golden SBOMs, the built-in policies and advisory records of the repository.
A missing tool fails the build (no silently smaller corpus).
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "src", ROOT / "tests", ROOT / "tests" / "binary", ROOT / "tests" / "collectors"):
    sys.path.insert(0, str(p))


def _tars() -> list[bytes]:
    from fixtures import imagetools as it

    s = it.Symlink
    return [
        it.tar_bytes([("/etc/os-release", b'ID=debian\nVERSION_ID="12"\n'),
                      ("/usr/lib/libcuda.so.1", s("libcuda.so.550.54.15")),
                      ("/usr/lib/libcuda.so.550.54.15", b"\x7fELF" + bytes(60))]),
        it.tar_bytes([("/var/lib/dpkg/status", DPKG), ("/opt/" + "long/" * 40 + "name", b"x"),
                      ("/usr/share/doc/x", it.WHITEOUT), ("/opt/o/", it.OPAQUE)]),
        it.tar_bytes([("/a", b"1"), ("/b", it.Hardlink("/a"))], absolute=True),
    ]


def _layer_cache_entries(tars: list[bytes]) -> list[bytes]:
    """Layer-cache entries as a scan stores them: each seed tar read as a layer, encoded."""
    import io

    from gpusbom.fsview.layer import read_layer
    from gpusbom.fsview.layercodec import encode
    from gpusbom.fsview.spec import PathMatcher, PathSpec
    from gpusbom.fsview.types import Limits, NullProgress, Spool

    matcher = PathMatcher([PathSpec("/etc/os-release"), PathSpec("/var/lib/dpkg/**"),
                           PathSpec("/usr/lib/**"), PathSpec("/a"), PathSpec("/b")])
    out = []
    with Spool(Limits()) as spool:
        for t in tars:
            li = read_layer(io.BytesIO(t), index=0, name="seed", matcher=matcher, spool=spool,
                            limits=Limits(), progress=NullProgress(), threaded=False)
            data = encode(li)
            assert data is not None
            out.append(data)
    return out


DPKG = (b"Package: libc6\nStatus: install ok installed\nPriority: optional\nSection: libs\n"
        b"Installed-Size: 12988\nMaintainer: GNU Libc Maintainers <debian-glibc@lists.debian.org>\n"
        b"Architecture: amd64\nMulti-Arch: same\nSource: glibc\nVersion: 2.36-9+deb12u4\n"
        b"Depends: libgcc-s1\nDescription: GNU C Library: Shared libraries\n Contains the "
        b"standard libraries.\nHomepage: https://www.gnu.org/software/libc/libc.html\n\n"
        b"Package: nvidia-cuda-dev\nStatus: deinstall ok config-files\nVersion: 11.8.89~11.8.0-5\n\n")


def _images() -> list[bytes]:
    from fixtures import imagetools as it

    image = it.build_image([[("/etc/os-release", b"ID=alpine\n")]], env={"CUDA_VERSION": "12.4"},
                           labels={"a": "b"})
    docker = it.docker_archive_files(image, ["t/t:1"])
    oci = it.oci_layout_files(image, tag="t")
    return [b"\x00" + oci["index.json"], b"\x01" + image.manifest_bytes,
            b"\x02" + image.config_bytes, b"\x03" + docker["manifest.json"]]


def _binaries() -> list[bytes]:
    import test_fuzz as tf  # tests/binary/test_fuzz.py: fatbins and bundles
    from gpubin_oracles import make_elf

    fat, bundles = tf._fatbin(), tf._bundles()
    return [fat, bundles, make_elf([(".nv_fatbin", fat), (".hip_fatbin", bundles)]),
            make_elf([(".text", b"\x90" * 64)])]


def _rpmdbs(tmp: Path) -> tuple[list[bytes], list[bytes], list[bytes]]:
    import test_rpm  # tests/collectors/test_rpm.py: real rpmdbs made with rpmbuild and rpm
    import test_rpm_bdb

    built = test_rpm.build_rpmdbs(tmp / "sqlite")
    sqlite_seeds = [built["db1"].read_bytes(), built["db3"].read_bytes()]
    conn = sqlite3.connect(built["db3"])
    blobs = [(int(h), bytes(b)) for h, b in conn.execute("SELECT hnum, blob FROM Packages")]
    conn.close()
    bdb = tmp / "bdb" / "Packages"
    bdb.parent.mkdir()
    test_rpm_bdb._load(blobs, bdb, ["db_pagesize=512"])
    return sqlite_seeds, [b for _, b in blobs], [bdb.read_bytes()]


def _sboms() -> list[bytes]:
    """Small SBOMs in every format gpusbom writes, from a scan of a small fixture image."""
    import subprocess

    from fixtures import imagetools as it

    image = it.build_image([[("/etc/os-release", b'ID=debian\nVERSION_ID="12"\n'),
                             ("/var/lib/dpkg/status", DPKG),
                             ("/usr/lib/python3/dist-packages/torch-2.3.1.dist-info/METADATA",
                              b"Metadata-Version: 2.1\nName: torch\nVersion: 2.3.1\n")]])
    formats = ["json", "cyclonedx-json", "cyclonedx-xml", "spdx-json", "spdx-tag-value"]
    with tempfile.TemporaryDirectory() as d:
        layout = it.write_oci_layout(Path(d) / "layout", image, tag="t")
        outs = [Path(d) / f"sbom.{f}" for f in formats]
        cmd = [sys.executable, "-m", "gpusbom", "scan", "--image", f"oci:{layout}:t", "-q"]
        for f, o in zip(formats, outs):
            cmd += ["-o", f"{f}={o}"]
        subprocess.run(cmd, check=True, cwd=ROOT)
        return [o.read_bytes() for o in outs]


def build(out: Path) -> dict[str, int]:
    import gzip

    import zstandard

    from gpusbom.collectors.osrelease import OS_RELEASE_PATHS  # noqa: F401 - import check

    seeds: dict[str, list[bytes]] = {}
    tars = _tars()
    seeds["tar"] = tars
    seeds["layer"] = [gzip.compress(t, mtime=0) for t in tars] + tars[:1] + [
        zstandard.ZstdCompressor().compress(tars[0])]
    seeds["gzip"] = [gzip.compress(t, mtime=0)[2:] for t in tars] + [
        (gzip.compress(b"a", mtime=0) + gzip.compress(b"b", mtime=0))[2:]]
    z = zstandard.ZstdCompressor(write_content_size=False)
    seeds["zstd"] = [z.compress(t)[4:] for t in tars] + [
        (z.compress(b"a") + b"\x50\x2a\x4d\x18\x04\x00\x00\x00abcd" + z.compress(b"b"))[4:]]
    seeds["dpkg"] = [DPKG, b"/.\n/usr\n/usr/lib/x86_64-linux-gnu/libcuda.so.1\n",
                     b"0123456789abcdef0123456789abcdef  usr/lib/libx.so\n",
                     b"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
                     b"\nFiles: *\nLicense: MIT\n"]
    seeds["apk"] = [b"C:Q1abc=\nP:musl\nV:1.2.4-r2\nA:x86_64\nS:383152\nI:622592\nT:the musl c "
                    b"library\nU:https://musl.libc.org/\nL:MIT\no:musl\nD:so:libc.musl.so.1\n"
                    b"p:so:libc.musl-x86_64.so.1=1\nF:lib\nR:ld-musl-x86_64.so.1\n\nP:b\nV:1\n"]
    seeds["wheel-metadata"] = [
        b"Metadata-Version: 2.1\nName: torch\nVersion: 2.3.1\nLicense: BSD-3\n"
        b"Requires-Dist: nvidia-cuda-runtime-cu12==12.1.105; platform_system == \"Linux\"\n"
        b"Classifier: License :: OSI Approved :: BSD License\n\nlong description\n",
        b"torch/__init__.py,sha256=abc,123\ntorch-2.3.1.dist-info/RECORD,,\n../../bin/x,,\n"]
    seeds["conda-meta"] = [json.dumps({"name": "cudatoolkit", "version": "11.8.0",
                                       "build": "h6a678d5_0", "files": ["lib/libcudart.so"],
                                       "depends": ["__glibc >=2.17"]}).encode()]
    seeds["os-release"] = [b'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"'
                           b'\nVERSION_ID="12"\nID=debian\n# c\nX=\'single\\\'q\'\n']
    seeds["elf-gpu"] = _binaries()
    seeds["image-json"] = _images()
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "sqlite").mkdir()
        seeds["rpmdb-sqlite"], seeds["rpm-header"], seeds["rpmdb-bdb"] = _rpmdbs(Path(d))
    from tests.advisories import test_csaf
    from tests.advisories import test_osv_cve5 as oc

    seeds["csaf"] = [json.dumps(test_csaf._doc()).encode()]
    seeds["cve5"] = [json.dumps(oc.nvidia_cve()).encode()]
    seeds["osv"] = [json.dumps(f()).encode() for f in (oc.ghsa_transformers, oc.pysec_git_only,
                                                       oc.debian_driver)]
    seeds["sbom-in"] = _sboms()
    seeds["vex"] = [json.dumps({
        "@context": "https://openvex.dev/ns/v0.2.0", "@id": "x", "author": "a",
        "timestamp": "2024-01-01T00:00:00Z", "version": 1, "statements": [{
            "vulnerability": {"name": "CVE-2024-0001"}, "products": [{"@id": "pkg:pypi/torch"}],
            "status": "not_affected", "justification": "component_not_present"}]}).encode()]
    seeds["policy-yaml"] = [p.read_bytes() for p in sorted((ROOT / "policies").glob("*.yaml"))]
    manifest = json.dumps({"schemaVersion": 2, "mediaType":
                           "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": "sha256:" + "0" * 64, "size": 2},
                           "layers": []}).encode()
    seeds["registry-http"] = [
        b"401\nWWW-Authenticate: Bearer realm=\"https://auth.fuzz.test/token\",service=\"r\","
        b"scope=\"repository:team/app:pull\"\n\n{\"errors\":[{\"code\":\"UNAUTHORIZED\"}]}\n--\n"
        b"200\nContent-Type: application/json\n\n{\"token\":\"t\"}\n--\n200\nContent-Type: "
        b"application/vnd.oci.image.manifest.v1+json\n\n" + manifest,
        b"404\n\n{\"errors\":[{\"code\":\"MANIFEST_UNKNOWN\",\"message\":\"no\"}]}\n--\n200\n\n"
        b"{\"name\":\"team/app\",\"tags\":[\"2\",\"latest\"]}",
        b"503\nRetry-After: 1\n\n\n--\n429\n\n\n--\n200\n\n" + manifest,
    ]
    seeds["layer-cache"] = _layer_cache_entries(tars)
    counts = {}
    for name, items in seeds.items():
        d = out / name
        d.mkdir(parents=True, exist_ok=True)
        for i, data in enumerate(items):
            (d / f"seed-{i:03d}").write_bytes(data)
        counts[name] = len(items)
    return counts


if __name__ == "__main__":
    import targets

    counts = build(Path(sys.argv[1]))
    missing = set(targets.TARGETS) - set(counts)
    assert not missing, f"no seeds for {sorted(missing)}"
    print(json.dumps(counts))
