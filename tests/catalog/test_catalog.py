"""The product-identity catalog: the table loads, and every name form of a product reaches
the same advisory verdict (bundled records: NVIDIA CSAF 5594, 5687 and 5747, INTEL-SA-01072).

The package names are the ones the vendors' repositories publish: NVIDIA's CUDA repository
metapackage ``cuda-toolkit-12-4`` (developer.download.nvidia.com/compute/cuda/repos/
ubuntu2204/x86_64/), Intel's oneAPI APT repository ``intel-oneapi-mkl-2024.0``
(apt.repos.intel.com/oneapi), PyPI ``tritonserver``, ``tensorrt-cu12``, ``tensorrt-llm``."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpusbom import catalog
from gpusbom.advisories.db import TARGETS, load_bundled
from gpusbom.advisories.matcher import match
from gpusbom.model import Component, Evidence

DB = load_bundled()


def _verdicts(c: Component) -> dict[str, tuple[str, str | None]]:
    out = {}
    for f in match([c], DB):
        assert f.advisory is not None
        out[f.id] = (f.advisory.status, f.advisory.fixed_version)
    return out


def _pkg(eco: str, name: str, version: str, purl: str | None = None, cpe: str | None = None) -> Component:
    path = "/var/lib/dpkg/status" if eco == "deb" else None
    return Component(name=name, version=version, ecosystem=eco, purl=purl, cpe=cpe,
                     evidence=[Evidence("dpkg" if eco == "deb" else eco, "package-db", path)],
                     bom_ref=f"{eco}:{name}@{version}")


def test_table_loads_and_every_row_is_a_target() -> None:
    rows = catalog.products()
    assert len({r.id for r in rows}) == len(rows) >= 30
    assert set(TARGETS) == {r.id for r in rows}
    for r in rows:
        assert r.vendor and r.stack and r.name
        assert r.names or r.vendor_strings or r.collector, r.id


def test_malformed_table_is_one_clear_error() -> None:
    with pytest.raises(catalog.CatalogError, match="row 1 .*missing 'stack'"):
        catalog.load_text("- {id: x, vendor: V, name: N}\n")
    with pytest.raises(catalog.CatalogError, match="deb"):
        catalog.load_text("- {id: x, vendor: V, stack: s, name: N, deb: ['(']}\n")
    with pytest.raises(catalog.CatalogError, match="duplicate"):
        catalog.load_text("- {id: x, vendor: V, stack: s, name: N}\n" * 2)


def test_every_shipped_pattern_compiles() -> None:
    # the shipped table's patterns compile on first use (a scan needs few of them): here all
    for r in catalog.products():
        for key, pats in [*r.names.items(), ("vendor_strings", r.vendor_strings)]:
            for p in pats:
                assert p.rx.pattern == p.pattern, (r.id, key)


def _name_corpus(eco: str) -> list[str]:
    """Names around every pattern of one ecosystem: its literal starts with the usual
    package suffixes, the starts cut short, other cases, and non-ASCII look-alikes that
    case-insensitive matching folds (U+017F long s, U+212A Kelvin sign)."""
    import re

    out = {"", "a", "lib", "nvidia", "python3", "ſ", "K", "zlib1g", "libc6", "numpy", "torch"}
    for r in catalog.products():
        for p in r.names.get(eco, ()):
            alts = re.split(r"\|", p.pattern)
            # an optional vendor namespace first ("(nvidia/)?cuda"): with it and without
            alts += [re.sub(r"^\(([\w/-]+)\)\?", sub, a) for a in alts for sub in (r"\1", "")]
            for alt in alts:
                stem = re.split(r"[\\(\[?*+{]", alt.replace("\\.", "."))[0]
                for tail in ("", "1", "2", "12", "-12-4", "-dev", "-server", "-cu12", "-2024.2",
                             "-open", "_x", "/x", "/x/y", "x"):
                    out |= {stem + tail, stem[:-1] + tail, (stem + tail).upper(),
                            "nvidia/" + stem + tail, "intel/" + stem + tail}
                out |= {stem.replace("s", "ſ", 1), stem.replace("k", "\u212a", 1)}
    return sorted(out)


@pytest.mark.parametrize("eco", catalog.PACKAGE_KEYS)
def test_by_package_skips_only_patterns_a_name_cannot_match(eco: str) -> None:
    # by_package tests a pattern only where the name starts with one of its literal starts:
    # the same rows as full-matching every pattern of every row
    names = _name_corpus(eco)
    assert len(names) > 50
    hits = 0
    for name in names:
        n = catalog.normalise_name(eco, name) if name.strip() else name
        want = tuple(r for r in catalog.products() if name.strip() and r.matches(eco, name))
        assert catalog.by_package(eco, name) == want, (eco, name)
        for r in catalog.products():
            for p in r.names.get(eco, ()):
                if p.fullmatch(n):
                    assert p.may_match(n), (p.pattern, n)
        hits += bool(want)
    assert hits >= 3  # the corpus does reach the rows


def test_literal_prefixes() -> None:
    lp = catalog.literal_prefixes
    assert lp("libcuda1|libcuda-\\d+") == ("libcuda1", "libcuda-")
    assert lp("TensorRT(-dev)?") == ("tensorrt",)
    assert lp("cuda-compat(-\\d+-\\d+)?") == ("cuda-compat",)
    assert lp("abc?") == ("ab",) and lp("ab*x") == ("a",) and lp("ab+") == ("ab",)
    assert lp("a[|]b|cd") == ("a", "cd") and lp("x\\|y") == ("x",)
    assert lp("[]|]x|y") is None  # a set that starts with ]
    # an optional literal group first: both ways
    assert lp("(nvidia/)?cuda|(nvidia/)?tools") == ("nvidia/cuda", "cuda", "nvidia/tools", "tools")
    assert lp("(Intel/)?level-zero(-loader)?") == ("intel/level-zero", "level-zero")
    for unprefixed in ("(intel/)?(neo|igc)", "(a|b)?x", "(a)??x", "()?x", ".*nvidia", "a|",
                       "a{0,1}b", "(?i)x", "^x", "\\dx", "a)", "(a"):
        assert lp(unprefixed) is None, unprefixed


@pytest.mark.parametrize(("eco", "name", "want"), [
    ("deb", "cuda-toolkit-12-4", "cuda-toolkit"),
    ("rpm", "cuda-toolkit-12-4", "cuda-toolkit"),
    ("deb", "nvidia-cuda-toolkit", "cuda-toolkit"),
    ("deb", "intel-oneapi-mkl-2024.0", "intel-onemkl"),
    ("deb", "intel-oneapi-compiler-dpcpp-cpp-2024.2", "intel-dpcpp-compiler"),
    ("pypi", "mkl", "intel-onemkl"),
    ("pypi", "tritonserver", "triton-inference-server"),
    ("pypi", "tensorrt_cu12", "tensorrt"),
    ("deb", "libnvinfer10", "tensorrt"),
    ("pypi", "tensorrt-llm", "tensorrt-llm"),
    ("deb", "libnvidia-compute-550-server", "nvidia-driver"),
    ("rpm", "kmod-nvidia-open-dkms", "nvidia-driver"),
    ("deb", "nvidia-container-toolkit-base", "nvidia-container-toolkit"),
    ("deb", "amdgpu-dkms", "amdgpu-linux-driver"),
    ("deb", "rocm-core", "rocm"),
])
def test_package_names(eco: str, name: str, want: str) -> None:
    assert [r.id for r in catalog.by_package(eco, name)] == [want]


def test_unrelated_names_select_nothing() -> None:
    for eco, name in [("deb", "libc6"), ("pypi", "apex"), ("pypi", "triton"), ("deb", "cudf")]:
        assert catalog.by_package(eco, name) == (), name


def test_purls_cpes_and_vendor_strings() -> None:
    assert [r.id for r in catalog.by_purl("pkg:generic/nvidia/libcuda@550.54.15")] == ["nvidia-driver"]
    assert [r.id for r in catalog.by_purl("pkg:generic/nvidia-driver@550.54.15")] == ["nvidia-driver"]
    assert [r.id for r in catalog.by_purl(
        "pkg:golang/github.com/NVIDIA/nvidia-container-toolkit@v1.16.1")] == ["nvidia-container-toolkit"]
    assert [r.id for r in catalog.by_cpe("cpe:2.3:a:nvidia:cuda_toolkit:12.4:*:*:*:*:*:*:*")] == [
        "cuda-toolkit"]
    assert [r.id for r in catalog.by_cpe(
        "cpe:2.3:a:intel:oneapi_dpc\\+\\+\\/c\\+\\+_compiler:2024.2:*:*:*:*:*:*:*")] == [
        "intel-dpcpp-compiler"]
    # vendor product strings as CSAF / CVE records write them; specific rows first
    for text, vendor, want in [
        ("NVIDIA TensorRT-LLM", "NVIDIA", "tensorrt-llm"),
        ("TensorRT", "NVIDIA", "tensorrt"),
        ("NVIDIA Triton Inference Server", "NVIDIA", "triton-inference-server"),
        ("Intel(R) Data Center Graphics Driver for VMware ESXi", "Intel", "intel-data-center-gpu-driver-esxi"),
        ("Intel(R) oneAPI Math Kernel Library", "Intel", "intel-onemkl"),
        ("AMD Radeon Software for Linux", "AMD", "amdgpu-linux-driver"),
    ]:
        row = catalog.by_vendor_string(text, vendor)
        assert row is not None and row.id == want, text
    assert not catalog.get("intel-data-center-gpu-driver-esxi").linux


def test_versions_of_packages() -> None:
    assert catalog.product_version(catalog.get("cuda-toolkit"), "deb", "12.4.1-1") == "12.4.1"
    assert catalog.product_version(
        catalog.get("nvidia-driver"), "deb", "550.127.05-0ubuntu0.24.04.1") == "550.127.05"
    assert catalog.product_version(catalog.get("intel-onemkl"), "deb", "2024.0.0-49656") == "2024.0.0"


# -- the misses, matched now ----------------------------------------------------------


def test_cuda_toolkit_metapackage_deb() -> None:
    # NVIDIA-5594 CVE-2024-53870: "All versions up to CUDA Toolkit 12.8" (fixed 12.8)
    got = _verdicts(_pkg("deb", "cuda-toolkit-12-4", "12.4.1-1"))
    assert got["CVE-2024-53870"] == ("affected", "12.8")
    assert "CVE-2024-53870" not in _verdicts(_pkg("deb", "cuda-toolkit-12-8", "12.8.0-1"))


def test_intel_oneapi_deb_matches_like_the_wheel() -> None:
    # INTEL-SA-01072 CVE-2024-21766: oneMKL before 2024.1
    deb = _verdicts(_pkg("deb", "intel-oneapi-mkl-2024.0", "2024.0.0-49656"))
    wheel = _verdicts(_pkg("pypi", "mkl", "2024.0.0"))
    assert deb["CVE-2024-21766"] == wheel["CVE-2024-21766"] == ("affected", "2024.1")
    assert "CVE-2024-21766" not in _verdicts(_pkg("deb", "intel-oneapi-mkl-2024.1", "2024.1.0-691"))


def test_generic_driver_purl_from_another_tool() -> None:
    # NVIDIA-5747 CVE-2025-33219: R570 fixed in 570.211.01
    c = _pkg("generic", "libcuda", "570.195.03", purl="pkg:generic/nvidia/libcuda@570.195.03")
    c.evidence = [Evidence("cyclonedx", "sbom", None, None, "declared in other.cdx.json")]
    assert _verdicts(c)["CVE-2025-33219"] == ("affected", "570.211.01")
    c2 = _pkg("generic", "nvidia-driver", "570.211.01", purl="pkg:generic/nvidia-driver@570.211.01")
    assert "CVE-2025-33219" not in _verdicts(c2)


def test_pypi_tritonserver_server_version() -> None:
    # NVIDIA-5687 CVE-2025-23310: "All versions prior to 25.07"; r25.05 is server 2.58.0
    got = match([_pkg("pypi", "tritonserver", "2.58.0")], DB)
    f = next(f for f in got if f.id == "CVE-2025-23310")
    assert f.advisory is not None
    assert (f.advisory.status, f.advisory.fixed_version) == ("affected", "25.07")
    assert "server 2.58.0 is NGC release 25.05" in f.advisory.reason
    assert "CVE-2025-23310" not in _verdicts(_pkg("pypi", "tritonserver", "2.59.1"))


def test_tables_are_parsed_once_per_content(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # the package's YAML tables are kept parsed in the user cache, named by their content
    from importlib import resources

    from gpusbom import _tables
    from gpusbom.catalog import _yaml

    monkeypatch.setenv("GPUSBOM_CACHE_DIR", str(tmp_path))
    text = resources.files("gpusbom.catalog").joinpath("products.yaml").read_text("utf-8")
    calls: list[str] = []

    def parse(t: str) -> object:
        calls.append(t)
        return _yaml(t)

    first = _tables.cached_parse(text, parse)
    assert first == _yaml(text) and len(calls) == 1
    (cached,) = (tmp_path / "tables").iterdir()
    assert cached.stat().st_mode & 0o777 == 0o600
    assert _tables.cached_parse(text, parse) == first and len(calls) == 1  # from the cache
    # another text is another entry; a damaged entry is parsed again (and rewritten)
    assert _tables.cached_parse(text + "\n# edited\n", parse) == first and len(calls) == 2
    cached.write_bytes(b"not JSON")
    assert _tables.cached_parse(text, parse) == first and len(calls) == 3
    assert _tables.cached_parse(text, parse) == first and len(calls) == 3
    # a cache that cannot be written: parsed every time, same data
    monkeypatch.setenv("GPUSBOM_CACHE_DIR", "/proc/gpusbom-no-such-dir")
    assert _tables.cached_parse(text, parse) == first and len(calls) == 4


def test_derived_data_is_kept_per_content_and_code_as_json_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # what gpusbom's code derives (code=True) is kept named by the text and by that code;
    # only plain JSON data is kept: gpusbom's objects (catalog rows) are never stored, so a
    # table file cannot name code (issue #33)
    from gpusbom import _codeid, _tables, catalog

    monkeypatch.setenv("GPUSBOM_CACHE_DIR", str(tmp_path))
    text = "- {id: a, vendor: V, stack: s, name: A, pypi: [a-.*]}\n"
    calls: list[str] = []

    def derive(t: str) -> dict[str, list[int]]:
        calls.append(t)
        return {"a": [len(t)]}

    first = _tables.cached_parse(text, derive, code=True)
    again = _tables.cached_parse(text, derive, code=True)
    assert len(calls) == 1 and again == first and again is not first  # the second from the cache
    monkeypatch.setattr(_codeid, "code_fingerprint", lambda: "another code")
    _tables.cached_parse(text, derive, code=True)
    assert len(calls) == 2
    # rows (objects, tuples) are not JSON data: built every time, and nothing stored for them
    before = set((tmp_path / "tables").iterdir())

    def build(t: str) -> tuple[catalog.Product, ...]:
        calls.append(t)
        return catalog._shipped_rows(t)

    rows = _tables.cached_parse(text + "#\n", build, code=True)
    assert _tables.cached_parse(text + "#\n", build, code=True)[0].id == rows[0].id == "a"
    assert len(calls) == 4
    new = set((tmp_path / "tables").iterdir()) - before
    assert all(b"Product" not in p.read_bytes() for p in new)  # only the YAML parse, if any
    # the shipped table: the same rows as built without the cache
    catalog.products.cache_clear()
    try:
        assert [r.id for r in catalog.products()] == [r.id for r in catalog._rows(
            catalog.read_text("gpusbom.catalog", "products.yaml"), eager=False)]
    finally:
        catalog.products.cache_clear()


def test_by_purl_skips_parsing_only_what_cannot_match(monkeypatch: pytest.MonkeyPatch) -> None:
    # by_purl answers () without parsing a purl whose text holds none of its type's literal
    # starts: the same rows as parsing every purl, over purls built from each ecosystem's
    # name corpus in several spellings
    names = sorted({n for eco in ("deb", "rpm", "pypi", "conda") for n in _name_corpus(eco)
                    if n.strip() and "/" not in n})
    purls = []
    for n in names:
        purls += [f"pkg:deb/debian/{n}@1.0-1?arch=amd64&distro=debian-12",
                  f"pkg:rpm/fedora/{n}@1.0-1.fc40?arch=x86_64", f"pkg:pypi/{n}@1.0",
                  f"pkg:PyPI/{n.replace('-', '_')}@2", f"pkg:conda/{n}@1.0?channel=nvidia",
                  f"pkg://deb/ubuntu/{n}", f"pkg:deb/debian/{n}@1#sub/path",
                  f"pkg:deb/debian/{n}@1:2.38%2Bb1?arch=amd64&upstream=x%401", f"pkg:rpm/{n}/"]
    purls += ["pkg:deb/debian/libcuda%31@550", "pkg:pypi/tensor%72t", "pkg:deb/", "pkg:",
              "pkg:deb/debian/@1", "pkg:1deb/x/libcuda1", "pkg:deb/debian/libcuda1?bad key=1"]
    fast = [catalog.by_purl(p) for p in purls]
    monkeypatch.setattr(catalog, "_purl_cannot_match", lambda purl: False)
    slow = [catalog.by_purl(p) for p in purls]
    assert fast == slow
    assert sum(bool(x) for x in slow) > 50  # the corpus reaches the rows


@pytest.mark.parametrize("kind", ["distro", "pypi"])
def test_package_products_skip_only_names_that_cannot_match(kind: str) -> None:
    # packages.yaml's patterns are compiled when a name could match them (product_of): the
    # same answers as full-matching every compiled pattern in turn, over names built around
    # every pattern (other cases, cut short, look-alikes that case folding would join)
    import re

    from gpusbom.catalog import packages

    corpus: set[str] = {"", "a", "lib", "ſ", "K", "libc6", "numpy", "torch"}
    for e in packages.entries():
        for p in e.names.get(kind, ()):
            re.compile(p.pattern)  # every shipped pattern compiles
            for alt in p.pattern.split("|"):
                stem = re.split(r"[\\(\[?*+{.]", alt)[0]
                for tail in ("", "1", "-12", "550", "-server", "-cu12", "x", "-"):
                    corpus |= {stem + tail, stem[:-1] + tail, (stem + tail).upper(),
                               stem.replace("s", "ſ", 1) + tail}

    def eager(name: str) -> tuple[str, str] | None:
        n = catalog.normalise_name("pypi" if kind == "pypi" else "distro", name)
        for e in packages.entries():
            if any(re.fullmatch(p.pattern, n) for p in e.names.get(kind, ())):
                return (e.stack, n if e.product == packages.NAME else e.product)
        return None

    assert len(corpus) > 100
    got = {n: packages.product_of(kind, n) for n in sorted(corpus)}
    assert got == {n: eager(n) for n in sorted(corpus)}
    assert sum(v is not None for v in got.values()) > 20
