"""Intel GPUs: what a SYCL binary's device code was built for, and whether it loads on a GPU.

The table is ``gpusbom/data/intel_gpus.json`` (Intel's compute-runtime: AOT product configs,
device acronyms, the configs a binary of another config also loads on, PCI device ids; the
file says where each comes from). A config or id not in it is reported as unknown.

Per file (the ``intel:*`` target keys of :class:`gpusbom.devicecode.DeviceCode`):

* ``intel:aot``: the AOT device configs of its zebins, by name (``pvc-xt-c0``,
  ``bmg-g21-a0``; ``ip-35.11.0`` for a config the table does not know);
* ``intel:spirv``: ``spir64`` when it holds SPIR-V the driver compiles at first launch (a
  ``spir64`` image, or the ``generic_ir`` member of an ocloc fat binary);
* ``intel:sycl-targets``: the DPC++ targets named in the file (``spir64``, ``spir64_gen``).

The verdict of one file on one Intel GPU (:func:`judge_intel`): ``runs`` when an AOT zebin is
for the GPU's family (or one its config loads on); else ``runs-with-jit`` when there is
SPIR-V (the Level Zero / OpenCL driver compiles it); else ``will-fail``
(``ZE_RESULT_ERROR_INVALID_NATIVE_BINARY`` / ``CL_INVALID_BINARY``, no image for the device).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from .._resources import read_text
from ..devicecode import DeviceCode
from ..model import Component

__all__ = ["config_family", "config_name", "intel_properties", "judge_intel",
           "lookup_device", "pci_family", "runtime_present"]

NO_IMAGE = ("ZE_RESULT_ERROR_INVALID_NATIVE_BINARY / CL_INVALID_BINARY (no device image "
            "for this GPU and no SPIR-V to compile)")


@cache
def table() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(read_text("gpusbom", "data/intel_gpus.json"))
    return data


def _key(config: int) -> str:
    return f"0x{config:08x}"


def config_name(config: int) -> str:
    """``0x030f0007`` -> ``pvc-xt-c0``; an unknown config -> ``ip-<a.r.v>``."""
    row = table()["product_configs"].get(_key(config))
    if row:
        return str(row["name"])
    return f"ip-{config >> 22}.{(config >> 14) & 0xFF}.{config & 0x3F}"


def config_family(config: int) -> str | None:
    row = table()["product_configs"].get(_key(config))
    return str(row["family"]) if row else None


def _family_of_name(name: str) -> str | None:
    for row in table()["product_configs"].values():
        if row["name"] == name:
            return str(row["family"])
    return None


def pci_family(device_id: str | int) -> tuple[str, str | None] | None:
    """PCI device id (``0x0bd5``, ``0BD5`` or an int) -> (family, marketing name or None)."""
    if isinstance(device_id, int):
        key = f"0x{device_id:04x}"
    else:
        s = device_id.strip().lower()
        key = s if s.startswith("0x") else "0x" + s
    row = table()["pci_ids"].get(key)
    return (str(row[0]), row[1]) if row else None


def lookup_device(text: str) -> tuple[str, str] | None:
    """A target string -> (family, label): ``pvc``, ``dg2``, ``bmg``, ``bmg-g21``,
    ``intel:0x0bd5``, ``0xe20b``, ``pvc-xt-c0``. None when it names no Intel GPU."""
    t = text.strip().lower()
    if t.startswith("intel:"):
        t = t[len("intel:"):]
    if t.startswith("0x") and len(t) == 6:
        hit = pci_family(t)
        if hit:
            fam, name = hit
            return fam, f"{name or table()['family_names'].get(fam, fam)} [8086:{t[2:]}]"
        return None
    data = table()
    if t in data["acronyms"]:
        fam = config_family(int(data["acronyms"][t], 16)) or t
        return fam, f"{data['family_names'].get(fam, fam)} ({t})"
    named = _family_of_name(t)
    if named:
        return named, f"{data['family_names'].get(named, named)} ({t})"
    return None


def _loads_on(config: int) -> set[str]:
    """The families a zebin of ``config`` loads on: its own and those compute-runtime's
    compatibility mapping lists."""
    fams = {f for f in (config_family(config),) if f}
    for other in table()["compatible"].get(_key(config), []):
        f = config_family(int(other, 16))
        if f:
            fams.add(f)
    return fams


def intel_properties(analysis: dict[str, Any]) -> dict[str, str]:
    """The ``intel:*`` target keys from a :class:`gpusbom.binary.sycl_stream.SyclScanner`
    result (``analysis["intel"]``)."""
    intel = analysis.get("intel") or {}
    props: dict[str, str] = {}
    configs = [int(c) for c in intel.get("configs") or []]
    if configs:
        props["intel:aot"] = ",".join(sorted({config_name(c) for c in configs}))
        props["intel:ip"] = ",".join(
            sorted({f"{c >> 22}.{(c >> 14) & 0xFF}.{c & 0x3F}" for c in configs}))
    targets = list(intel.get("sycl") or [])
    if targets:
        props["intel:sycl-targets"] = ",".join(sorted(targets))
    if "spir64" in targets or "generic_ir" in (intel.get("members") or []):
        props["intel:spirv"] = "spir64"
    return props


def _aot_families(d: DeviceCode) -> dict[str, str]:
    """family -> the AOT config name that loads on it."""
    out: dict[str, str] = {}
    rows = table()["product_configs"]
    by_name = {r["name"]: int(k, 16) for k, r in rows.items()}
    for name in d.values("intel:aot"):
        cfg = by_name.get(name)
        if cfg is None:
            continue
        for fam in sorted(_loads_on(cfg)):
            out.setdefault(fam, name)
    return out


def judge_intel(d: DeviceCode, family: str, label: str) -> tuple[str, str]:
    """One file's Intel device code on an Intel GPU of ``family`` (``pvc``, ``dg2``, ``bmg``):
    (``runs`` | ``runs-with-jit`` | ``will-fail``, the reason)."""
    aot = d.values("intel:aot")
    hit = _aot_families(d).get(family)
    if hit:
        return "runs", f"AOT zebin {hit} loads on {label}"
    no_aot = f"no AOT image for {family or label}" + (f" (has {', '.join(aot)})" if aot else "")
    if d.values("intel:spirv"):
        return "runs-with-jit", (f"{no_aot}; SPIR-V (spir64) is compiled by the Level Zero / "
                                 "OpenCL driver at first launch")
    return "will-fail", f"{no_aot}: {NO_IMAGE}"


#: stacks whose components are an Intel GPU runtime the SYCL code loads through
RUNTIME_STACKS = frozenset({"intel-gpu", "level-zero", "oneapi"})


def runtime_present(components: list[Component]) -> list[Component]:
    """The image's Intel GPU runtime components (NEO / Level Zero / oneAPI SYCL runtime)."""
    return [c for c in components if c.stack in RUNTIME_STACKS]
