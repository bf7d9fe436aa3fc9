"""NPP and the CUDA runtime linked statically (#38): a real executable and a real shared
library, linked here with gcc against the static archives of Debian's ``nvidia-cuda-dev``
(CUDA 11.2.2 of Debian 11, 11.8.0 of Debian 12, 12.4.1 of Debian 13;
``fixtures/static_link.py``: pinned .deb by sha256, extracted without running any package
script, cached outside the repository, never run).

Ground truth is the package's own metadata, never the scanner's output: the component
versions ``nvidia-cuda-dev`` pins in its ``Depends`` (``libnppc12 (= 12.2.5.30~12.4.1-2)``,
``libcudart12 (= 12.4.127~12.4.1-2)``) and ``CUDART_VERSION`` in its ``cuda_runtime_api.h``.
NPP's ``NppLibraryVersion`` holds three of the release's four numbers and
``cudaRuntimeGetVersion`` two: those are what may be reported, nothing more, nothing else.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .dirscan import scan_dir

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fixtures import static_link  # noqa: E402

from gpusbom.binary.getters import read_getter  # noqa: E402
from gpusbom.fingerprints.active import load_bundled  # noqa: E402

APP = "/opt/vision/bin/app"
LIB = "/opt/vision/lib/libimageops.so"


@pytest.fixture(scope="module", params=sorted(static_link.CUDA_DEV))
def linked(request: pytest.FixtureRequest) -> static_link.Linked:
    try:
        return static_link.build(request.param)
    except static_link.LinkUnavailable as exc:
        pytest.skip(f"static link {request.param}: {exc}")


def _root(tmp: Path, files: dict[str, Path | bytes]) -> Path:
    root = tmp / "root"
    for dest, src in files.items():
        p = root / dest.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(src, bytes):
            p.write_bytes(src)
        else:
            shutil.copyfile(src, p)
        p.chmod(0o755)
    return root


def _named(doc: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [c for c in doc["components"] if c["name"] == name]


def _never_impossible(doc: dict[str, Any]) -> None:
    """No CUDA product version the release lists reject, and every NPP / cudart version a
    release (or a short form of one)."""
    idx = load_bundled().release_index()
    for c in doc["components"]:
        for name, version in [(c["name"], c.get("version"))] + [
            (p["name"], p.get("version")) for p in c.get("products") or []
        ]:
            check = idx.check(name, version)
            assert check is None or check.status != "rejected", (c["name"], name, version, check)
            if name in ("npp", "cudart") and version:
                assert check is not None and check.status == "release", (name, version, check)


def _short(version: str, parts: int) -> str:
    return ".".join(version.split(".")[:parts])


def test_truth_is_the_packages_own(linked: static_link.Linked) -> None:
    """The truth the other tests compare with: read from the package, consistent with
    itself (CUDART_VERSION is the runtime's major*1000 + minor*10)."""
    t = linked.truth
    assert t["package"] == f"nvidia-cuda-dev={linked.pin.version}"
    major, minor = (int(x) for x in t["cudart"].split(".")[:2])
    assert int(t["CUDART_VERSION"]) == major * 1000 + minor * 10
    assert len(t["npp"].split(".")) == 4  # NPP releases have four numbers
    # the package's own version names the same CUDA line (nvidia-cuda-dev 12.4.127~12.4.1-2,
    # 11.2.2-3+deb11u3)
    assert linked.pin.version.startswith(f"{major}.{minor}.")


def test_getters_in_the_linked_binaries(linked: static_link.Linked) -> None:
    """The decoder on the real linked bytes: nppGetLibVersion's pointer leads to the
    package's NPP release (three numbers), cudaRuntimeGetVersion stores CUDART_VERSION."""
    t = linked.truth
    want = tuple(int(x) for x in t["npp"].split(".")[:3])
    for path, table in ((linked.app, ".symtab"), (linked.shared, ".dynsym")):
        with open(path, "rb") as f:
            npp = read_getter(f, "nppGetLibVersion", kind="pointer")
            rt = read_getter(f, "cudaRuntimeGetVersion", kind="out", tables=(".symtab",))
        assert npp.error is None and npp.table == table, npp
        assert [c.words for c in npp.candidates] == [want], npp
        assert npp.candidates[0].insn.startswith("lea rax, [rip")
        assert rt.error is None and {c.value for c in rt.candidates} == {int(t["CUDART_VERSION"])}


def test_static_npp_and_cudart_are_components_of_their_binary(
    linked: static_link.Linked, tmp_path: Path
) -> None:
    t = linked.truth
    root = _root(tmp_path, {APP: linked.app, LIB: linked.shared})
    doc = scan_dir(root, tmp_path / "out.json", "cyclonedx-json", "spdx-json")
    npp = {c["properties"]["embedded-in"]: c for c in _named(doc, "npp")}
    cudart = {c["properties"]["embedded-in"]: c for c in _named(doc, "cudart")}
    assert set(npp) == set(cudart) == {APP, LIB}, (npp, cudart)
    for where in (APP, LIB):
        n, r = npp[where], cudart[where]
        # NPP: the three numbers its version struct holds, of the package's release
        assert n["version"] == _short(t["npp"], 3), (n["version"], t["npp"])
        assert r["version"] == _short(t["cudart"], 2), (r["version"], t["cudart"])
        for c, conf in ((n, "high"), (r, "medium")):
            p = c["properties"]
            assert p["linkage"] == "static"
            assert p["identification-method"] == "elf-symbol"
            assert p["identification-confidence"] == conf
            assert p["release-check"] == "release"
            assert "rejected-versions" not in p
        assert "nppGetLibVersion" in json.dumps(n.get("evidence") or n["properties"])
    assert npp[APP]["properties"]["embedded-in-executable"] == APP
    # the binaries themselves stay what they are (no NPP or cudart of their own)
    assert not [c for c in doc["components"] if c["name"] == "npp"
                and c["properties"].get("linkage") != "static"]
    _never_impossible(doc)

    cdx = json.loads((tmp_path / "out.cyclonedx-json").read_text())
    [c] = [c for c in cdx["components"] if c["name"] == "npp"
           and c.get("version") == _short(t["npp"], 3)
           and any(p["value"] == APP for p in c.get("properties") or [])]
    props = {p["name"]: p["value"] for p in c["properties"]}
    assert props["gpusbom:linkage"] == "static"
    ident = c["evidence"]["identity"]
    ident = ident[0] if isinstance(ident, list) else ident
    assert float(ident["confidence"]) == 0.8
    spdx = (tmp_path / "out.spdx-json").read_text()
    assert "embedded-in" in spdx and _short(t["npp"], 3) in spdx


def test_stripped_executable_reports_no_npp_version(
    linked: static_link.Linked, tmp_path: Path
) -> None:
    """``strip`` drops .symtab: the executable's getters cannot be found, so no NPP or
    cudart version is reported (none is invented); the library keeps NPP's API in .dynsym."""
    if shutil.which("strip") is None:
        pytest.skip("no strip")
    app = tmp_path / "app"
    shutil.copyfile(linked.app, app)
    subprocess.run(["strip", "--strip-all", str(app)], check=True)
    lib = tmp_path / "libimageops.so"
    shutil.copyfile(linked.shared, lib)
    subprocess.run(["strip", "--strip-all", str(lib)], check=True)
    root = _root(tmp_path, {APP: app, LIB: lib})
    doc = scan_dir(root, tmp_path / "out.json")
    in_app = [c for c in doc["components"] if c["name"] in ("npp", "cudart")
              and c["properties"].get("embedded-in") == APP]
    assert not [c for c in in_app if c.get("version")], in_app
    [n] = [c for c in _named(doc, "npp") if c["properties"].get("embedded-in") == LIB]
    assert n["version"] == _short(linked.truth["npp"], 3)
    _never_impossible(doc)


def _patched(data: bytes, words: tuple[int, int, int]) -> bytes:
    """``data`` with the NppLibraryVersion the getter points to overwritten."""
    import io

    from elftools.elf.elffile import ELFFile

    r = read_getter(io.BytesIO(data), "nppGetLibVersion", kind="pointer")
    [cand] = r.candidates
    elf = ELFFile(io.BytesIO(data))
    for sec in elf.iter_sections():
        if sec["sh_addr"] <= cand.value < sec["sh_addr"] + sec["sh_size"] and \
                sec["sh_type"] == "SHT_PROGBITS":
            off = sec["sh_offset"] + cand.value - sec["sh_addr"]
            out = bytearray(data)
            out[off : off + 12] = b"".join(w.to_bytes(4, "little", signed=True) for w in words)
            return bytes(out)
    raise AssertionError("no section holds goVersion")


@pytest.mark.parametrize("words", [(12, 7, 0), (1, 2, 2), (0, 0, 0)])
def test_impossible_npp_version_is_never_reported(
    linked: static_link.Linked, tmp_path: Path, words: tuple[int, int, int]
) -> None:
    """The same executable with its version struct patched: NPP 12.7.0 was never released
    (the lists name every NPP release from 12.0.0.30 on: rejected, kept as evidence),
    1.2.2 and 0.0.0 are no NPP version at all (the rule rejects them). None is reported."""
    data = _patched(linked.app.read_bytes(), words)
    root = _root(tmp_path, {APP: data})
    doc = scan_dir(root, tmp_path / "out.json")
    npp = [c for c in _named(doc, "npp") if c["properties"].get("embedded-in") == APP]
    assert not [c for c in npp if c.get("version")], npp
    if words == (12, 7, 0):
        [c] = npp
        assert "12.7.0" in c["properties"]["rejected-versions"]
    # the runtime beside it is untouched
    [rt] = [c for c in _named(doc, "cudart") if c["properties"].get("embedded-in") == APP]
    assert rt["version"] == _short(linked.truth["cudart"], 2)
    _never_impossible(doc)


@pytest.mark.parametrize("where", ["bss", "nowhere"])
def test_pointer_that_leads_nowhere_gives_no_words(
    linked: static_link.Linked, tmp_path: Path, where: str
) -> None:
    """The getter's ``lea`` patched to point into ``.bss`` (zero until the program runs) or
    past every section: no words are read, a note says why, and no NPP version is
    reported."""
    import io

    from elftools.elf.elffile import ELFFile

    data = linked.app.read_bytes()
    r = read_getter(io.BytesIO(data), "nppGetLibVersion", kind="pointer")
    [cand] = r.candidates
    assert r.address is not None
    elf = ELFFile(io.BytesIO(data))
    text = next(s for s in elf.iter_sections()
                if s["sh_addr"] <= r.address < s["sh_addr"] + s["sh_size"])
    at = text["sh_offset"] + cand.address - text["sh_addr"]
    assert data[at : at + 3] == b"\x48\x8d\x05"  # lea rax, [rip + disp32]
    if where == "bss":
        target = elf.get_section_by_name(".bss")["sh_addr"] + 16
    else:
        target = max(s["sh_addr"] + s["sh_size"] for s in elf.iter_sections()) + 0x100000
    disp = target - (cand.address + 7)
    bad = bytearray(data)
    bad[at + 3 : at + 7] = disp.to_bytes(4, "little", signed=True)
    r2 = read_getter(io.BytesIO(bytes(bad)), "nppGetLibVersion", kind="pointer")
    assert [c.value for c in r2.candidates] == [target] and r2.candidates[0].words == ()
    assert any(("NOBITS" if where == "bss" else "no allocated section") in n for n in r2.notes)
    doc = scan_dir(_root(tmp_path, {APP: bytes(bad)}), tmp_path / "out.json")
    assert not [c for c in _named(doc, "npp") if c.get("version")]


LIBNPPC12 = static_link.Pin(
    "deb", "libnppc12", "12.2.5.30~12.4.1-2",
    "pool/non-free/n/nvidia-cuda-toolkit/libnppc12_12.2.5.30~12.4.1-2_amd64.deb",
    "cc8802caf13faca61a2b722759fac0ecbc589ae26517c405733e4b740c48e092", 398656, "amd64",
)  # fmt: skip


def test_shared_libnppc_keeps_its_full_version(tmp_path: Path) -> None:
    """NPP's own shared core (Debian 13's libnppc12): the same getter row reads it as NPP's
    own library, not as an embedded copy. The installed ``libnppc.so.12.2.5.30`` keeps the
    full version its file name gives (the getter's 12.2.5 does not shorten it); a copy
    renamed ``libnppc.so.12`` (a wheel's name) gets 12.2.5 from the getter instead of the
    soname's bare 12. Truth: the package's version (``12.2.5.30~12.4.1-2``)."""
    try:
        deb = static_link.fetch(LIBNPPC12, base_uris=[static_link.DEBIAN])
    except static_link.PinError as exc:
        pytest.skip(f"cannot obtain {LIBNPPC12.filename}: {exc}")
    version = LIBNPPC12.version.split("~")[0]
    name = f"libnppc.so.{version}"
    out = tmp_path / "x"
    out.mkdir()
    static_link._extract(deb, out, [f"{static_link.LIBDIR}/{name}"])
    real = out / static_link.LIBDIR / name
    root = _root(tmp_path, {f"/usr/lib/x86_64-linux-gnu/{name}": real,
                            "/opt/wheel/nvidia/npp/lib/libnppc.so.12": real})
    doc = scan_dir(root, tmp_path / "out.json")
    npp = {c["properties"]["location"]: c for c in _named(doc, "npp")}
    assert npp["/usr"]["version"] == version
    renamed = npp["/opt/wheel/nvidia/npp"]
    assert renamed["version"] == _short(version, 3)
    assert renamed["properties"]["version-method"] == "elf-symbol"
    assert "linkage" not in renamed["properties"]  # NPP's own library, not a static copy
    _never_impossible(doc)
