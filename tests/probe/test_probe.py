"""The smoke-test probe: kernel, isolation, outcomes, model, writers, CLI.

Real runs: OpenCL on PoCL (CPU) passes; CUDA / HIP / Level Zero are skipped here (no
drivers); TEST-ONLY kernels (tests/probe/probe_test_kernels_*.py) give fail, timeout
and a crashed child, and the probe carries on past each.
"""

from __future__ import annotations

import ctypes
import io
import json
import os
import time
from array import array

import pytest
from probe_util import HERE, needs_opencl

from gpusbom.cli.app import main
from gpusbom.model import Component, ComponentType, ProbeResult, ScanResult, Target
from gpusbom.probe import attach_probes, probe_failures, probe_scan, run_probes
from gpusbom.probe import kernel as K


def _loadable(*names: str) -> bool:
    for n in names:
        try:
            ctypes.CDLL(n)
            return True
        except OSError:
            pass
    return False


# --- kernel and reference ------------------------------------------------------------------

def test_reference_is_exact_integer_matmul() -> None:
    ref = K.reference()
    assert len(ref) == K.N * K.N and K.N % K.TILE != 0  # 100: the edge tiles are partial
    i, j = 37, 99
    assert ref[i * K.N + j] == sum(K.a_value(i, k) * K.b_value(k, j) for k in range(K.N))
    assert max(abs(x) for x in ref) < 2**24  # exact in FP32 in any summation order
    a, b = K.inputs()
    assert all(float(x).is_integer() for x in a) and all(float(x).is_integer() for x in b)


def test_max_abs_error() -> None:
    ref = K.reference()
    good = array("f", (float(x) for x in ref))
    assert K.max_abs_error(good.tobytes(), ref) == 0.0
    bad = array("f", good)
    bad[4321] += 3.0
    assert K.max_abs_error(bad, ref) == 3.0
    bad[7] = float("nan")
    assert K.max_abs_error(bad, ref) == float("inf")
    assert K.max_abs_error(b"", ref) == float("inf")


def test_product_kernels_unless_a_test_names_others(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(K.TEST_KERNELS_ENV, raising=False)
    assert K.kernels() is K.PRODUCT_KERNELS
    assert K.PRODUCT_KERNELS.name == "matmul-fp32-tiled16-n100"
    assert ".target sm_50" in K.CUDA_PTX and "bar.sync" in K.CUDA_PTX


# --- real runs ------------------------------------------------------------------------------

@needs_opencl
def test_opencl_passes_on_pocl() -> None:
    results = run_probes(["opencl"])
    devs = [r for r in results if r.device is not None]
    assert devs, results
    for r in devs:
        assert r.outcome == "pass", r
        assert r.max_abs_error == 0.0 and r.kernel == "matmul-fp32-tiled16-n100"
        for fact in ("runtime-version", "driver-version", "max-work-group-size",
                     "local-memory-bytes", "platform", "preferred-work-group-multiple"):
            assert r.facts.get(fact), (fact, r.facts)
        assert r.seconds is not None and r.seconds < 20
    assert any("Portable Computing Language" in r.facts["platform"] for r in devs)


@pytest.mark.parametrize("backend,libs,words", [
    ("cuda", ("libcuda.so.1",), "libcuda.so.1"),
    ("hip", ("libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"), "libamdhip64"),
    ("level-zero", ("libze_loader.so.1",), "libze_loader.so.1"),
])
def test_missing_driver_is_skipped_with_reason(backend: str, libs: tuple[str, ...], words: str) -> None:
    if _loadable(*libs):
        pytest.skip(f"{libs[0]} is installed here")
    (r,) = run_probes([backend])
    assert r.outcome == "skipped" and r.device is None
    assert words in (r.reason or "") and "not found" in (r.reason or "")


@needs_opencl
def test_wrong_result_is_fail_with_error_size_and_probe_goes_on(test_kernels) -> None:
    test_kernels("probe_test_kernels_wrong")
    results = run_probes(["opencl", "cuda", "level-zero"])
    ocl = [r for r in results if r.backend == "opencl" and r.device is not None]
    assert ocl and all(r.outcome == "fail" for r in ocl), ocl
    # the dropped tile k = 96..99 is exactly what is missing
    import numpy as np

    i = np.arange(K.N)
    a = (i[:, None] * 7 + i[None, :] * 3) % 17 - 8
    b = (i[:, None] * 5 + i[None, :] * 11) % 13 - 6
    expected = float(np.abs(a[:, 96:] @ b[96:, :]).max())
    assert expected > 0
    assert all(r.max_abs_error == expected for r in ocl)
    assert all(r.kernel == "TEST-wrong-last-tile-dropped" for r in ocl)
    assert "max abs error" in (ocl[0].reason or "")
    assert {r.backend for r in results} == {"opencl", "cuda", "level-zero"}  # the others still ran
    assert probe_failures(results) == ocl


@needs_opencl
def test_hung_kernel_is_killed_at_the_deadline(test_kernels) -> None:
    test_kernels("probe_test_kernels_hang")
    t0 = time.monotonic()
    results = run_probes(["opencl", "cuda"], timeout=4)
    took = time.monotonic() - t0
    ocl = [r for r in results if r.backend == "opencl" and r.device is not None]
    assert ocl and all(r.outcome == "timeout" for r in ocl), ocl
    assert "did not finish within 4 s; killed" in (ocl[0].reason or "")
    assert 3.5 < ocl[0].seconds < 10  # type: ignore[operator]
    assert took < 15
    assert any(r.backend == "cuda" for r in results)


@needs_opencl
def test_crashing_child_is_an_error_not_a_crash(test_kernels) -> None:
    test_kernels("probe_test_kernels_crash")
    results = run_probes(["opencl"])
    ocl = [r for r in results if r.device is not None]
    assert ocl and all(r.outcome == "error" and r.error_name == "SIGSEGV" for r in ocl), ocl


@needs_opencl
def test_after_fail_and_timeout_the_next_probe_passes(test_kernels, monkeypatch) -> None:
    test_kernels("probe_test_kernels_hang")
    assert run_probes(["opencl"], timeout=3)[0].outcome == "timeout"
    monkeypatch.delenv("GPUSBOM_PROBE_TEST_KERNELS")
    assert all(r.outcome == "pass" for r in run_probes(["opencl"]) if r.device)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown probe backend"):
        run_probes(["metal"])
    with pytest.raises(ValueError, match="positive"):
        run_probes(["opencl"], timeout=0)


# --- model, attach, writers -------------------------------------------------------------------

def _synthetic() -> list[ProbeResult]:
    common = {"pci-bus-id": "0000:00:06.0", "vendor": "NVIDIA Corporation"}
    return [
        ProbeResult("cuda", "pass", device="NVIDIA H200", device_id="0", kernel="k", max_abs_error=0.0,
                    seconds=0.41, facts={**common, "uuid": "GPU-51281c77-5ee1-2769-6087-df747c832890",
                                         "compute-capability": "9.0", "simd-width": "32"}),
        ProbeResult("opencl", "fail", device="NVIDIA H200", device_id="0:0", kernel="k", max_abs_error=24.0,
                    seconds=0.9, reason="result differs", facts={**common}),
        ProbeResult("opencl", "error", device="NVIDIA H200", device_id="1:0", kernel="k", error_code=-2,
                    error_name="CL_DEVICE_NOT_AVAILABLE", reason="</text> in a reason", facts={**common}),
        ProbeResult("opencl", "timeout", device="cpu", device_id="2:0", reason="killed", seconds=20.0),
        ProbeResult("hip", "skipped", reason="no HIP runtime: libamdhip64.so not found", seconds=0.1),
    ]


def test_model_round_trip_and_old_form() -> None:
    res = probe_scan(_synthetic(), timestamp="2026-01-01T00:00:00Z")
    d = res.to_dict()
    assert len(d["probes"]) == 5
    back = ScanResult.from_dict(json.loads(json.dumps(d)))
    assert back.probes == res.probes and back.to_dict() == d
    plain = ScanResult(target=Target(kind="image", reference="x"))
    assert "probes" not in plain.to_dict()


def test_same_gpu_through_two_runtimes_is_one_device() -> None:
    res = probe_scan(_synthetic())
    devices = [c for c in res.components if c.type is ComponentType.DEVICE]
    assert sorted(c.name for c in devices) == ["NVIDIA H200", "cpu"]
    h200 = next(c for c in devices if c.name == "NVIDIA H200")
    assert h200.properties["pci-bus-id"] == "0000:00:06.0"
    assert h200.supplier == "NVIDIA Corporation"
    assert len(res.probes_for(h200.bom_ref)) == 3
    assert next(p for p in res.probes if p.backend == "hip").device_ref is None


def test_attach_to_host_scan_device_by_pci_address_or_uuid() -> None:
    res = ScanResult(target=Target(kind="host", reference="host:/"))
    dev = Component(name="NVIDIA H200", version=None, type=ComponentType.DEVICE,
                    properties={"pci:address": "0000:00:06.0"})
    dev2 = Component(name="NVIDIA H200", version=None, type=ComponentType.DEVICE,
                     properties={"nvidia:uuid": "GPU-B078171D-94B0-6050-C265-ED06B96C5BB8"})
    taken: set[str] = set()
    dev.assign_ref(taken)
    dev2.assign_ref(taken)
    res.components += [dev, dev2]
    probes = _synthetic()[:2] + [ProbeResult("cuda", "pass", device="NVIDIA H200", device_id="1",
                                             facts={"uuid": "GPU-b078171d-94b0-6050-c265-ed06b96c5bb8"})]
    attach_probes(res, probes, create_devices=False)
    assert [p.device_ref for p in probes] == [dev.bom_ref, dev.bom_ref, dev2.bom_ref]
    assert len(res.components) == 2
    assert any(ev.method == "probe" for ev in dev.evidence)
    assert res.tool.collectors["probe"]


def test_cyclonedx_16_is_schema_valid_with_probe_properties() -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator
    from cyclonedx.validation.xml import XmlValidator

    from gpusbom.writers import WriterOptions, get_writer

    res = probe_scan(_synthetic(), timestamp="2026-01-01T00:00:00Z")
    for fmt, version, validator in (("cyclonedx-json", "1.6", JsonStrictValidator(SchemaVersion.V1_6)),
                                    ("cyclonedx-xml", "1.6", XmlValidator(SchemaVersion.V1_6)),
                                    ("cyclonedx-json", "1.5", JsonStrictValidator(SchemaVersion.V1_5))):
        buf = io.StringIO()
        get_writer(fmt).write(res, buf, WriterOptions(cyclonedx_version=version))
        assert validator.validate_str(buf.getvalue()) is None, (fmt, version)
    buf = io.StringIO()
    get_writer("cyclonedx-json").write(res, buf, WriterOptions())
    bom = json.loads(buf.getvalue())
    h200 = next(c for c in bom["components"] if c["name"] == "NVIDIA H200")
    props = {(p["name"], p["value"]) for p in h200["properties"]}
    assert ("gpusbom:probe:cuda:outcome", "pass") in props
    assert ("gpusbom:probe:cuda:compute-capability", "9.0") in props
    assert ("gpusbom:probe:opencl:outcome", "fail") in props
    assert ("gpusbom:probe:opencl:max-abs-error", "24") in props
    assert ("gpusbom:probe:opencl#2:error-name", "CL_DEVICE_NOT_AVAILABLE") in props
    meta = {(p["name"], p["value"]) for p in bom["metadata"]["properties"]}
    assert ("gpusbom:probe:hip:outcome", "skipped") in meta
    assert any(n == "gpusbom:probe:summary" for n, _ in meta)


def test_h200_probe_sbom_from_the_device_run_is_schema_valid() -> None:
    """The CycloneDX 1.6 SBOM `gpusbom probe` wrote on a real 2 x H200 host (kept as data)."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    path = os.path.join(HERE, "data", "h200x2-probe.cdx.json")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    bom = json.loads(text)
    gpus = [c for c in bom["components"] if c["name"] == "NVIDIA H200"]
    assert len(gpus) == 2
    for c in gpus:
        props = {p["name"]: p["value"] for p in c["properties"]}
        assert props["gpusbom:probe:cuda:outcome"] == "pass"
        assert props["gpusbom:probe:opencl:outcome"] == "pass"
        assert props["gpusbom:probe:cuda:compute-capability"] == "9.0"


def test_spdx_annotations_and_table() -> None:
    from gpusbom.writers import WriterOptions, get_writer

    res = probe_scan(_synthetic(), timestamp="2026-01-01T00:00:00Z")
    buf = io.StringIO()
    get_writer("spdx-json").write(res, buf, WriterOptions())  # validated by the writer
    doc = json.loads(buf.getvalue())
    # spdx-tools writes package annotations inside their package, the rest at the top
    texts = [a["comment"] for a in doc.get("annotations", [])]
    texts += [a["comment"] for p in doc["packages"] for a in p.get("annotations", [])]
    assert any("gpusbom:probe:cuda:outcome=pass" in t for t in texts)
    assert any("gpusbom:probe:hip:outcome=skipped" in t for t in texts)
    tv = io.StringIO()
    get_writer("spdx-tag-value").write(res, tv, WriterOptions())
    assert "AnnotationComment: <text>gpusbom:probe:" in tv.getvalue()
    table = io.StringIO()
    get_writer("table").write(res, table, WriterOptions(width=220))
    out = table.getvalue()
    assert "Probe (tiled FP32 matmul" in out
    assert "CL_DEVICE_NOT_AVAILABLE (-2)" in out and "max abs error 24" in out
    assert "probes: 1 error, 1 fail, 1 pass, 1 skipped, 1 timeout" in out


# --- CLI ----------------------------------------------------------------------------------------

@needs_opencl
def test_cli_probe_writes_json_and_cyclonedx(tmp_path) -> None:
    j, c = tmp_path / "p.json", tmp_path / "p.cdx.json"
    rc = main(["probe", "-b", "opencl", "-b", "cuda", "-q", "-o", f"json={j}", "-o", f"cyclonedx-json={c}"])
    assert rc == 0
    d = json.loads(j.read_text())
    assert d["target"]["kind"] == "host"
    assert any(p["backend"] == "opencl" and p["outcome"] == "pass" for p in d["probes"])
    assert "gpusbom:probe:opencl:outcome" in c.read_text()


@needs_opencl
def test_cli_require_pass(test_kernels, tmp_path) -> None:
    test_kernels("probe_test_kernels_wrong")
    assert main(["probe", "-b", "opencl", "-q", "--require-pass", "-o", f"json={tmp_path / 'x'}"]) == 1
    assert main(["probe", "-b", "opencl", "-q", "-o", f"json={tmp_path / 'x'}"]) == 0


def test_cli_usage_errors(capsys) -> None:
    assert main(["probe", "-b", "metal", "-q"]) == 2
    assert "unknown probe backend" in capsys.readouterr().err
    assert main(["scan", "--probe", "x"]) == 2
