"""The fingerprint database (#38): its format and validated loading, the build-id reader, and
exact identification of a renamed, stripped real NVIDIA library by its ELF build-id.

Ground truth is the pinned wheel's own metadata (``nvidia-cuda-runtime-cu12==12.4.127``, by
sha256) and binutils' ``readelf -n``, never the scanner's output.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from pinned_wheels import CACHE, LINUX_311, pinned_wheel  # noqa: E402

from gpusbom.binary.buildid import NEED_MORE, build_id_from_head  # noqa: E402
from gpusbom.binary.stream import GpuCodeScanner  # noqa: E402
from gpusbom.fingerprints import (  # noqa: E402
    COLUMNS,
    FORMAT,
    FORMAT_VERSION,
    FingerprintDB,
    FingerprintError,
    Record,
    load_bytes,
    load_path,
)
from gpusbom.fingerprints.active import load_bundled  # noqa: E402

CUDART_WHEEL = "nvidia_cuda_runtime_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl"
CUDART_REQ = "nvidia-cuda-runtime-cu12==12.4.127"
CUDART_SHA = "64403288fa2136ee8e467cdc9c9427e0434110899d07c779f25b5c068934faa5"
CUDART_MEMBER = "nvidia/cuda_runtime/lib/libcudart.so.12"


def _readelf_build_id(path: Path) -> str | None:
    out = subprocess.run(["readelf", "-n", str(path)], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        if "Build ID:" in line:
            return line.split("Build ID:")[1].strip()
    return None


def _cudart(tmp: Path) -> Path:
    wheel = pinned_wheel(CUDART_WHEEL, CUDART_REQ, CUDART_SHA, dest=CACHE / "wheels",
                         pip_args=LINUX_311)
    out = tmp / "libcudart.so.12"
    with zipfile.ZipFile(wheel) as z:
        out.write_bytes(z.read(CUDART_MEMBER))
    return out


def _strip_and_patch(src: Path, dst: Path, tmp: Path) -> None:
    """``objcopy --strip-all`` plus a section of our own: NVIDIA's libcudart is shipped
    stripped already (``--strip-all`` alone gives the same bytes back), so the added section
    stands for what vendoring does to a file (auditwheel/patchelf edits) and makes the
    SHA-256 differ; the build-id note stays (checked with readelf by the callers)."""
    note = tmp / "vendored-note.txt"
    note.write_text("copied by a vendoring tool\n")
    subprocess.run(["objcopy", "--strip-all", f"--add-section=.gpusbom.vendored={note}",
                    str(src), str(dst)], check=True)


def _doc(rows: list[list[object]]) -> bytes:
    return json.dumps({"format": FORMAT, "format_version": FORMAT_VERSION,
                       "built": "2026-12-07T00:00:00Z",
                       "columns": list(COLUMNS), "rows": rows}).encode()


_ROW: list[object] = ["cudart", "12.4.127", "libcudart.so.12", "libcudart.so.12", "ab" * 20,
                      "cd" * 32, 707904, "pypi:nvidia-cuda-runtime-cu12==12.4.127"]


# ------------------------------------------------------------------------------ build-id


def test_build_id_from_head_agrees_with_readelf() -> None:
    libs = [p for p in (Path("/usr/lib/x86_64-linux-gnu/libz.so.1"), Path("/bin/ls"))
            if p.exists()]
    assert libs
    for p in libs:
        data = p.read_bytes()
        assert build_id_from_head(data[: 64 << 10]) == _readelf_build_id(p)
        assert build_id_from_head(data[:40]) == NEED_MORE
    assert build_id_from_head(b"not an elf file at all, long enough to be read" * 2) is None


def test_stream_scanner_reports_build_id_and_sha256_of_every_elf() -> None:
    p = Path("/usr/lib/x86_64-linux-gnu/libz.so.1")
    if not p.exists():
        pytest.skip("no libz.so.1 on this system")
    data = p.read_bytes()
    s = GpuCodeScanner(sha256=True)
    for i in range(0, len(data), 777):  # small chunks: the head spans many of them
        s.feed(data[i:i + 777])
    r = s.close()
    assert r == {"sha256": hashlib.sha256(data).hexdigest(), "build_id": _readelf_build_id(p)}
    text = GpuCodeScanner(sha256=True)
    text.feed(b"#!/bin/sh\necho not a binary\n")
    assert text.close() is None


# ------------------------------------------------------------------------------ format


def test_lookup_by_sha256_then_build_id_and_ambiguous_keys() -> None:
    db = load_bytes(_doc([_ROW]), name="t.json")
    m = db.lookup(sha256="cd" * 32)
    assert m is not None and (m.product, m.version, m.method, m.confidence) == (
        "cudart", "12.4.127", "sha256", "exact")
    m = db.lookup(sha256="ee" * 32, build_id="AB" * 20)
    assert m is not None and m.method == "build-id"
    assert db.lookup(sha256="ee" * 32, build_id="ff" * 20) is None
    other = [*_ROW[:1], "12.5.39", *_ROW[2:]]
    assert load_bytes(_doc([_ROW, other]), name="t").lookup(build_id="ab" * 20) is None
    same = [*_ROW[:2], "libcudart.so.12.4.127", *_ROW[3:]]
    assert load_bytes(_doc([_ROW, same]), name="t").lookup(build_id="ab" * 20) is not None


@pytest.mark.parametrize("data, says", [
    (b'{"format": "gpusbom-fingerprints", "rows": [', "not valid JSON"),
    (b"\xff\xfe", "not valid JSON"),
    (b"[]", "not a JSON object"),
    (json.dumps({"format": "other"}).encode(), "format is 'other'"),
    (json.dumps({"format": FORMAT, "format_version": 4}).encode(), "format_version 4"),
    (json.dumps({"format": FORMAT, "format_version": 1, "columns": ["product"],
                 "rows": []}).encode(), "columns must be"),
    (_doc([[*_ROW[:1], "1.2.2; rm -rf", *_ROW[2:]]]), "row 0: bad version"),
    (_doc([_ROW, [*_ROW[:5], "xyz", *_ROW[6:]]]), "row 1: bad sha256"),
    (_doc([[*_ROW[:2], "../../etc/passwd", *_ROW[3:]]]), "bad file"),
    (_doc([[*_ROW[:6], -1, _ROW[7]]]), "bad size"),
    (_doc([_ROW[:7]]), "a row of 8 values"),
])
def test_damaged_database_is_an_error_naming_the_file(data: bytes, says: str) -> None:
    with pytest.raises(FingerprintError, match="fingerprints.json") as e:
        load_bytes(data, name="/x/fingerprints.json")
    assert says in str(e.value)


def test_damaged_database_file_on_disk(tmp_path: Path) -> None:
    bad = tmp_path / "fingerprints.json"
    bad.write_bytes(_doc([_ROW])[:-7])  # truncated
    with pytest.raises(FingerprintError, match=str(bad)):
        load_path(bad)
    with pytest.raises(FingerprintError, match="cannot read"):
        load_path(tmp_path / "missing.json")
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as f:
        f.truncate((64 << 20) + 10)
    with pytest.raises(FingerprintError, match="more than"):
        load_path(huge)


def test_round_trip_of_the_builder_document() -> None:
    from gpusbom.fingerprints.database import dumps

    db = FingerprintDB([Record(*_ROW)], built="2026-12-07T00:00:00Z")  # type: ignore[arg-type]
    again = load_bytes(dumps(db.to_document()).encode(), name="t")
    assert again.records == db.records and again.built == db.built


def test_bundled_database_loads_and_covers_the_small_products() -> None:
    db = load_bundled()
    counts = db.counts()
    for product in ("cudart", "nvrtc", "nvjitlink", "curand", "nvjpeg", "cupti"):
        assert len(counts.get(product, {})) >= 10, (product, counts.get(product))
    assert db.built
    # every record names the wheel it came from, and its version is that wheel's
    for r in db.records:
        dist, _, ver = r.source.removeprefix("pypi:").partition("==")
        assert dist.startswith("nvidia-") and ver
        assert r.version == ver or r.version.replace("rc", "") == ver.replace("rc", "")


# ------------------------------------------------------------------------------ identification


def _scan(root: Path) -> list[object]:
    from gpusbom.collectors import all_collectors
    from gpusbom.fsview.types import Limits, Spool
    from gpusbom.fsview.view import FsView
    from gpusbom.model import Target
    from gpusbom.scan import build_matcher, run_collectors

    classes = [all_collectors()["cuda"]]
    limits = Limits()
    with Spool(limits) as spool:
        fs = FsView.from_directory(root, build_matcher(classes), spool, limits)
        comps, unknowns = run_collectors(fs, Target(kind="directory", reference=str(root)),
                                         classes)
    assert not unknowns, unknowns
    return list(comps)


@pytest.mark.skipif(shutil.which("objcopy") is None, reason="binutils objcopy is not installed")
def test_renamed_stripped_cudart_is_identified_exactly_by_build_id(tmp_path: Path) -> None:
    real = _cudart(tmp_path)
    real_bid = _readelf_build_id(real)
    assert real_bid
    root = tmp_path / "root"
    vendored = root / "opt" / "app" / "lib" / "libmystery.so"  # no product, no version
    vendored.parent.mkdir(parents=True)
    _strip_and_patch(real, vendored, tmp_path)
    # other bytes (no SHA-256 match), the same build-id note
    assert hashlib.sha256(vendored.read_bytes()).hexdigest() != hashlib.sha256(
        real.read_bytes()).hexdigest()
    assert _readelf_build_id(vendored) == real_bid
    # the bundled database holds the real file (sha256 and build-id) of that wheel
    m = load_bundled().lookup(sha256=hashlib.sha256(real.read_bytes()).hexdigest())
    assert m is not None and (m.product, m.version) == ("cudart", "12.4.127")
    assert m.record.build_id == real_bid and m.record.source == f"pypi:{CUDART_REQ}"

    comps = _scan(root)
    [c] = [c for c in comps if getattr(c, "name", None) == "cudart"]
    assert c.version == "12.4.127"  # type: ignore[attr-defined]
    props = c.properties  # type: ignore[attr-defined]
    assert props["identification-method"] == "build-id"
    assert props["identification-confidence"] == "exact"
    assert props["fingerprint-source"] == f"pypi:{CUDART_REQ}"
    assert props["fingerprint-file"] == "libcudart.so.12"
    assert props["location"] == "/opt/app"  # install_location: the lib directory's parent
    [ev] = c.evidence  # type: ignore[attr-defined]
    assert ev.method == "fingerprint-build-id" and ev.path == "/opt/app/lib/libmystery.so"

    # the unstripped copy under its own name: identified by its SHA-256; the soname's
    # version agrees
    other = tmp_path / "root2" / "usr" / "lib" / "libcudart.so.12.4.127"
    other.parent.mkdir(parents=True)
    shutil.copyfile(real, other)
    [c2] = [c for c in _scan(tmp_path / "root2") if getattr(c, "name", None) == "cudart"]
    assert c2.version == "12.4.127"  # type: ignore[attr-defined]
    assert c2.properties["identification-method"] == "sha256"  # type: ignore[attr-defined]
    assert "disagreement" not in c2.properties  # type: ignore[attr-defined]


def test_database_wins_over_a_wrong_soname_and_the_other_is_kept(tmp_path: Path) -> None:
    real = _cudart(tmp_path)
    lying = tmp_path / "root" / "usr" / "lib" / "libcudart.so.12.9.99"
    lying.parent.mkdir(parents=True)
    shutil.copyfile(real, lying)
    [c] = [c for c in _scan(tmp_path / "root") if getattr(c, "name", None) == "cudart"]
    assert c.version == "12.4.127"  # type: ignore[attr-defined]
    # 12.9.99 is no cudart release at all (the 12.9 line is 12.9.37, 12.9.79): the soname's
    # version is rejected, kept as evidence with the reason, and never reported
    rejected = c.properties["rejected-versions"]  # type: ignore[attr-defined]
    assert rejected.startswith("12.9.99 (soname libcudart.so.12.9.99): not a cudart release")
    assert "disagreement" not in c.properties  # type: ignore[attr-defined]
    assert {e.method for e in c.evidence} >= {"soname", "fingerprint-sha256"}  # type: ignore[attr-defined]


def test_a_file_not_in_the_database_gets_no_identification(tmp_path: Path) -> None:
    src = Path("/usr/lib/x86_64-linux-gnu/libz.so.1")
    if not src.exists():
        pytest.skip("no libz.so.1 on this system")
    fake = tmp_path / "root" / "usr" / "lib" / "libcudart.so.12.4.127"
    fake.parent.mkdir(parents=True)
    shutil.copyfile(src.resolve(), fake)
    [c] = [c for c in _scan(tmp_path / "root") if getattr(c, "name", None) == "cudart"]
    assert c.version == "12.4.127"  # the soname's, as before
    props = c.properties  # type: ignore[attr-defined]
    assert "fingerprint-source" not in props
    # decided by the file name: low confidence (#38: every component says how and how sure)
    assert (props["identification-method"], props["identification-confidence"]) == (
        "soname", "low")


def test_cyclonedx_evidence_identity_says_exact_and_how(tmp_path: Path) -> None:
    from gpusbom.writers import WriterOptions, get_writer

    real = _cudart(tmp_path)
    lib = tmp_path / "root" / "opt" / "x" / "libcudart-9335f6a2.so.12"  # auditwheel-renamed
    lib.parent.mkdir(parents=True)
    if shutil.which("objcopy") is None:
        pytest.skip("binutils objcopy is not installed")
    _strip_and_patch(real, lib, tmp_path)
    from gpusbom.scan import scan

    result = scan(f"dir:{tmp_path / 'root'}", advisories=False, cache=False)
    for spec in ("1.6", "1.5"):
        buf = io.StringIO()
        get_writer("cyclonedx-json").write(result, buf, WriterOptions(cyclonedx_version=spec))
        doc = json.loads(buf.getvalue())
        [c] = [c for c in doc["components"] if c["name"] == "cudart"]
        assert c["version"] == "12.4.127"
        ident = c["evidence"]["identity"]
        idents = ident if isinstance(ident, list) else [ident]
        assert isinstance(ident, list) == (spec == "1.6")
        assert all(i["confidence"] == 1 for i in idents)
        methods = [m for i in idents for m in i["methods"]]
        assert {"technique": "binary-analysis", "confidence": 1,
                "value": "/opt/x/libcudart-9335f6a2.so.12"} in methods
        props = {p["name"]: p["value"] for p in c.get("properties", [])}
        assert any(k.endswith("identification-confidence") and v == "exact"
                   for k, v in props.items()), props


def test_cli_fingerprints_status() -> None:
    r = subprocess.run([sys.executable, "-m", "gpusbom", "fingerprints", "status"],
                       capture_output=True, text=True, check=False, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "source: bundled"
    assert lines[1].startswith("built: 20")
    n = int(lines[2].removeprefix("records: "))
    assert n == len(load_bundled())
    assert any(ln.startswith("cudart\t") and " versions\t" in ln for ln in lines), lines


NVRTC_WHEEL = "nvidia_cuda_nvrtc_cu12-12.6.77-py3-none-manylinux2014_x86_64.whl"
NVRTC_REQ = "nvidia-cuda-nvrtc-cu12==12.6.77"
NVRTC_SHA = "35b0cc6ee3a9636d5409133e79273ce1f3fd087abb0532d2d2e8fff1fe9efc53"


def test_build_id_of_a_post_processed_nvidia_library() -> None:
    """libnvrtc.so.12 12.6.77: its PT_NOTE points at stale bytes and the real, 8-aligned
    ``.note.gnu.build-id`` sits near the end of the file, after the section header table
    (``readelf -n`` warns and prints no id). The streaming reader finds it through the
    section headers whatever the chunking; the oracle is the section pyelftools locates."""
    from elftools.elf.elffile import ELFFile

    from gpusbom.binary.buildid import BuildIdReader

    wheel = pinned_wheel(NVRTC_WHEEL, NVRTC_REQ, NVRTC_SHA, dest=CACHE / "wheels",
                         pip_args=LINUX_311)
    with zipfile.ZipFile(wheel) as z:
        data = z.read("nvidia/cuda_nvrtc/lib/libnvrtc.so.12")
    sec = ELFFile(io.BytesIO(data)).get_section_by_name(".note.gnu.build-id")
    raw = sec.data()
    assert raw[12:16] == b"GNU\0" and sec["sh_offset"] > len(data) - (1 << 20)
    want = raw[16:36].hex()
    assert build_id_from_head(data[: 64 << 10]) is None  # the program headers' note is stale
    for step in (1 << 20, 77777, 4 << 20, len(data)):
        r = BuildIdReader()
        for i in range(0, len(data), step):
            r.feed(data[i:i + step])
        assert r.close() == want, step
    m = load_bundled().lookup(build_id=want)
    assert m is not None and (m.product, m.version) == ("nvrtc", "12.6.77")


def test_a_file_shipped_unchanged_in_several_releases_is_not_identified() -> None:
    """NVIDIA re-ships some files byte for byte in later wheels (the bundled database holds
    such keys, listed in its coverage report): one of several releases is not exact, so the
    database identifies nothing by that key."""
    db = load_bundled()
    by_key: dict[str, set[str]] = {}
    for r in db.records:
        by_key.setdefault(r.sha256, set()).add(r.version)
    shared = [k for k, v in by_key.items() if len(v) > 1]
    assert shared  # e.g. cuFFT 11.2.3.18 and 11.2.3.61
    for k in shared:
        assert db.lookup(sha256=k) is None
