"""The backend interface, shared by every probe backend module.

A backend module defines one ``Backend`` subclass and decorates it with ``@register``.
Both of its methods run inside a child process (``gpusbom.probe.worker``), never in
the scanner's own process: a driver that hangs or crashes takes only the child down.

- ``enumerate()`` returns the devices the runtime lists (``DeviceInfo``), or raises
  ``ProbeSkipped`` (no runtime / driver / device / permission) or ``ProbeError``.
- ``run(device_id, kernels)`` launches the matmul kernel on one device and returns a
  ``RunOutcome``: the device result is compared with the CPU reference by the caller
  (``kernel.max_abs_error``), never by the backend.
"""

from __future__ import annotations

import ctypes
import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import CollectorError
from .kernel import KernelSet

_REGISTRY: dict[str, type[Backend]] = {}


class ProbeSkipped(CollectorError):
    """Nothing to probe here: no runtime, no driver, no device, no permission."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ProbeError(CollectorError):
    """The runtime reported an error: its code and name (e.g. ``CL_DEVICE_NOT_AVAILABLE``)."""

    def __init__(self, code: int | None, name: str | None, message: str = "") -> None:
        super().__init__(f"{name or code}: {message}" if message else f"{name or code}")
        self.code = code
        self.name = name
        self.message = message


@dataclass
class DeviceInfo:
    id: str  # the backend's own index, passed back to run()
    name: str
    facts: dict[str, str] = field(default_factory=dict)


@dataclass
class RunOutcome:
    result: bytes  # N*N float32, row-major, as the device wrote it
    facts: dict[str, str] = field(default_factory=dict)
    #: the device's name as the runtime gives it (lets the runner skip enumeration)
    device: str | None = None


class Backend(ABC):
    id: ClassVar[str]
    display: ClassVar[str]
    #: the programming model the kernel is written in (``CUDA``, ``Vulkan compute``, ...)
    model: ClassVar[str] = ""
    #: file-name prefixes of the runtime libraries a run loads (``libcuda.so``): the paths
    #: actually mapped into the child are reported as ``runtime-library``
    runtime_libraries: ClassVar[tuple[str, ...]] = ()
    #: set when this backend enumerates devices but cannot launch the kernel at all:
    #: the runner then reports each device ``skipped`` with this reason, spawning nothing
    launch_skip: ClassVar[str | None] = None
    #: the Python package this backend imports in its children (``triton``, ``dpctl``):
    #: its children run in an interpreter that has it (``run_probes(python=...)``)
    python_package: ClassVar[str | None] = None

    def __init__(self) -> None:
        #: (error name, message) of parts of the runtime that ``enumerate()`` found broken
        #: while it still listed devices (a Vulkan ICD manifest naming a missing library):
        #: each is reported as a backend-level ``error`` beside the devices' results
        self.problems: list[tuple[str, str]] = []

    @abstractmethod
    def enumerate(self) -> list[DeviceInfo]: ...

    def isolate(self, device_id: str, facts: dict[str, str],
                workdir: str | None = None) -> tuple[str, dict[str, str]]:
        """(id to pass to the device's child, extra environment for it): a backend may
        restrict the child to its one device so the runtime initialises only that one.
        ``workdir``: a private temporary directory the backend may write to."""
        return device_id, {}

    def speculate(self, workdir: str | None = None) -> list[tuple[str, dict[str, str]]]:
        """Device children that can start before the enumeration child has answered:
        (child id, extra environment) pairs, each exactly what ``isolate`` gives for
        one device, found from a cheap count (no runtime loaded, in the parent). The
        runner keeps those ``isolate`` asks for again and kills the rest. [] when unsure.
        ``workdir``: the same private directory ``isolate`` gets."""
        return []

    #: True when a non-empty ``speculate()`` is known to name every device the runtime
    #: would list: the runner then starts no enumeration child (one process fewer
    #: initialising the runtime at once) and asks ``devices_from_runs`` for the list
    speculation_covers_all: ClassVar[bool] = False

    def devices_from_runs(
        self, answers: list[tuple[str, dict[str, str], dict[str, Any]]]
    ) -> list[DeviceInfo] | None:
        """The devices ``enumerate()`` would list, in its order and with its ids, built
        from the speculative children's answers: (child id, extra environment, the
        child's ``ok`` payload with ``device`` and ``facts``), one per child. Runs in the
        parent. None when unsure: the runner then enumerates after all."""
        return None

    @abstractmethod
    def run(self, device_id: str, kernels: KernelSet) -> RunOutcome: ...


#: backend id -> module of this package (imported only where needed: mostly in the child)
BACKEND_MODULES = {
    "cuda": "cuda",
    "hip": "hip",
    "level-zero": "level_zero",
    "opencl": "opencl",
    "sycl": "sycl",
    "triton": "triton",
    "vulkan": "vulkan",
}


def backend(backend_id: str) -> Backend:
    importlib.import_module(f"{__package__}.{BACKEND_MODULES[backend_id]}")
    return _REGISTRY[backend_id]()


def register(cls: type[Backend]) -> type[Backend]:
    _REGISTRY[cls.id] = cls
    return cls


def registry() -> dict[str, type[Backend]]:
    return _REGISTRY


def load_library(names: list[str], what: str) -> ctypes.CDLL:
    """dlopen the first of ``names`` that loads; ProbeSkipped naming them all otherwise."""
    errors: list[str] = []
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError as exc:
            errors.append(str(exc).split(":")[-1].strip() or name)
    raise ProbeSkipped(f"no {what}: {names[0]} not found")


def mapped_libraries(prefixes: tuple[str, ...], maps: str = "/proc/self/maps") -> list[str]:
    """Paths of the shared libraries mapped into this process whose file name starts with
    one of ``prefixes`` (the runtime a launch really used, wherever the loader found it)."""
    out: list[str] = []
    try:
        with open(maps, encoding="utf-8", errors="replace") as f:
            for line in f:
                path = line.rstrip("\n").split(None, 5)[-1] if line.count(" ") >= 5 else ""
                if path.startswith("/") and path not in out \
                        and path.rsplit("/", 1)[-1].startswith(prefixes):
                    out.append(path)
    except OSError:
        pass
    return out


def pci_bus_id(domain: int, bus: int, device: int, function: int = 0) -> str:
    """``0000:3b:00.0``: the form nvidia-smi and sysfs use (lower case)."""
    return f"{domain:04x}:{bus:02x}:{device:02x}.{function:x}"


def uuid_text(raw: bytes) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
