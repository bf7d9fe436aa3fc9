"""Real inputs for the gate tests, made once per session.

- image scans of fixture images (``fixtures.build.ensure``), saved as gpusbom JSON;
- host scans of the committed host snapshots (fixtures/hosts, materialized);
- probe results from real OpenCL runs on PoCL (``run_probes(["opencl"])``): the product
  kernel (pass) and the test-only wrong kernel of tests/probe (fail), as gpusbom JSON.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ROOT / "fixtures" / "hosts"
PROBE_TESTS = ROOT / "tests" / "probe"


def _save(result: object, path: Path) -> Path:
    path.write_text(json.dumps(result.to_dict(), indent=1))  # type: ignore[attr-defined]
    return path


def _policy_epoch() -> str:
    """The clock of every report and rule here: 30 days after the bundled database was built,
    so the database-age rule sees the same age on every day the tests run (issue #30)."""
    from gpusbom.advisories.db import load_active
    from gpusbom.clock import parse_iso

    built = parse_iso(str(load_active().built))
    assert built is not None, "the bundled advisory database has no build date"
    return str(int(built.timestamp()) + 30 * 86400)


@pytest.fixture(autouse=True)
def _policy_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    # per test: another package's session fixture in the same worker may have set its own
    monkeypatch.setenv("SOURCE_DATE_EPOCH", _policy_epoch())


@pytest.fixture(scope="session")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """name -> path: image archives (``*-image``), gpusbom JSON scans, SBOMs."""
    # the scans' clock, for the scans of this fixture only: left in the worker's environment
    # it became every later test's clock there (scripts/image/build.py took it as the image's)
    saved = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ.setdefault("SOURCE_DATE_EPOCH", _policy_epoch())
    try:
        return _inputs(tmp_path_factory)
    finally:
        if saved is None:
            os.environ.pop("SOURCE_DATE_EPOCH", None)
        else:
            os.environ["SOURCE_DATE_EPOCH"] = saved


def _inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from fixtures.build import ensure
    from gpusbom.advisories.db import load_active
    from gpusbom.host import scan_host
    from gpusbom.scan import scan

    out = tmp_path_factory.mktemp("gate-inputs")
    db = load_active()
    paths: dict[str, Path] = {}
    for name in ("nvidia-wheels", "intel", "triton", "torch-cpu", "rocm"):
        archive = ensure(name).oci_archive
        paths[f"{name}-image"] = archive
        paths[name] = _save(scan(f"oci-archive:{archive}", advisory_db=db), out / f"{name}.json")
    sys.path.insert(0, str(HOSTS))
    from placeholders import materialize

    for host in ("h200", "cpu-only"):
        materialize(HOSTS / host, out / f"root-{host}")
        paths[f"root-{host}"] = out / f"root-{host}"
        paths[f"host-{host}"] = _save(scan_host(str(out / f"root-{host}"), advisory_db=db),
                                      out / f"host-{host}.json")
    paths["h200-probe-cdx"] = ROOT / "tests" / "probe" / "data" / "h200x2-probe.cdx.json"
    return paths


def _probe_json(out: Path, name: str, kernels: str | None) -> Path:
    from gpusbom.probe import probe_scan, run_probes

    saved = {k: os.environ.get(k) for k in ("GPUSBOM_PROBE_TEST_KERNELS", "PYTHONPATH")}
    try:
        if kernels:
            os.environ["GPUSBOM_PROBE_TEST_KERNELS"] = kernels
            os.environ["PYTHONPATH"] = str(PROBE_TESTS) + (
                os.pathsep + saved["PYTHONPATH"] if saved["PYTHONPATH"] else "")
            sys.path.insert(0, str(PROBE_TESTS))
        results = run_probes(["opencl"])
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return _save(probe_scan(results), out / f"{name}.json")


@pytest.fixture(scope="session")
def probe_inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    sys.path.insert(0, str(PROBE_TESTS))
    from probe_util import pocl_available

    if not pocl_available():
        pytest.skip("no OpenCL platform (install pocl-opencl-icd): probe results need PoCL")
    out = tmp_path_factory.mktemp("gate-probes")
    return {"probe-pass": _probe_json(out, "probe-pass", None),
            "probe-fail": _probe_json(out, "probe-fail", "probe_test_kernels_wrong")}
