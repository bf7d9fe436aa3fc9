"""Vulkan compute: reported, not launched.

A Vulkan compute probe needs a SPIR-V compute shader, which gpusbom does not ship
yet (see level_zero.py). The backend says whether a Vulkan loader is present and
reports ``skipped`` with the reason either way, so the SBOM records that Vulkan
was not exercised rather than staying silent.
"""

from __future__ import annotations

from . import kernel as K
from .base import Backend, DeviceInfo, ProbeSkipped, RunOutcome, load_library, register


@register
class VulkanBackend(Backend):
    id = "vulkan"
    display = "Vulkan compute"

    def enumerate(self) -> list[DeviceInfo]:
        load_library(["libvulkan.so.1", "libvulkan.so"], "Vulkan loader")
        raise ProbeSkipped("Vulkan loader present, but the Vulkan compute probe needs a SPIR-V "
                           "shader that gpusbom does not ship yet")

    def run(self, device_id: str, kernels: K.KernelSet) -> RunOutcome:
        raise ProbeSkipped("no SPIR-V compute shader")
