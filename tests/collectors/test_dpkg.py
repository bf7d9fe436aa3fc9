"""dpkg parser tests on real data: a slice of this machine's own dpkg database,
taken at test time (not committed), with dpkg-query as the oracle."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpusbom.collectors.dpkg import (
    DebPackage,
    deb_purl,
    installed_versions,
    parse_dep5_licenses,
    parse_dpkg_status,
    parse_relation_names,
)

HOST_STATUS = Path("/var/lib/dpkg/status")
needs_dpkg = pytest.mark.skipif(
    not HOST_STATUS.is_file() or shutil.which("dpkg-query") is None,
    reason="needs a Debian-family host with dpkg-query and /var/lib/dpkg/status",
)

PRESENT = {"installed", "triggers-pending", "triggers-awaited", "half-configured", "unpacked",
           "half-installed"}


def _stanzas(text: str) -> list[str]:
    return [s.strip("\n") + "\n" for s in text.split("\n\n") if s.strip()]


def _dpkg_query(admindir: Path, fmt: str) -> list[str]:
    r = subprocess.run(
        ["dpkg-query", f"--admindir={admindir}", "-W", "-f", fmt],
        capture_output=True, text=True, check=True,
    )
    return [line for line in r.stdout.splitlines() if line]


@pytest.fixture(scope="module")
def status_slice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An admindir holding every 7th stanza of the host's status file, plus the libc6
    stanza, with one package turned into 'deinstall ok config-files'."""
    stanzas = _stanzas(HOST_STATUS.read_text(encoding="utf-8", errors="replace"))
    picked = stanzas[::7]
    picked += [s for s in stanzas if s.startswith("Package: libc6\n")]
    # a removed-but-configured package must not be reported
    victim = picked[1]
    lines = victim.splitlines()
    lines = [("Status: deinstall ok config-files" if ln.startswith("Status:") else ln)
             for ln in lines]
    picked[1] = "\n".join(lines) + "\n"
    d = tmp_path_factory.mktemp("admindir")
    (d / "updates").mkdir()
    (d / "info").mkdir()
    (d / "status").write_text("\n".join(picked), encoding="utf-8")
    return d


@needs_dpkg
def test_status_slice_matches_dpkg_query(status_slice: Path) -> None:
    pkgs, problems = parse_dpkg_status((status_slice / "status").read_bytes())
    assert problems == []
    oracle = set()
    for line in _dpkg_query(status_slice, "${db:Status-Status} ${Package} ${Version}\n"):
        state, name, version = line.split(" ", 2)
        if state in PRESENT:
            oracle.add((name, version))
    mine = {(p.name, p.version) for p in pkgs}
    assert len(oracle) > 20
    assert mine == oracle
    # the config-files package is known to dpkg but not reported
    all_names = {ln.split(" ")[1] for ln in _dpkg_query(status_slice, "${db:Status-Status} ${Package}\n")}
    assert len(all_names) == len(mine) + 1


@needs_dpkg
def test_source_and_arch_match_dpkg_query(status_slice: Path) -> None:
    pkgs, _ = parse_dpkg_status((status_slice / "status").read_bytes())
    oracle = {}
    for line in _dpkg_query(
        status_slice, "${Package} ${Architecture} ${source:Package} ${source:Version}\n"
    ):
        name, arch, src, srcver = line.split(" ")
        oracle[name] = (arch, src, srcver)
    for p in pkgs:
        assert (p.architecture, p.source, p.source_version) == oracle[p.name], p.name


@needs_dpkg
def test_full_host_database_matches_dpkg_query() -> None:
    pkgs, problems = parse_dpkg_status(HOST_STATUS.read_bytes())
    assert problems == []
    r = subprocess.run(
        ["dpkg-query", "-W", "-f", "${db:Status-Status} ${Package}:${Architecture} ${Version}\n"],
        capture_output=True, text=True, check=True,
    )
    oracle = set()
    for line in r.stdout.splitlines():
        state, key, version = line.split(" ", 2)
        if state in PRESENT:
            oracle.add((key, version))
    assert {(f"{p.name}:{p.architecture}", p.version) for p in pkgs} == oracle


@needs_dpkg
def test_libc6_fields(status_slice: Path) -> None:
    pkgs, _ = parse_dpkg_status((status_slice / "status").read_bytes())
    libc = next(p for p in pkgs if p.name == "libc6")
    assert libc.source == "glibc"
    assert libc.maintainer and "@" in libc.maintainer
    assert libc.installed_size and libc.installed_size.isdigit()
    assert libc.description and "\n" not in libc.description
    assert "libc6" not in libc.depends


def test_status_states_and_status_d_semantics() -> None:
    text = (
        "Package: a\nStatus: install ok installed\nVersion: 1:2.0-1\nArchitecture: amd64\n\n"
        "Package: b\nStatus: deinstall ok config-files\nVersion: 1\n\n"
        "Package: c\nStatus: purge ok not-installed\n\n"
        "Package: d\nStatus: install ok unpacked\nVersion: 3\n\n"
        "Package: e\nVersion: 4\n\n"
        "Package: f\nStatus: install ok installed\n\n"
    )
    pkgs, problems = parse_dpkg_status(text)
    assert [(p.name, p.version, p.status) for p in pkgs] == [
        ("a", "1:2.0-1", "installed"),
        ("d", "3", "unpacked"),
    ]
    assert problems == ["package f has no Version"]
    # distroless status.d: a stanza without Status is installed
    pkgs, _ = parse_dpkg_status(text, require_installed=False)
    assert [p.name for p in pkgs] == ["a", "d", "e"]
    assert installed_versions(text) == {("a", "amd64"): "1:2.0-1", ("d", ""): "3"}


def test_relation_names() -> None:
    assert parse_relation_names(
        "libc6 (>= 2.34), libgcc-s1 | libgcc1, perl:any, python3 (<< 3.12), , libstdc++6"
    ) == ["libc6", "libgcc-s1", "perl", "python3", "libstdc++6"]
    assert parse_relation_names(None) == []


def test_source_field_with_version() -> None:
    text = "Package: libssl3\nStatus: install ok installed\nVersion: 3.0.11-1~deb12u2\nSource: openssl (3.0.11-1~deb12u1)\n"
    (p,), _ = parse_dpkg_status(text)
    assert (p.source, p.source_version) == ("openssl", "3.0.11-1~deb12u1")
    # upstream=SOURCE@VERSION, as Syft writes it (Debian/OSV key advisories by source)
    assert deb_purl(p, {"ID": "debian", "VERSION_ID": "12"}) == (
        "pkg:deb/debian/libssl3@3.0.11-1~deb12u2?distro=debian-12"
        "&upstream=openssl%403.0.11-1~deb12u1"
    )
    same = "Package: gcc-12-base\nStatus: install ok installed\nVersion: 12.2.0-14\nSource: gcc-12\n"
    (g,), _ = parse_dpkg_status(same)
    assert deb_purl(g, {}).endswith("?upstream=gcc-12")


def test_purl() -> None:
    p = DebPackage(name="libc6", version="2.36-9+deb12u4", architecture="amd64")
    assert deb_purl(p, {"ID": "debian", "VERSION_ID": "12"}) == (
        "pkg:deb/debian/libc6@2.36-9%2Bdeb12u4?arch=amd64&distro=debian-12"
    )
    u = DebPackage(name="libcudnn9-cuda-12", version="9.1.0.70-1", architecture="amd64")
    assert deb_purl(u, {"ID": "ubuntu", "VERSION_ID": "22.04"}) == (
        "pkg:deb/ubuntu/libcudnn9-cuda-12@9.1.0.70-1?arch=amd64&distro=ubuntu-22.04"
    )
    e = DebPackage(name="x", version="1:2.0", architecture=None)
    assert deb_purl(e, {}) == "pkg:deb/debian/x@1:2.0"


@pytest.mark.skipif(not os.path.isdir("/usr/share/doc"), reason="no /usr/share/doc")
def test_dep5_on_host_copyright_files() -> None:
    found = 0
    for d in sorted(Path("/usr/share/doc").iterdir())[:400]:
        f = d / "copyright"
        if not f.is_file():
            continue
        text = f.read_text(encoding="utf-8", errors="replace")
        lics = parse_dep5_licenses(text)
        first = text.lstrip().split("\n", 1)[0]
        if first.startswith("Format:") and (
            "copyright-format" in first or "dep5" in first.lower()
        ):
            found += 1
            assert lics, f
            assert all("\n" not in x for x in lics)
        else:
            assert lics == []
    if found == 0:
        pytest.skip("no machine-readable copyright files on this host")


def test_dep5_minimal() -> None:
    text = (
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
        "Upstream-Name: x\n\n"
        "Files: *\nCopyright: 2020 A\nLicense: GPL-2+\n\n"
        "Files: lib/*\nCopyright: 2020 B\nLicense: MIT\n\n"
        "License: GPL-2+\n This program is free software...\n"
    )
    assert parse_dep5_licenses(text) == ["GPL-2+", "MIT"]
    assert parse_dep5_licenses("This is free software.\nLicense: GPL\n") == []
