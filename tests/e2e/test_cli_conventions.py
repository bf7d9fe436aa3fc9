"""The CLI conventions a Syft/Trivy user expects (issue #36): shell completion, ``version
-o json``, grouped help, ``gpusbom schema``, the man page, ``--exclude``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from fixtures.build import FixturePaths, ensure
from golden_files import read

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "data"
GPUSBOM = str(Path(sys.executable).parent / "gpusbom")


def _gpusbom(*args: str, env: dict[str, str] | None = None,
             cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GPUSBOM, *args], capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, **(env or {})}, cwd=cwd)


@pytest.fixture(scope="module")
def demo() -> FixturePaths:
    return ensure("demo")


# -- completion ---------------------------------------------------------------------------


def test_bash_sources_the_script_and_completes_sc_to_scan(tmp_path: Path) -> None:
    script = _gpusbom("completion", "bash")
    assert script.returncode == 0, script.stderr
    assert "_GPUSBOM_COMPLETE=complete_bash" in script.stdout
    (tmp_path / "gpusbom.bash").write_text(script.stdout)
    # what bash does on <TAB> after "gpusbom sc": the registered function fills COMPREPLY
    probe = (f'PATH={Path(GPUSBOM).parent}:$PATH; source {tmp_path / "gpusbom.bash"}; '
             'complete -p gpusbom; COMP_WORDS=(gpusbom sc); COMP_CWORD=1; '
             '_gpusbom_completion gpusbom; printf "%s\\n" "${COMPREPLY[@]}"')
    got = subprocess.run(["bash", "--norc", "--noprofile", "-c", probe], capture_output=True,
                         text=True, timeout=60, check=False)
    assert got.returncode == 0, got.stderr
    lines = got.stdout.splitlines()
    assert lines[0] == "complete -o default -F _gpusbom_completion gpusbom"
    assert lines[1:] == ["scan", "schema"]  # every command that starts with "sc"


def test_completion_protocol_completes_commands_and_options() -> None:
    env = {"_GPUSBOM_COMPLETE": "complete_bash", "COMP_WORDS": "gpusbom sc", "COMP_CWORD": "1"}
    assert _gpusbom(env=env).stdout.split() == ["scan", "schema"]
    env.update(COMP_WORDS="gpusbom scan --exc", COMP_CWORD="2")
    assert _gpusbom(env=env).stdout.split() == ["--exclude"]
    env.update(COMP_WORDS="gpusbom scan --scope ", COMP_CWORD="3")
    assert _gpusbom(env=env).stdout.split() == ["squashed", "all-layers"]


@pytest.mark.parametrize(("shell", "marker"), [("zsh", "#compdef gpusbom"),
                                               ("fish", "complete --command gpusbom")])
def test_zsh_and_fish_scripts(shell: str, marker: str) -> None:
    got = _gpusbom("completion", shell)
    assert got.returncode == 0, got.stderr
    assert marker in got.stdout and f"_GPUSBOM_COMPLETE=complete_{shell}" in got.stdout


def test_completion_of_an_unknown_shell_is_a_usage_error() -> None:
    got = _gpusbom("completion", "tcsh")
    assert got.returncode == 2 and "tcsh" in got.stderr


# -- version -------------------------------------------------------------------------------


def test_version_json() -> None:
    from gpusbom import __version__
    from gpusbom.advisories.db import load_active

    got = _gpusbom("version", "-o", "json")
    assert got.returncode == 0, got.stderr
    info = json.loads(got.stdout)
    assert info["schema"] == "gpusbom/version/1" and info["version"] == __version__
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert info["commit"] == head  # an editable install: the checkout's commit
    assert info["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert info["platform"]["machine"] == os.uname().machine
    db = load_active()
    assert info["advisory_db"]["advisories"] == len(db) > 0
    assert info["advisory_db"]["built"] == db.built and info["advisory_db"]["data"] == db.newest
    cves = {v.id for a in db for v in a.vulnerabilities}
    assert info["advisory_db"]["vulnerabilities"] == len(cves)


def test_version_text_and_the_one_line_flag() -> None:
    text = _gpusbom("version").stdout
    keys = [line.split(":", 1)[0] for line in text.splitlines()]
    assert keys == ["Application", "Version", "Commit", "Python", "Platform", "Advisory DB",
                    "DB built", "DB data", "DB records"]
    from gpusbom import __version__

    assert _gpusbom("--version").stdout == f"gpusbom {__version__}\n"


# -- grouped help ---------------------------------------------------------------------------


def _sections(help_text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = None
    for line in help_text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = out.setdefault(line[:-1], [])
        elif current is not None and line.startswith("  -"):
            current.append(line.split()[0].rstrip(","))
            if line.split()[0].endswith(","):
                current.append(line.split()[1])
    return out


def test_scan_help_is_grouped_in_panels() -> None:
    got = _gpusbom("scan", "--help")
    assert got.returncode == 0
    sections = _sections(got.stdout)
    assert list(sections)[1:] == ["Options", "Image options", "Host options", "Output options",
                                  "Advisory options", "Advanced options"]
    assert {"--image", "--platform", "--scope", "--insecure-registry"} <= set(
        sections["Image options"])
    assert {"--host", "--root", "--probe", "--no-nvml"} <= set(sections["Host options"])
    assert {"-o", "--output", "--cyclonedx-version"} <= set(sections["Output options"])
    assert {"--vex", "--offline", "--fail-on"} <= set(sections["Advisory options"])
    assert {"--exclude", "--max-memory", "--no-cache"} <= set(sections["Advanced options"])
    # every option of the command is listed once
    from gpusbom.cli.app import command

    scan = command(["scan"]).commands["scan"]
    opts = [p.opts[0] for p in scan.params if p.param_type_name == "option"]
    listed = [o for names in sections.values() for o in names]
    assert sorted(set(opts) - set(listed)) == []


# -- schema --------------------------------------------------------------------------------


def _native_goldens() -> list[Path]:
    out = []
    for p in sorted(GOLDEN.rglob("*")):
        name = p.name.removesuffix(".min")
        if p.is_file() and (name == "json" or name.endswith(".json")):
            doc = json.loads(read(p))
            if isinstance(doc, dict) and doc.get("schema") == "gpusbom/scan/1":
                out.append(p)
    return out


def test_schema_validates_every_json_golden() -> None:
    got = _gpusbom("schema")
    assert got.returncode == 0, got.stderr
    schema = json.loads(got.stdout)
    kept = ROOT / "src" / "gpusbom" / "data" / "schema" / "scan-1.json"
    assert got.stdout == kept.read_text()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    goldens = _native_goldens()
    assert len(goldens) >= 10, goldens  # every scan case of tests/golden
    for path in goldens:
        errors = [f"{e.json_path}: {e.message}" for e in validator.iter_errors(
            json.loads(read(path)))]
        assert errors == [], (path, errors[:3])


def test_schema_rejects_what_is_not_a_scan() -> None:
    from gpusbom.errors import InputError
    from gpusbom.scanschema import validate_scan

    doc = json.loads((GOLDEN / "scan-demo" / "json").read_text())
    validate_scan(doc)
    doc["components"][0]["type"] = "gadget"
    with pytest.raises(InputError, match=r"components\[0\]\.type"):
        validate_scan(doc)
    del doc["target"]
    with pytest.raises(InputError, match="target"):
        validate_scan({k: v for k, v in doc.items() if k != "target"})


# -- man page ------------------------------------------------------------------------------


def test_man_page_is_up_to_date() -> None:
    # in a fresh interpreter, as scripts/gen-man makes it (the test session's own imports of
    # the CLI set click state that the help of a fresh process does not have)
    page = subprocess.run([sys.executable, "-c", "from gpusbom.cli.manpage import generate; "
                           "print(generate(), end='')"], capture_output=True, text=True,
                          check=True, cwd=ROOT).stdout
    committed = (ROOT / "docs" / "man" / "gpusbom.1").read_text()
    assert page == committed, "run scripts/gen-man"
    for command in ("gpusbom scan", "gpusbom completion", "gpusbom schema",
                    "gpusbom inventory hosts"):
        assert f".SS {command}\n" in page
    assert "\\-\\-exclude" in page and ".SH EXIT STATUS" in page


def test_man_page_renders_without_warnings() -> None:
    # groff (groff-base, installed by scripts/test) formats it as man(1) would
    got = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z",
                          str(ROOT / "docs" / "man" / "gpusbom.1")],
                         capture_output=True, text=True, timeout=60, check=False)
    assert got.returncode == 0 and got.stderr == "", got.stderr[:2000]
    text = subprocess.run(["groff", "-man", "-Tascii", str(ROOT / "docs" / "man" / "gpusbom.1")],
                          capture_output=True, text=True, timeout=60, check=True).stdout
    plain = re.sub(".\x08", "", text)  # groff's overstrike bold and underline
    assert "gpusbom scan" in plain and "--exclude" in plain


# -- --exclude -----------------------------------------------------------------------------


def _components(path: Path) -> list[dict[str, object]]:
    comps: list[dict[str, object]] = json.loads(path.read_text())["components"]
    return comps


def test_exclude_leaves_paths_out_of_collection(demo: FixturePaths, tmp_path: Path) -> None:
    full, less = tmp_path / "full.json", tmp_path / "less.json"
    base = ("scan", demo.oci_ref, "--offline", "-q", "--no-cache")
    assert _gpusbom(*base, "-o", f"json={full}").returncode == 0
    got = _gpusbom(*base, "--exclude", "./var/lib/dpkg", "--exclude", "/usr/lib/**/libOpenCL*",
                   "-o", f"json={less}")
    assert got.returncode == 0, got.stderr
    before, after = _components(full), _components(less)
    assert any(c["ecosystem"] == "deb" for c in before)
    assert not any(c["ecosystem"] == "deb" for c in after)  # the dpkg database is gone
    paths = [e["path"] for c in after for e in c["evidence"]]  # type: ignore[attr-defined]
    assert not any("libOpenCL" in (p or "") for p in paths)
    assert any("libOpenCL" in (e["path"] or "")
               for c in before for e in c["evidence"])  # type: ignore[attr-defined]
    # what was not excluded is still found
    assert {c["name"] for c in after if c["ecosystem"] == "pypi"} == {
        c["name"] for c in before if c["ecosystem"] == "pypi"}


def test_exclude_in_a_host_scan(tmp_path: Path) -> None:
    root = tmp_path / "root"
    site = root / "usr" / "lib" / "python3" / "dist-packages"
    for name in ("keepme", "dropme"):
        meta = site / f"{name}-1.0.dist-info"
        meta.mkdir(parents=True)
        (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    out = tmp_path / "host.json"
    got = _gpusbom("scan", "--root", str(root), "--no-nvml", "--offline", "-q",
                   "--exclude", "/usr/lib/python3/dist-packages/dropme-*", "-o", f"json={out}")
    assert got.returncode == 0, got.stderr
    names = {c["name"] for c in _components(out) if c["ecosystem"] == "pypi"}
    assert names == {"keepme"}


def test_exclude_of_the_whole_root_is_a_usage_error(demo: FixturePaths, tmp_path: Path) -> None:
    got = _gpusbom("scan", demo.oci_ref, "--offline", "-q", "--exclude", "/",
                   "-o", f"json={tmp_path / 'x.json'}")
    assert got.returncode == 2, got.stderr
    assert got.stderr.count("\n") == 1 and "--exclude '/'" in got.stderr
    assert not (tmp_path / "x.json").exists()


# -- --scope -------------------------------------------------------------------------------


def test_scope_all_layers_reports_what_later_layers_deleted(tmp_path: Path) -> None:
    from cyclonedx.schema import OutputFormat, SchemaVersion
    from cyclonedx.validation import make_schemabased_validator

    multi = ensure("multilayer")
    expected = json.loads(multi.expectations.read_text())
    squashed, every = tmp_path / "squashed.json", tmp_path / "all.json"
    cdx = tmp_path / "all.cdx.json"
    base = ("scan", multi.oci_ref, "--offline", "-q")
    assert _gpusbom(*base, "-o", f"json={squashed}").returncode == 0
    got = _gpusbom(*base, "--scope", "all-layers", "-o", f"json={every}",
                   "-o", f"cyclonedx-json={cdx}")
    assert got.returncode == 0, got.stderr
    doc = json.loads(every.read_text())
    layers = [la["diff_id"] for la in doc["target"]["layers"]]
    assert len(layers) == 2
    deleted = {(c["name"], c["version"]): c for c in doc["components"]
               if c["properties"].get("layer-scope") == "deleted"}
    # the fixture's recipe says what layer 1 deleted, hid or upgraded away
    assert set(deleted) == {(a["name"], a["version"]) for a in expected["absent_packages"]}
    for c in deleted.values():
        assert c["properties"]["deleted-by-layer"] == layers[1]
        assert c["evidence"][0]["layer"] == layers[0]  # the layer that had it
    # the squashed scan has none of them, and the rest is the same
    rest = [c for c in doc["components"] if c["properties"].get("layer-scope") is None]
    plain = json.loads(squashed.read_text())["components"]
    assert {(c["name"], c["version"]) for c in plain} == {(c["name"], c["version"]) for c in rest}
    assert not set(deleted) & {(c["name"], c["version"]) for c in plain}
    errors = make_schemabased_validator(OutputFormat.JSON, SchemaVersion.V1_6).validate_str(
        cdx.read_text())
    assert errors is None, errors


def test_scope_all_layers_is_for_images(tmp_path: Path) -> None:
    got = _gpusbom("scan", "--root", str(tmp_path), "--scope", "all-layers", "-q")
    assert got.returncode == 2 and "--scope all-layers" in got.stderr
    got = _gpusbom("scan", "x", "--scope", "every", "-q")
    assert got.returncode == 2
