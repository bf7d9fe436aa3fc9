"""Golden files: every output format of every command on the fixtures, byte for byte.

Each case runs the real CLI (a subprocess, as a user runs it) on the cached fixture images
(fixtures/build.py), the committed host snapshots (fixtures/hosts), SBOMs written by other
tools, and a fresh inventory database, then compares each output with
``tests/golden/data/<case>/<file>``. Volatile fields are redacted first, as Syft's encoder
tests do: the gpusbom version, random UUIDs, the temporary and cache directories, and the
inventory's ingest times. SOURCE_DATE_EPOCH fixes the document timestamps.

An intended change of output: run ``scripts/update-goldens`` and review ``git diff``.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from golden_files import MINIFY_OVER, minify

from fixtures.build import FixturePaths, ensure
from fixtures.fetch import cache_root

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
HOSTS = ROOT / "fixtures" / "hosts"
EPOCH = "1700000000"
INPUT_CREATED = "2026-12-01T00:00:00Z"  # foreign SBOMs' creation, see foreign_sboms
UPDATE = os.environ.get("GPUSBOM_UPDATE_GOLDEN") == "1"
IMAGES = ["demo", "multilayer", "intel", "ocl-vulkan", "rocm", "nvidia-wheels", "torch-cpu",
          "triton"]
# scan's formats, each to its own file; the table goes to stdout
SCAN_FORMATS = {"json": "json", "cyclonedx-json": "cdx.json", "cyclonedx-xml": "cdx.xml",
                "spdx-json": "spdx.json", "spdx-tag-value": "spdx", "spdx3-json": "spdx3.json"}


@dataclass
class Run:
    """One CLI invocation's observable result."""

    rc: int
    stdout: str
    stderr: str


@dataclass
class Ctx:
    """What a case may use: a work directory and the outputs it collected."""

    tmp: Path
    outputs: dict[str, str] = field(default_factory=dict)
    volatile: dict[str, str] = field(default_factory=dict)  # text -> its redaction token

    def cli(self, *args: str, rc: int = 0, name: str | None = None) -> Run:
        """Run ``gpusbom ARGS``; assert the exit code; keep stdout as ``name`` (if given)."""
        env = {**os.environ, "SOURCE_DATE_EPOCH": EPOCH, "COLUMNS": "200", "TERM": "dumb",
               "NO_COLOR": "1"}
        env.pop("FORCE_COLOR", None)
        proc = subprocess.run([sys.executable, "-m", "gpusbom", *args], capture_output=True,
                              text=True, timeout=300, env=env, cwd=self.tmp, check=False)
        assert proc.returncode == rc, f"gpusbom {' '.join(args)}: rc {proc.returncode}\n{proc.stderr}"
        if name is not None:
            self.outputs[name] = proc.stdout
            if proc.stderr:
                self.outputs[name + ".stderr"] = proc.stderr
        return Run(proc.returncode, proc.stdout, proc.stderr)

    def keep(self, name: str, path: Path) -> None:
        """Keep the file ``path`` (written by the CLI) as output ``name``."""
        self.outputs[name] = path.read_text()


def redact(text: str, ctx: Ctx) -> str:
    """Replace what legitimately changes between runs and machines by a fixed token."""
    from gpusbom import __version__

    tmp = ctx.tmp
    for value, token in sorted(ctx.volatile.items(), key=lambda kv: len(kv[0]), reverse=True):
        text = text.replace(value, token)

    for p in sorted({str(tmp), str(tmp.resolve())}, key=len, reverse=True):
        text = text.replace(p, "<TMP>")
    for p in sorted({str(cache_root()), str(cache_root().resolve())}, key=len, reverse=True):
        text = text.replace(p, "<FIXTURES>")
    text = text.replace(str(ROOT), "<REPO>")
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<UUID>", text)
    text = re.sub(rf"(?<![\w.]){re.escape(__version__)}(?![\w.])", "<VERSION>", text)
    # the inventory's ingest time is the wall clock of the ingest
    text = re.sub(r'("ingested_at": )"[^"]*"', r'\1"<INGESTED>"', text)
    # ... and a scan's age is measured against it
    text = re.sub(r"^(gpusbom_inventory_scan_age_seconds\{[^}]*\}) \S+$", r"\1 <AGE>", text,
                  flags=re.M)
    return text


# --- shared inputs (built once per test session) -------------------------------------------



@pytest.fixture(scope="session")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The committed host snapshots, materialised (placeholder files and links restored)."""
    sys.path.insert(0, str(HOSTS))
    from placeholders import materialize

    out = tmp_path_factory.mktemp("hosts")
    for name in ("h200", "cpu-only"):
        materialize(HOSTS / name, out / name)
    return out


def _image(name: str) -> FixturePaths:
    return ensure(name)


def _oci(name: str) -> str:
    """The image's OCI layout as a path relative to the case directory (whose ``fixtures``
    links to the cache): the reference, and what SBOMs derive from it, is then the same on
    every machine."""
    paths = _image(name)
    rel = Path(paths.oci_ref.removeprefix("oci:")).relative_to(cache_root())
    return f"oci:fixtures/{rel}"


def _host_dir(ctx: Ctx, request: pytest.FixtureRequest, name: str) -> str:
    """A copy of the materialised host snapshot ``name`` in the case directory, relative."""
    dest = ctx.tmp / "hosts" / name
    if not dest.exists():
        shutil.copytree(request.getfixturevalue("hosts") / name, dest, symlinks=True)
    return f"hosts/{name}"


def _input(ctx: Ctx, src: Path) -> str:
    """A copy of the input file ``src`` in the case directory, relative."""
    (ctx.tmp / "inputs").mkdir(exist_ok=True)
    shutil.copyfile(src, ctx.tmp / "inputs" / src.name)
    return f"inputs/{src.name}"


@pytest.fixture(scope="session")
def foreign_sboms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """SBOMs written by other tools (pinned) of a Python environment holding torch 2.5.1,
    the CUDA 12.4 runtime wheel and packaging 24.1: CycloneDX JSON (cyclonedx-py), SPDX
    tag-value and SPDX JSON (sbom4python)."""
    from fixtures.fetch import fetch, load_pins
    from tests.sbomin import sbom_tools

    pins = load_pins()
    pyenv = sbom_tools.python_env([
        sbom_tools.torch_wheel(),
        fetch(pins[("wheel", "nvidia-cuda-runtime-cu12", "12.4.127")]),
        fetch(pins[("wheel", "packaging", "24.1")]),
    ])
    out = tmp_path_factory.mktemp("foreign")
    env = {**os.environ, "SOURCE_DATE_EPOCH": EPOCH}
    cdx = out / "env.cdx.json"
    subprocess.run([str(sbom_tools.cyclonedx_py()), "environment", "--output-reproducible",
                    "-o", str(cdx), str(pyenv)], check=True, capture_output=True, env=env)
    site = next(pyenv.parent.parent.glob("lib/python*/site-packages"))
    found: dict[str, Path] = {"cyclonedx-py": cdx}
    for fmt, name in (("tag", "torch.spdx"), ("json", "torch.spdx.json")):
        p = out / name
        subprocess.run([str(sbom_tools.sbom4python()), "-m", "torch", "--sbom", "spdx",
                        "--format", fmt, "-o", str(p)], check=True, capture_output=True,
                       env={**env, "PYTHONPATH": str(site)})
        # sbom4python stamps its documents with the wall clock (no SOURCE_DATE_EPOCH), and
        # a scan of an SBOM measures the advisory database's age from the document's
        # creation: pin the stamp to the day the goldens were recorded, or the age changes daily
        p.write_text(re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", INPUT_CREATED, p.read_text()))
        found[f"sbom4python-{fmt}"] = p
    return found


# --- cases ---------------------------------------------------------------------------------


def scan_all_formats(ctx: Ctx, *target: str) -> None:
    """``gpusbom scan TARGET`` once, every format: files and the table on stdout."""
    args = ["scan", *target, "-q"]
    for fmt, ext in SCAN_FORMATS.items():
        args += ["-o", f"{fmt}=out.{ext}"]
    ctx.cli(*args, "-o", "table", name="table.txt")
    for ext in SCAN_FORMATS.values():
        ctx.keep(ext, ctx.tmp / f"out.{ext}")


Case = Callable[[Ctx, pytest.FixtureRequest], None]
CASES: dict[str, Case] = {}


def case(name: str) -> Callable[[Case], Case]:
    def register(fn: Case) -> Case:
        CASES[name] = fn
        return fn

    return register


for _img in IMAGES:
    def _scan_image(ctx: Ctx, request: pytest.FixtureRequest, img: str = _img) -> None:
        scan_all_formats(ctx, _oci(img))

    CASES[f"scan-{_img}"] = _scan_image


for _hostname in ("h200", "cpu-only"):
    def _scan_host(ctx: Ctx, request: pytest.FixtureRequest, host: str = _hostname) -> None:
        scan_all_formats(ctx, "--root", _host_dir(ctx, request, host))

    CASES[f"host-{_hostname}"] = _scan_host


for _tool in ("cyclonedx-py", "sbom4python-tag", "sbom4python-json"):
    def _scan_sbom(ctx: Ctx, request: pytest.FixtureRequest, tool: str = _tool) -> None:
        sbom = request.getfixturevalue("foreign_sboms")[tool]
        # sbom4python stamps its documents with the wall clock (no SOURCE_DATE_EPOCH)
        for stamp in re.findall(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", sbom.read_text()):
            ctx.volatile[stamp] = "<INPUT-CREATED>"
            ctx.volatile[stamp[:-1] + "+00:00"] = "<INPUT-CREATED>"
        scan_all_formats(ctx, "--sbom", _input(ctx, sbom))

    CASES[f"sbom-{_tool}"] = _scan_sbom


def _host_json(ctx: Ctx, request: pytest.FixtureRequest, host: str) -> Path:
    out = ctx.tmp / f"{host}.json"
    ctx.cli("scan", "--root", _host_dir(ctx, request, host), "-q", "-o", f"json={out.name}")
    return out


@case("check")
def _check(ctx: Ctx, request: pytest.FixtureRequest) -> None:
    h200 = _host_json(ctx, request, "h200")
    for img in ("demo", "nvidia-wheels"):
        sarif, js = ctx.tmp / f"{img}.sarif", ctx.tmp / f"{img}.json"
        proc = _check_run(ctx, "check", _oci(img), "--against", h200.name, "-o", "table",
                          "-o", f"json={js.name}", "-o", f"sarif={sarif.name}",
                          name=f"{img}-against-h200.table.txt")
        ctx.outputs[f"{img}-against-h200.rc"] = f"{proc}\n"
        ctx.keep(f"{img}-against-h200.json", js)
        ctx.keep(f"{img}-against-h200.sarif", sarif)
    what_if = ctx.tmp / "what-if.json"
    proc = _check_run(ctx, "check", _oci("nvidia-wheels"), "--gpu", "H100", "--gpu", "L4",
                      "--gpu", "MI300X", "--gpu", "sm_120", "--driver", "570.86.15", "-v",
                      "-o", "table", "-o", f"json={what_if.name}", name="what-if.table.txt")
    ctx.outputs["what-if.rc"] = f"{proc}\n"
    ctx.keep("what-if.json", what_if)


def _check_run(ctx: Ctx, *args: str, name: str, epoch: str = EPOCH) -> int:
    """check exits 0 or 1 (a will-fail verdict): both are results, recorded with the output."""
    env = {**os.environ, "SOURCE_DATE_EPOCH": epoch, "COLUMNS": "200", "TERM": "dumb",
           "NO_COLOR": "1"}
    proc = subprocess.run([sys.executable, "-m", "gpusbom", *args], capture_output=True,
                          text=True, timeout=300, env=env, cwd=ctx.tmp, check=False)
    assert proc.returncode in (0, 1), f"gpusbom {' '.join(args)}: rc {proc.returncode}\n{proc.stderr}"
    ctx.outputs[name] = proc.stdout
    if proc.stderr:
        ctx.outputs[name + ".stderr"] = proc.stderr
    return proc.returncode


def _db_age_epoch(days: int) -> str:
    """SOURCE_DATE_EPOCH ``days`` after the bundled advisory database's build date: the gate's
    database-age rule then says "N days old" with the same N on every day the test runs."""
    import datetime as dt

    from gpusbom.advisories.db import load_active
    from gpusbom.clock import parse_iso

    built = parse_iso(str(load_active().built))
    assert built is not None, "the bundled advisory database has no build date"
    return str(int((built + dt.timedelta(days=days)).timestamp()))


@case("gate")
def _gate(ctx: Ctx, request: pytest.FixtureRequest) -> None:
    sbom = _input(ctx, request.getfixturevalue("foreign_sboms")["cyclonedx-py"])
    epoch = _db_age_epoch(100)  # the strict policy allows 7 days: its rule fails, always by 100
    runs = {
        "default-demo": ["gate", _oci("demo")],
        "strict-images": ["gate", "-p", "strict", _oci("demo"), _oci("rocm")],
        "strict-h200": ["gate", "-p", "strict", "--root", _host_dir(ctx, request, "h200")],
        "default-sbom": ["gate", f"sbom:{sbom}"],
    }
    for name, args in runs.items():
        files = {fmt: ctx.tmp / f"{name}.{fmt}" for fmt in ("json", "sarif", "junit")}
        outs = [a for fmt, p in files.items() for a in ("-o", f"{fmt}={p.name}")]
        rc = _check_run(ctx, *args, *outs, "-o", "table", name=f"{name}.table.txt", epoch=epoch)
        ctx.outputs[f"{name}.rc"] = f"{rc}\n"
        for fmt, p in files.items():
            ctx.keep(f"{name}.{fmt}", p)


@case("inventory")
def _inventory(ctx: Ctx, request: pytest.FixtureRequest) -> None:
    h200 = _host_json(ctx, request, "h200")
    cpu = _host_json(ctx, request, "cpu-only")
    scans = [h200, cpu]
    for img in ("demo", "nvidia-wheels"):
        out = ctx.tmp / f"{img}.json"
        ctx.cli("scan", _oci(img), "-q", "-o", f"json={out.name}")
        scans.append(out)
    # a second, later scan of the H200 host: one library upgraded, one removed (drift input)
    doc = json.loads(h200.read_text())
    comps = doc["components"]
    changed = next(c for c in comps if c.get("version") and c.get("ecosystem") == "deb")
    changed["version"] = changed["version"] + "+golden1"
    comps.remove(next(c for c in comps if c is not changed and c.get("ecosystem") == "deb"))
    later = ctx.tmp / "h200-later.json"
    later.write_text(json.dumps(doc))
    host = doc["target"]["name"]
    db = "sqlite:///inv.db"
    ctx.cli("inventory", "ingest", "--db", db, "-l", "pool=golden", *(p.name for p in scans),
            name="ingest.txt")
    ctx.cli("inventory", "ingest", "--db", db, later.name, name="ingest-later.txt")
    for fmt in ("table", "json", "csv"):
        ctx.cli("inventory", "query", "--db", db, "libcuda*", "-f", fmt, name=f"query.{fmt}")
        ctx.cli("inventory", "query", "--db", db, "nvidia-cuda-runtime*", "-V", ">=12",
                "--all-scans", "-f", fmt, name=f"query-range.{fmt}")
        ctx.cli("inventory", "affected", "--db", db, "--all", "--include-review", "-f", fmt,
                name=f"affected.{fmt}")
        ctx.cli("inventory", "drift", "--db", db, host, "-f", fmt, name=f"drift.{fmt}")
        ctx.cli("inventory", "compat", "--db", db, "-f", fmt, name=f"compat.{fmt}")
        ctx.cli("inventory", "hosts", "--db", db, "-f", fmt, name=f"hosts.{fmt}")
        ctx.cli("inventory", "images", "--db", db, "-f", fmt, name=f"images.{fmt}")
    ctx.cli("inventory", "metrics", "--db", db, name="metrics.prom")


# --- the test --------------------------------------------------------------------------------


def _write_golden(path: Path, text: str) -> None:
    if len(text.encode()) > MINIFY_OVER:
        path.with_name(path.name + ".min").write_text(minify(path.name, text))
    else:
        path.write_text(text)


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[Ctx]:
    (tmp_path / "fixtures").symlink_to(cache_root().resolve(), target_is_directory=True)
    yield Ctx(tmp_path)


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, ctx: Ctx, request: pytest.FixtureRequest) -> None:
    CASES[name](ctx, request)
    got = {k: redact(v, ctx) for k, v in ctx.outputs.items()}
    d = DATA / name
    if UPDATE:
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        for k, v in got.items():
            _write_golden(d / k, v)
        return
    assert d.is_dir(), f"no goldens for {name}: run scripts/update-goldens and review git diff"
    want = {p.name.removesuffix(".min"): p.read_text() for p in d.iterdir()}
    got = {k: minify(k, v) if (d / f"{k}.min").exists() else v for k, v in got.items()}
    assert sorted(got) == sorted(want), f"{name}: output files differ from {d}"
    diffs = [k for k in sorted(got) if got[k] != want[k]]
    if diffs:
        first = diffs[0]
        lines = list(difflib.unified_diff(want[first].splitlines(), got[first].splitlines(),
                                          f"golden/{name}/{first}", "now", lineterm="", n=1))
        pytest.fail(f"{name}: {diffs} differ from {d}; if intended, run scripts/update-goldens "
                    "and list the diff in the commit message. First lines of the first:\n"
                    + "\n".join(lines[:40]))
