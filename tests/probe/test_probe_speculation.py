"""The runner without an enumeration child: speculative CUDA children that cover every GPU
(``/proc/driver/nvidia/gpus``) list the devices themselves; any doubt enumerates after all.

Children are faked (``_start`` writes each child's answer and runs ``true``): no driver needed.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest

from gpusbom.probe import runner
from gpusbom.probe.cuda import CudaBackend

GPUS = {  # UUID -> (pci bus id as cuDeviceGetPCIBusId gives it, name)
    "GPU-bbbb": ("00000000:9a:00.0", "NVIDIA H200"),
    "GPU-aaaa": ("00000000:18:00.0", "NVIDIA H200"),
}


def _facts(uuid: str, name: str) -> dict[str, str]:
    bus, _ = GPUS[uuid]
    return {"vendor": "NVIDIA Corporation", "uuid": uuid, "pci-bus-id": bus,
            "compute-capability": "9.0" if "H200" in name else "8.0",
            "compute-units": "132" if "H200" in name else "108"}


class _Fake(CudaBackend):
    def speculate(self, workdir: str | None = None) -> list[tuple[str, dict[str, str]]]:
        return [("0", {"CUDA_VISIBLE_DEVICES": u}) for u in sorted(GPUS)]


def _run(monkeypatch: pytest.MonkeyPatch, tmp_path: Any, fail: str | None = None,
         names: dict[str, str] | None = None) -> tuple[list[Any], list[list[str]]]:
    started: list[list[str]] = []
    names = names or {}

    def start(child: runner._Child, env: dict[str, str]) -> None:
        started.append(child.args)
        if child.args[0] == "enumerate":
            # CUDA's own order: PCI order for GPUs alike
            order = sorted(GPUS, key=lambda u: GPUS[u][0])
            p: dict[str, Any] = {"status": "ok", "devices": [
                {"id": str(i), "name": names.get(u, GPUS[u][1]),
                 "facts": _facts(u, names.get(u, GPUS[u][1]))} for i, u in enumerate(order)]}
        else:
            u = env["CUDA_VISIBLE_DEVICES"]
            name = names.get(u, GPUS[u][1])
            if u == fail:
                p = {"status": "error", "code": 2, "name": "CUDA_ERROR_OUT_OF_MEMORY",
                     "message": "cuMemAlloc_v2"}
            else:
                p = {"status": "ok", "kernel": "k", "max_abs_error": 0.0, "device": name,
                     "facts": {**_facts(u, name), "init-ms": "1.0"}}
        with open(child.out, "w", encoding="utf-8") as f:
            json.dump(p, f)
        child.start = time.perf_counter()
        child.proc = subprocess.Popen(["true"])

    monkeypatch.setattr(runner, "_start", start)
    monkeypatch.setattr(runner, "backend", lambda _id: _Fake())
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    return runner._probe_backend("cuda", 10.0, str(tmp_path), {}, "k"), started


def test_children_covering_every_gpu_replace_enumeration(monkeypatch, tmp_path) -> None:
    results, started = _run(monkeypatch, tmp_path)
    assert [a[0] for a in started] == ["run", "run"]  # no enumeration child
    assert [(r.device_id, r.facts["uuid"], r.outcome) for r in results] == [
        ("0", "GPU-aaaa", "pass"), ("1", "GPU-bbbb", "pass")]
    assert all(r.device == "NVIDIA H200" and "enumerate-ms" not in r.facts for r in results)
    assert results[0].facts["pci-bus-id"] == "00000000:18:00.0"


def test_a_failed_child_enumerates_after_all(monkeypatch, tmp_path) -> None:
    results, started = _run(monkeypatch, tmp_path, fail="GPU-bbbb")
    assert [a[0] for a in started] == ["run", "run", "enumerate"]  # the children are not rerun
    assert [(r.device_id, r.outcome) for r in results] == [("0", "pass"), ("1", "error")]
    assert results[1].error_name == "CUDA_ERROR_OUT_OF_MEMORY"
    assert results[1].device == "NVIDIA H200" and "enumerate-ms" in results[1].facts


def test_unlike_gpus_enumerate(monkeypatch, tmp_path) -> None:
    # FASTEST_FIRST orders unlike GPUs by speed: only enumeration knows the ids
    results, started = _run(monkeypatch, tmp_path, names={"GPU-bbbb": "NVIDIA A100"})
    assert [a[0] for a in started] == ["run", "run", "enumerate"]
    assert [r.outcome for r in results] == ["pass", "pass"]


def test_devices_from_runs_needs_the_gpu_each_child_was_started_for() -> None:
    be = CudaBackend()
    ok = {"status": "ok", "device": "NVIDIA H200", "facts": _facts("GPU-aaaa", "NVIDIA H200")}
    assert be.devices_from_runs([("0", {"CUDA_VISIBLE_DEVICES": "GPU-aaaa"}, ok)])
    # a MIG-enabled GPU answers with another UUID: enumerate
    assert be.devices_from_runs([("0", {"CUDA_VISIBLE_DEVICES": "GPU-bbbb"}, ok)]) is None
    assert be.devices_from_runs([("0", {"CUDA_VISIBLE_DEVICES": "GPU-aaaa"},
                                  {**ok, "device": None})]) is None


@pytest.mark.parametrize("listed", [False, True], ids=["vendors-dir", "OCL_ICD_FILENAMES"])
def test_pocl_child_starts_beside_the_enumeration(monkeypatch: pytest.MonkeyPatch,
                                                  listed: bool) -> None:
    """Real PoCL: its device child starts at once from the .icd file or OCL_ICD_FILENAMES
    (PoCL loads LLVM, so waiting for the enumeration first costs ~0.3-1 s) and is kept, not
    started again, when the enumeration lists the platform's one device."""
    from pathlib import Path

    vendors = Path("/etc/OpenCL/vendors")
    pocl = [p.read_text(errors="replace").strip() for p in vendors.glob("*.icd")
            if "pocl" in p.read_text(errors="replace")]
    if not pocl:
        pytest.skip("no PoCL ICD registered")
    if listed:  # as some GPU hosts set it (seen on the H200 machines)
        monkeypatch.setenv("OCL_ICD_FILENAMES", f"{pocl[0]}:libnvidia-opencl.so.1")
    events: list[tuple[str, list[str]]] = []
    real_start, real_wait = runner._start, runner._wait

    def start(child: runner._Child, env: dict[str, str]) -> None:
        events.append(("start", child.args[:3]))
        real_start(child, env)

    def wait(child: runner._Child, timeout: float) -> None:
        events.append(("wait", child.args[:3]))
        real_wait(child, timeout)

    monkeypatch.setattr(runner, "_start", start)
    monkeypatch.setattr(runner, "_wait", wait)
    results = runner.run_probes(["opencl"], timeout=60)
    found = [r for r in results if "Portable Computing Language" in r.facts.get("platform", "")]
    assert found and all(r.outcome == "pass" for r in found), results
    starts = [a for e, a in events if e == "start"]
    assert starts == [["enumerate", "opencl"], ["run", "opencl", "0:0"]]  # never restarted
    # the device child was started before the runner waited for the enumeration's answer
    assert events.index(("start", ["run", "opencl", "0:0"])) < events.index(
        ("wait", ["enumerate", "opencl"]))
