"""``collectors/_pkgdb.plain_purl`` writes the same purl as packageurl-python (the oracle) on
every package of this machine's and the host fixtures' dpkg status files and on every Python
distribution of the host fixtures, and declines (None) the parts packageurl would change."""

from __future__ import annotations

from pathlib import Path

import pytest
from packageurl import PackageURL

from gpusbom.collectors._pkgdb import distro_purl, plain_purl
from gpusbom.collectors.dpkg import parse_dpkg_status

ROOT = Path(__file__).resolve().parents[2]
STATUS = [
    Path("/var/lib/dpkg/status"),
    ROOT / "fixtures/hosts/h200/var/lib/dpkg/status",
    ROOT / "fixtures/hosts/cpu-only/var/lib/dpkg/status",
]


def _oracle(t: str, ns: str | None, name: str, ver: str | None, q: dict[str, str]) -> str:
    return PackageURL(type=t, namespace=ns, name=name, version=ver, qualifiers=q).to_string()


@pytest.mark.parametrize("path", STATUS, ids=str)
def test_real_packages(path: Path) -> None:
    pkgs, _ = parse_dpkg_status(path.read_bytes())
    assert len(pkgs) > 50
    fast = 0
    for p in pkgs:
        for t in ("deb", "rpm"):
            q = {"arch": p.architecture or "", "upstream": f"{p.source}@{p.source_version}",
                 "distro": "debian-12"}
            q = {k: v for k, v in q.items() if v}
            got = plain_purl(t, "debian", p.name, p.version, q)
            if got is not None:
                fast += 1
                assert got == _oracle(t, "debian", p.name, p.version, q)
    assert fast > len(pkgs)  # the shortcut is taken for the common case


ODD = [
    ("deb", "debian", "a b", "1", {}),
    ("deb", "Debian", "Name", "1:2.3+dfsg-1~deb12u1", {"arch": "amd64"}),
    ("deb", "debian", "a/b", "1", {}),
    ("deb", "debian", "a", " 1 ", {}),
    ("deb", "debian", "a", "1%2", {}),
    ("deb", "debian", "a", "1", {"Arch": "x"}),
    ("deb", "debian", "a", "1", {"arch": "x y"}),
    ("deb", "debian", "a", "1", {"upstream": "src@1.0+b1", "distro": "ubuntu-22.04"}),
    ("deb", "debian", "ü", "1", {}),
    ("deb", "debian", "a", "1#2?3&4=5", {}),
    ("deb", None, "a", None, {}),
    ("apk", "alpine", "Name", "1", {}),
    ("rpm", "redhat", "kernel", "0:5.14.0-1.el9", {"arch": "x86_64", "epoch": "0"}),
    ("pypi", None, "torch", "2.5.1+cu124", {}),
    ("pypi", None, "Torch", "2.5.1", {}),
    ("pypi", None, "typing_extensions", "4.12.2", {}),
    ("pypi", None, "x", "1!2.0", {}),
    ("pypi", None, "x", "1.0@rc1", {}),
    ("pypi", "ns", "x", "1", {}),
    ("pypi", None, "x", "1", {"arch": "x"}),
    ("pypi", None, "nvidia-cublas-cu12", None, {}),
]


@pytest.mark.parametrize("parts", ODD, ids=range(len(ODD)))
def test_odd_parts(parts: tuple[str, str | None, str, str | None, dict[str, str]]) -> None:
    t, ns, name, ver, q = parts
    got = plain_purl(t, ns, name, ver, q)
    if got is not None:
        assert got == _oracle(t, ns, name, ver, q)
    assert distro_purl(t, ns, name, ver, {}, **q) == _oracle(t, ns, name, ver, q)


def test_real_python_distributions() -> None:
    """Every dist-info of the host fixtures (a torch venv among them): the python
    collector's purl is packageurl's, and the shortcut is taken."""
    from gpusbom.collectors.python import parse_core_metadata, pypi_purl

    metas = sorted((ROOT / "fixtures/hosts").glob("**/*.dist-info/METADATA"))
    assert len(metas) > 50
    fast = 0
    for meta in metas:
        dist = parse_core_metadata(meta.read_text(encoding="utf-8", errors="replace"))
        want = _oracle("pypi", None, dist.canonical_name, dist.version, {})
        assert pypi_purl(dist) == want
        fast += plain_purl("pypi", None, dist.canonical_name, dist.version, {}) is not None
    assert fast == len(metas)
