"""AMD and Intel devices from sysfs/debugfs.

No AMD or Intel GPU was available to record a snapshot, so the trees below are
HAND-WRITTEN, not recorded output. File names and formats follow the kernel:
- KFD topology ``/sys/class/kfd/kfd/topology/nodes/N/properties`` ("name value" lines as
  printed by drivers/gpu/drm/amd/amdkfd/kfd_topology.c; ``location_id`` is the PCI
  bus/device/function, ``simd_count`` 0 on CPU nodes);
- amdgpu ``vbios_version`` (Documentation/gpu/amdgpu/driver-misc.rst) and the
  ``fw_version/*_fw_version`` attributes (amdgpu_ucode.c, "0x%08x");
- i915 ``gt/uc/guc_info`` / ``huc_info`` in debugfs (intel_uc_fw.c: "GuC firmware: ...",
  "version: wanted X, found Y"), root-only.
The values (an MI300X-class gfx942 device, an Arc/Flex DG2 device) are illustrative.
"""

from __future__ import annotations

import os
from pathlib import Path

from gpusbom.host import scan_host
from gpusbom.host.discover import gfx_target
from gpusbom.model import ComponentType


def _w(root: Path, path: str, text: str) -> None:
    p = root / path.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def _link(root: Path, path: str, target: str) -> None:
    p = root / path.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, p)


def _amd(root: Path) -> None:
    dev = "/sys/bus/pci/devices/0000:c1:00.0"
    _w(root, f"{dev}/vendor", "0x1002\n")
    _w(root, f"{dev}/device", "0x74a1\n")
    _w(root, f"{dev}/class", "0x120000\n")
    _w(root, f"{dev}/numa_node", "1\n")
    _w(root, f"{dev}/vbios_version", "113-M3000100-102\n")
    _w(root, f"{dev}/fw_version/mec_fw_version", "0x000000a2\n")
    _w(root, f"{dev}/fw_version/sos_fw_version", "0x00270082\n")
    _w(root, f"{dev}/fw_version/vce_fw_version", "0x00000000\n")
    _link(root, f"{dev}/driver", "../../../bus/pci/drivers/amdgpu")
    kfd = "/sys/class/kfd/kfd/topology/nodes"
    _w(root, f"{kfd}/0/properties", "cpu_cores_count 96\nsimd_count 0\ngfx_target_version 0\n"
       "location_id 0\ndomain 0\n")
    loc = (0xC1 << 8) | (0 << 3) | 0
    _w(root, f"{kfd}/1/properties", f"cpu_cores_count 0\nsimd_count 1216\n"
       f"gfx_target_version 90402\nvendor_id 4098\ndevice_id 29857\nlocation_id {loc}\n"
       "domain 0\ndrm_render_minor 128\n")
    _w(root, "/sys/module/amdgpu/version", "6.8.5\n")
    _w(root, "/proc/modules", "amdgpu 15110144 0 - Live 0x0000000000000000\n")


def _intel(root: Path, debugfs: bool) -> None:
    dev = "/sys/bus/pci/devices/0000:03:00.0"
    _w(root, f"{dev}/vendor", "0x8086\n")
    _w(root, f"{dev}/device", "0x56c0\n")
    _w(root, f"{dev}/class", "0x038000\n")
    (root / f"{dev}/drm/card1".lstrip("/")).mkdir(parents=True)
    _link(root, f"{dev}/driver", "../../../bus/pci/drivers/i915")
    _w(root, "/proc/modules", "i915 4177920 0 - Live 0x0000000000000000\n")
    (root / "sys/module/i915").mkdir(parents=True)
    if debugfs:
        _w(root, "/sys/kernel/debug/dri/1/gt/uc/guc_info",
           "GuC firmware: i915/dg2_guc_70.bin\n\tstatus: RUNNING\n"
           "\tversion: wanted 70.5, found 70.36.0\n")
        _w(root, "/sys/kernel/debug/dri/1/gt/uc/huc_info",
           "HuC firmware: i915/dg2_huc_gsc.bin\n\tstatus: RUNNING\n\tversion: found 7.10.3\n")


def _deps(result, ref):  # type: ignore[no-untyped-def]
    return {r.target for r in result.relationships if r.source == ref}


def test_gfx_target() -> None:
    assert gfx_target(90402) == "gfx942"
    assert gfx_target(90010) == "gfx90a"
    assert gfx_target(90500) == "gfx950"
    assert gfx_target(100100) == "gfx1010"
    assert gfx_target(110000) == "gfx1100"


def test_amd_hand_written_sysfs(tmp_path: Path) -> None:
    _amd(tmp_path)
    r = scan_host(str(tmp_path))
    (gpu,) = [c for c in r.components if c.type is ComponentType.DEVICE]
    assert gpu.name == "AMD GPU gfx942"
    assert gpu.properties["amd:gfx-target"] == "gfx942"
    assert gpu.properties["pci:class"] == "0x120000" and gpu.properties["numa-node"] == "1"
    assert gpu.properties["driver"] == "amdgpu"
    fw = {c.name: c for c in r.components if c.type is ComponentType.FIRMWARE}
    assert {n: c.version for n, c in fw.items()} == {
        "amd-vbios": "113-M3000100-102", "amdgpu-mec-firmware": "0x000000a2",
        "amdgpu-sos-firmware": "0x00270082"}
    (mod,) = [c for c in r.components if c.type is ComponentType.DEVICE_DRIVER]
    assert (mod.name, mod.version) == ("amdgpu", "6.8.5")
    assert _deps(r, gpu.bom_ref) == {mod.bom_ref} | {c.bom_ref for c in fw.values()}
    assert not [f for f in r.findings if f.id == "host/no-gpu"]


def test_intel_hand_written_sysfs_and_debugfs(tmp_path: Path) -> None:
    _intel(tmp_path, debugfs=True)
    r = scan_host(str(tmp_path))
    (gpu,) = [c for c in r.components if c.type is ComponentType.DEVICE]
    assert gpu.properties["driver"] == "i915"
    assert gpu.properties["intel:guc"] == "70.36.0" and gpu.properties["intel:huc"] == "7.10.3"
    fw = {c.name: c.version for c in r.components if c.type is ComponentType.FIRMWARE}
    assert fw == {"intel-guc-firmware": "70.36.0", "intel-huc-firmware": "7.10.3"}
    (mod,) = [c for c in r.components if c.type is ComponentType.DEVICE_DRIVER]
    assert mod.name == "i915" and mod.bom_ref in _deps(r, gpu.bom_ref)


def test_intel_without_debugfs_says_skipped(tmp_path: Path) -> None:
    _intel(tmp_path, debugfs=False)
    r = scan_host(str(tmp_path))
    assert any("GuC/HuC firmware versions need debugfs (root): skipped" in u.reason
               for u in r.unknowns)
    assert not [c for c in r.components if c.type is ComponentType.FIRMWARE]
