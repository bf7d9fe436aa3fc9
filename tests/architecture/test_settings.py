"""One settings object (issue #33): ``gpusbom.settings`` is the only module that reads
``GPUSBOM_*`` variables; precedence flag > environment > config file > default; config
files with unknown keys fail naming key, file and line; docs/configuration.md is generated
from the settings; registration does not depend on the environment."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpusbom import settings
from gpusbom.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "gpusbom"
ENV_NAME = re.compile(r"^GPUSBOM_[A-Z0-9_]+$")
_MAIN = "import sys; from gpusbom.cli.app import main; sys.exit(main(sys.argv[1:]))"


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p != SRC / "settings.py")


def test_environment_is_read_only_in_the_settings_module() -> None:
    found = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                  ast.AsyncFunctionDef))
                and n.body and isinstance(n.body[0], ast.Expr)
                and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            # a variable's name as a whole string: what an environment read (os.environ,
            # os.getenv, typer's envvar=, monkeypatch) is given
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in docs and ENV_NAME.match(node.value)):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}")
    assert found == []
    # and the grep of the acceptance: no line that reads the environment names GPUSBOM_
    grep = subprocess.run(["grep", "-rn", "GPUSBOM_", str(SRC)], capture_output=True,
                          text=True, check=True).stdout.splitlines()
    reads = [ln for ln in grep if re.search(r"environ|getenv|envvar", ln)
             and not ln.startswith(str(SRC / "settings.py"))]
    assert reads == []


def test_every_variable_named_in_the_code_is_a_setting() -> None:
    known = {s.env for s in settings.SETTINGS.values()} | {"GPUSBOM_UUID_NS"}
    named = set()
    for path in _modules():
        named |= set(re.findall(r"(?<![A-Za-z0-9_])GPUSBOM_[A-Z0-9_]*[A-Z0-9]",
                              path.read_text("utf-8")))
    assert named - known == set()


def test_configuration_docs_are_generated_from_the_settings() -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert doc == settings.markdown(), "run scripts/gen-config-docs"
    for s in settings.SETTINGS.values():
        assert f"| `{s.name}` | `{s.env}` |" in doc


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for s in settings.SETTINGS.values():
        if s.name != "cache_dir":
            monkeypatch.delenv(s.env, raising=False)
    settings.reset()
    yield tmp_path
    settings.reset()


def test_precedence_flag_env_config_default(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert (settings.get("max_memory"), settings.source("max_memory")) == ("1G", "default")
    xdg = fresh / "xdg" / "gpusbom"
    xdg.mkdir(parents=True)
    (xdg / "config.yaml").write_text("max_memory: 3G\nlayer_workers: 2\n")
    assert settings.get("max_memory") == "3G"
    assert settings.source("max_memory") == f"config {xdg / 'config.yaml'}:1"
    (fresh / ".gpusbom.yaml").write_text("# here\nmax_memory: 4G\n")  # the working directory's first
    assert settings.get("max_memory") == "4G" and settings.get("layer_workers") is None
    assert settings.source("max_memory") == "config .gpusbom.yaml:2"
    # read when asked: a variable set after import counts
    monkeypatch.setenv("GPUSBOM_MAX_MEMORY", "5G")
    assert (settings.get("max_memory"), settings.source("max_memory")) == (
        "5G", "env GPUSBOM_MAX_MEMORY")
    settings.set_flag("max_memory", "6G", "--max-memory")
    assert (settings.get("max_memory"), settings.source("max_memory")) == (
        "6G", "flag --max-memory")
    other = fresh / "other.yaml"
    other.write_text("offline: true\n")
    settings.use_config(other)
    assert settings.get("offline") is True and settings.get("layer_workers") is None
    # typed: env text parsed, config values checked
    monkeypatch.setenv("GPUSBOM_CPUS", "8")
    assert settings.get("cpus") == 8 and settings.raw("cpus") == "8"
    monkeypatch.setenv("GPUSBOM_NO_CACHE", "0")
    assert settings.get("no_cache") is False
    monkeypatch.setenv("GPUSBOM_NO_CACHE", "1")
    assert settings.get("no_cache") is True


@pytest.mark.parametrize(("text", "line", "words"), [
    ("offline: true\nofline: true\n", 2, "unknown setting 'ofline'"),
    ("offline: yes please\n", 1, "offline must be true or false"),
    ("output: [json=a.json]\ncpus: many\n", 2, "cpus must be an integer"),
    ("- a\n", 1, "must be a mapping"),
    ("offline: [\n", 2, "not YAML"),
])
def test_bad_config_file_names_file_and_line(fresh: Path, text: str, line: int,
                                             words: str) -> None:
    (fresh / ".gpusbom.yaml").write_text(text)
    with pytest.raises(ConfigError) as err:
        settings.effective()
    assert str(err.value).startswith(f".gpusbom.yaml:{line}: ") or \
        str(err.value).startswith(f"config file .gpusbom.yaml:{line}: ")
    assert words in str(err.value)


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000", XDG_CONFIG_HOME=str(cwd / "xdg"))
    return subprocess.run([sys.executable, "-c", _MAIN, *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=600, check=False)


def test_config_file_output_makes_a_bare_scan_write_it(tmp_path: Path) -> None:
    from fixtures.build import ensure

    image = str(ensure("multilayer").docker_archive)
    (tmp_path / ".gpusbom.yaml").write_text("output: [json=out.json]\noffline: true\n")
    r = _cli(["scan", "-q", image], tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out.json").read_text().startswith("{")
    assert r.stdout == ""  # not the table: the config's outputs replace the default
    # a flag wins over the file
    r = _cli(["scan", "-q", image, "-o", "json=flag.json"], tmp_path)
    assert r.returncode == 0 and (tmp_path / "flag.json").exists()
    # an unknown key: exit 3, one line naming the key, file and line; nothing written
    (tmp_path / "out.json").unlink()
    (tmp_path / ".gpusbom.yaml").write_text("output: [json=out.json]\nofline: true\n")
    r = _cli(["scan", "-q", image], tmp_path)
    assert r.returncode == 3
    assert r.stderr.strip() == ("gpusbom: error: .gpusbom.yaml:2: unknown setting 'ofline' "
                                "(gpusbom config lists them)")
    assert not (tmp_path / "out.json").exists()


def test_gpusbom_config_prints_values_and_sources(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("offline: true\nmax_memory: 2G\n")
    r = _cli(["--config", str(cfg), "config", "--json"], tmp_path)
    assert r.returncode == 0, r.stderr
    import json

    got = json.loads(r.stdout)
    assert got["config_file"] == str(cfg)
    assert got["settings"]["offline"] == {"value": True, "source": f"config {cfg}:1"}
    assert got["settings"]["max_memory"] == {"value": "2G", "source": f"config {cfg}:2"}
    assert got["settings"]["cache_dir"]["source"] == "env GPUSBOM_CACHE_DIR"
    assert set(got["settings"]) == set(settings.SETTINGS)
    r = _cli(["--cache-dir", str(tmp_path), "config"], tmp_path)
    assert r.returncode == 0 and "flag --cache-dir" in r.stdout


def test_collector_registration_does_not_depend_on_the_environment() -> None:
    # the catalog collector is registered whatever $GPUSBOM_CATALOG says at import; whether
    # it takes part is asked when a scan lists the collectors
    from gpusbom import catalog, collectors
    from gpusbom.collectors import _REGISTRY, all_collectors
    from gpusbom.collectors.catalog_libraries import CatalogLibrariesCollector

    all_collectors()
    assert _REGISTRY["catalog"] is CatalogLibrariesCollector
    assert ("catalog" in all_collectors()) == bool(catalog.collected())
    assert collectors.all_collectors().keys() <= _REGISTRY.keys()
