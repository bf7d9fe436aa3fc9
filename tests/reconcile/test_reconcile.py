"""``gpusbom.reconcile``: which components are compared and how keys and versions are
normalised (the end-to-end cases against a registry are in tests/registry/test_attachments)."""

from __future__ import annotations

from gpusbom.model import Component, Evidence, ScanResult, Target
from gpusbom.reconcile import reconcile, render_table


def result(*comps: Component) -> ScanResult:
    return ScanResult(target=Target(kind="image", reference="img:1"), components=list(comps))


def c(name: str, version: str | None, purl: str | None = None, eco: str = "",
      path: str | None = None) -> Component:
    ev = [Evidence("python", "package-metadata", path)] if path else []
    return Component(name=name, version=version, purl=purl, ecosystem=eco, evidence=ev)


def test_names_versions_and_what_is_compared() -> None:
    declared = result(
        c("PyYAML", "6.0", "pkg:pypi/PyYAML@6.0"),  # PEP 503 name, PEP 440 version
        c("ruamel_yaml", "0.18", "pkg:pypi/ruamel_yaml@0.18"),
        c("libc6", "2.36-9", "pkg:deb/ubuntu/libc6@2.36-9"),  # namespace not compared
        c("app", "1", "pkg:oci/app@sha256%3Aab"),  # an image, not a package: left out
        c("cuda-toolkit", "12.4.1", "pkg:generic/nvidia/cuda-toolkit@12.4.1"),  # left out
        c("/usr/bin/x", None),  # a file entry of another tool: left out
    )
    observed = result(
        c("pyyaml", "6.0.0", "pkg:pypi/pyyaml@6.0.0", path="/site/PyYAML-6.0.dist-info/METADATA"),
        c("ruamel.yaml", "0.18.1", "pkg:pypi/ruamel.yaml@0.18.1", path="/site/r/METADATA"),
        c("libc6", "2.36-9", "pkg:deb/debian/libc6@2.36-9"),
        c("numpy", "2.1.0", None, eco="pypi", path="/site/numpy/METADATA"),  # no purl
        c("cuda-toolkit", "12.8.0", "pkg:generic/nvidia/cuda-toolkit@12.8.0"),
    )
    r = reconcile(declared, observed, declared_source="sbom.json")
    assert (r.declared_count, r.observed_count, r.matched) == (3, 4, 2)
    assert [(d.kind, d.ecosystem, d.name, d.declared, d.observed, d.paths)
            for d in r.differences] == [
        ("undeclared", "pypi", "numpy", (), ("2.1.0",), ("/site/numpy/METADATA",)),
        ("version-mismatch", "pypi", "ruamel.yaml", ("0.18",), ("0.18.1",),
         ("/site/r/METADATA",)),
    ]  # fmt: skip
    assert not r.agrees
    text = render_table(r)
    assert "1 declared-absent" not in text and "1 undeclared, 1 version-mismatch" in text


def test_several_versions_of_one_package() -> None:
    declared = result(c("six", "1.16.0", "pkg:pypi/six@1.16.0"))
    observed = result(c("six", "1.16.0", "pkg:pypi/six@1.16.0"),
                      c("six", "1.17.0", "pkg:pypi/six@1.17.0"))
    r = reconcile(declared, observed, declared_source="s")
    assert [(d.kind, d.declared, d.observed) for d in r.differences] == [
        ("version-mismatch", ("1.16.0",), ("1.16.0", "1.17.0"))]
    same = reconcile(observed, observed, declared_source="s")
    assert same.agrees and "agrees" in render_table(same)
    assert same.to_dict()["summary"] == {"matched": 1, "declared-absent": 0, "undeclared": 0,
                                         "version-mismatch": 0}
