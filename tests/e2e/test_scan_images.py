"""End-to-end scans of the real fixture images (fixtures/build.py), through the CLI.

Covers the foundation issue's acceptance: the same image through every
source gives the same components; the multi-layer image reports only what the
final filesystem holds, each package with the layer that introduced it; every
SBOM validates against its official schema and matches a golden file.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fixtures.build import FixturePaths, ensure
from fixtures.fetch import cache_root

GOLDEN = Path(__file__).parent / "golden"
EPOCH = "1700000000"


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpusbom", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SOURCE_DATE_EPOCH": EPOCH, **(env or {})},
    )


def scan_json(ref: str, tmp_path: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    out = tmp_path / f"scan-{abs(hash(ref))}.json"
    proc = run_cli("scan", "--image", ref, "-q", "-o", f"json={out}", env=env)
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def component_set(doc: dict[str, Any]) -> set[tuple[Any, ...]]:
    return {
        (
            c["name"],
            c["version"],
            c["type"],
            c["purl"],
            tuple((e["path"], e["layer"]) for e in c["evidence"]),
        )
        for c in doc["components"]
    }


@pytest.fixture(scope="module")
def demo() -> FixturePaths:
    return ensure("demo")


@pytest.fixture(scope="module")
def multilayer() -> FixturePaths:
    return ensure("multilayer")


def test_same_components_from_every_source(
    demo: FixturePaths, tmp_path: Path, docker_load: Any, docker_engine: str
) -> None:
    docker_load(demo.docker_archive)
    refs = {
        "oci": demo.oci_ref,
        "oci-archive": f"oci-archive:{demo.oci_archive}",
        "docker-archive": f"docker-archive:{demo.docker_archive}",
        "bare-path": str(demo.docker_archive),
        "docker": demo.tag,  # exactly as a user types it, from the Docker Engine
    }
    docs = {
        name: scan_json(ref, tmp_path, env={"DOCKER_HOST": docker_engine})
        for name, ref in refs.items()
    }
    baseline = component_set(docs["oci"])
    assert len(baseline) >= 12
    for name, doc in docs.items():
        assert component_set(doc) == baseline, name
        assert [la["diff_id"] for la in doc["target"]["layers"]] == [
            la["diff_id"] for la in docs["oci"]["target"]["layers"]
        ], name
        assert doc["target"]["env"]["CUDA_VERSION"] == "12.4.1", name
    assert docs["docker"]["target"]["source"] == "docker"
    assert demo.tag in docs["docker"]["target"]["tags"]
    # what the demo image really holds, from its pinned packages
    found = {(c[0], c[1]) for c in baseline}
    for want in [
        ("libamdhip64-5", "5.2.3-8"),
        ("pocl-opencl-icd", "3.1-3+deb12u1"),
        ("libze1", "1.8.12-1"),
        ("nvidia-cuda-runtime-cu12", "12.4.127"),
        ("nvidia-cuda-runtime", "13.0.96"),
        ("debian", "12"),
    ]:
        assert want in found, want


def test_multilayer_reports_only_the_final_filesystem(
    multilayer: FixturePaths, tmp_path: Path
) -> None:
    exp = multilayer.load_expectations()
    doc = scan_json(multilayer.oci_ref, tmp_path)
    diff_ids = [la["diff_id"] for la in doc["target"]["layers"]]
    by_name: dict[str, list[dict[str, Any]]] = {}
    for c in doc["components"]:
        by_name.setdefault(c["name"], []).append(c)

    present = exp["packages"]
    assert present, "expectations list no packages"
    for pkg in present:
        comps = by_name.get(pkg["name"], [])
        assert [c["version"] for c in comps] == [pkg["version"]], pkg
        # the layer that introduced this version, not merely the layer of the database file
        assert comps[0]["evidence"][0]["layer"] == diff_ids[pkg["layer"]], pkg
    for gone in exp["absent_packages"]:
        versions = [c["version"] for c in by_name.get(gone["name"], [])]
        assert gone["version"] not in versions, gone
    # the upgraded deb and wheel come from layer 1, the untouched ones from layer 0
    layers = {c["name"]: diff_ids.index(c["evidence"][0]["layer"]) for c in doc["components"]}
    assert layers["unzip"] == 1 and layers["six"] == 1 and layers["base-files"] == 0


def _normalise(text: str) -> str:
    text = text.replace(str(cache_root().resolve()), "<FIXTURES>")
    text = text.replace(str(cache_root()), "<FIXTURES>")
    from gpusbom import __version__

    text = re.sub(r"urn:uuid:[0-9a-f-]{36}", "urn:uuid:<SERIAL>", text)
    text = re.sub(r"gpusbom\.dev/spdx/[^\s\"<]*[0-9a-f-]{36}", "gpusbom.dev/spdx/<NAMESPACE>", text)
    text = text.replace(f'"{__version__}"', '"<VERSION>"').replace(
        f"gpusbom-{__version__}", "gpusbom-<VERSION>"
    )
    return text


FORMATS = {
    "cyclonedx-json": "cdx.json",
    "cyclonedx-xml": "cdx.xml",
    "spdx-json": "spdx.json",
    "spdx-tag-value": "spdx",
    "json": "json",
}


def _validate(fmt: str, path: Path, cdx_version: str) -> None:
    if fmt.startswith("cyclonedx"):
        from cyclonedx.schema import OutputFormat, SchemaVersion
        from cyclonedx.validation import make_schemabased_validator

        sv = {"1.5": SchemaVersion.V1_5, "1.6": SchemaVersion.V1_6, "1.7": SchemaVersion.V1_7}[
            cdx_version]
        of = OutputFormat.JSON if fmt.endswith("json") else OutputFormat.XML
        errors = make_schemabased_validator(of, sv).validate_str(path.read_text())
        assert errors is None, f"{path}: {errors}"
    elif fmt.startswith("spdx"):
        from spdx_tools.spdx.parser.parse_anything import parse_file
        from spdx_tools.spdx.validation.document_validator import validate_full_spdx_document

        doc = parse_file(str(path))
        assert validate_full_spdx_document(doc) == [], path
        if fmt == "spdx-json":  # and the official SPDX 2.3 JSON schema (pyspdxtools does not)
            import jsonschema

            schema_file = Path(__file__).parents[1] / "writers" / "schemas" / "spdx-2.3.schema.json"
            schema = json.loads(schema_file.read_text())
            errors = list(jsonschema.Draft7Validator(schema).iter_errors(json.loads(path.read_text())))
            assert errors == [], f"{path}: {errors[:3]}"


@pytest.mark.parametrize("cdx_version", ["1.6", "1.5", "1.7"])
def test_sboms_validate_and_match_golden(
    demo: FixturePaths, tmp_path: Path, cdx_version: str
) -> None:
    outs = {fmt: tmp_path / f"demo.{ext}" for fmt, ext in FORMATS.items()}
    args = ["scan", "--image", demo.oci_ref, "-q", "--cyclonedx-version", cdx_version]
    for fmt, path in outs.items():
        args += ["-o", f"{fmt}={path}"]
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    missing = []
    for fmt, path in outs.items():
        _validate(fmt, path, cdx_version)
        if cdx_version != "1.6" and not fmt.startswith("cyclonedx"):
            continue
        if cdx_version == "1.7":
            continue  # validated above; its content is 1.6's (the writers' goldens hold 1.7)
        suffix = FORMATS[fmt].replace("cdx.", "cdx15.") if cdx_version == "1.5" else FORMATS[fmt]
        golden = GOLDEN / f"demo.{suffix}"
        got = _normalise(path.read_text())
        if os.environ.get("GPUSBOM_UPDATE_GOLDEN") == "1" or not golden.exists():
            GOLDEN.mkdir(exist_ok=True)
            golden.write_text(got)
            if os.environ.get("GPUSBOM_UPDATE_GOLDEN") != "1":
                missing.append(golden.name)
            continue
        assert got == golden.read_text(), f"{fmt} differs from {golden}"
    assert not missing, f"goldens were missing, written now; review and commit: {missing}"


def test_output_is_deterministic(demo: FixturePaths, tmp_path: Path) -> None:
    texts = []
    for i in range(2):
        out = tmp_path / f"run{i}.cdx.json"
        spdx = tmp_path / f"run{i}.spdx.json"
        proc = run_cli(
            "scan", demo.oci_ref, "-q", "-o", f"cyclonedx-json={out}", "-o", f"spdx-json={spdx}"
        )
        assert proc.returncode == 0, proc.stderr
        texts.append((out.read_text(), spdx.read_text()))
    assert texts[0] == texts[1]
    cdx = json.loads(texts[0][0])
    assert cdx["metadata"]["timestamp"].startswith("2023-11-14T22:13:20")
    assert cdx["serialNumber"].startswith("urn:uuid:")


def test_table_is_the_default_output(demo: FixturePaths) -> None:
    proc = run_cli("scan", "--image", demo.oci_ref, "-q")
    assert proc.returncode == 0, proc.stderr
    assert "nvidia-cuda-runtime-cu12" in proc.stdout
    assert "12.4.127" in proc.stdout
    assert proc.stderr == ""


def test_dir_source_matches_the_image(multilayer: FixturePaths, tmp_path: Path) -> None:
    """An unpacked root filesystem (umoci unpack of the same image) gives the same packages."""
    import shutil

    if shutil.which("umoci") is None:
        pytest.skip("umoci not installed (apt-get install umoci)")
    bundle = tmp_path / "bundle"
    subprocess.run(
        ["umoci", "unpack", "--rootless", "--image", multilayer.oci_ref.removeprefix("oci:"), str(bundle)],
        check=True,
        capture_output=True,
    )
    image = scan_json(multilayer.oci_ref, tmp_path)
    rootfs = scan_json(f"dir:{bundle / 'rootfs'}", tmp_path)
    strip = {(c["name"], c["version"], c["purl"]) for c in image["components"]}
    assert {(c["name"], c["version"], c["purl"]) for c in rootfs["components"]} == strip
    assert rootfs["target"]["source"] == "dir"


def test_strict_exit_code_on_unknowns(tmp_path: Path) -> None:
    """--strict turns recorded unknowns into exit 4, and still writes the SBOM."""
    from fixtures import imagetools as it

    layer = [
        ("/etc/os-release", b"ID=debian\nVERSION_ID=12\n"),
        ("/var/lib/dpkg/status", b"Package: broken\n\x00\x00 not a stanza \xff\n"),
        ("/usr/lib/python3/dist-packages/bad-1.0.dist-info/METADATA", b"\xff\xfe\x00garbage"),
        ("/var/lib/rpm/rpmdb.sqlite", b"this is not sqlite"),
    ]
    layout = it.write_oci_layout(tmp_path / "l", it.build_image([layer]), tag="t")
    out = tmp_path / "o.json"
    plain = run_cli("scan", f"oci:{layout}:t", "-q", "-o", f"json={out}")
    assert plain.returncode == 0, plain.stderr
    unknowns = json.loads(out.read_text())["unknowns"]
    assert unknowns, "the broken rpmdb must be recorded as an unknown"
    out.unlink()
    strict = run_cli("scan", f"oci:{layout}:t", "-q", "--strict", "-o", f"json={out}")
    assert strict.returncode == 4, strict.stderr
    assert "incomplete" in strict.stderr
    assert out.exists()
