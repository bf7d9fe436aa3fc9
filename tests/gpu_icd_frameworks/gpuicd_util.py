"""Helpers for the OpenCL / Vulkan / Triton / framework collector tests.

* ``real_wheel``: a pinned (sha256) real wheel, fetched once with ``pip download`` into
  the test cache (``~/.cache/gpusbom-test``, outside the repository);
* ``extract``: unpack chosen members of a wheel (always its ``.dist-info``) into a
  temporary root's site-packages, as pip would lay them out;
* ``collect``: build an ``FsView`` over a root with ``FsView.from_directory`` and run
  collectors (package catalogers first, then stack collectors, then fusion) exactly as
  a scan does.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path

from pinned_wheels import pinned_wheel  # tests/pinned_wheels.py

from gpusbom.collectors import all_collectors
from gpusbom.fsview.types import Spool
from gpusbom.fsview.view import FsView
from gpusbom.model import Component, Target, Unknown
from gpusbom.scan import build_matcher, run_collectors

SITE = "usr/local/lib/python3.11/site-packages"
WHEELS = {
    "triton-3.6.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl": (
        "triton==3.6.0",
        "e8e323d608e3a9bfcc2d9efcc90ceefb764a82b99dea12a86d643c72539ad5d3",
    ),
    "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl": (
        "torch==2.13.0",
        "6746dbcbeb526eb61330b76b41ff1b4eb848951103a892eeb080dfa2b264667b",
    ),
    "tensorflow_cpu-2.21.0-cp311-cp311-manylinux_2_27_x86_64.whl": (
        "tensorflow-cpu==2.21.0",
        "2b847d217b02ee7731ed91431daf3250daa0196c3c94614d23be27232e6e5b6c",
    ),
    "onnxruntime-1.30.0-cp311-cp311-manylinux_2_28_x86_64.whl": (
        "onnxruntime==1.30.0",
        "fd54b314ea385bcecac69ab431f020ba503e3878dad4ebb645fec5a24b041242",
    ),
    "jaxlib-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl": (
        "jaxlib==0.10.2",
        "1faca3c5d4662cb4a6130a68105d68bb520764817e165d6eebfd6786c0d1f30f",
    ),
}


def real_wheel(filename: str) -> Path:
    """The pinned wheel from the cache, downloading it when missing; skips when pip cannot."""
    req, sha = WHEELS[filename]
    return pinned_wheel(filename, req, sha, timeout=900)


def extract(filename: str, root: Path, want: Callable[[str], bool]) -> Path:
    """Unpack the wheel's dist-info and the members ``want`` accepts into ROOT/SITE."""
    site = root / SITE
    with zipfile.ZipFile(real_wheel(filename)) as z:
        for info in z.infolist():
            name = info.filename
            if name.endswith("/"):
                continue
            if not (name.split("/", 1)[0].endswith(".dist-info") or want(name)):
                continue
            dest = site / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(dest, mode)
    return site


def collect(
    root: Path, ids: Iterable[str] | None = None, env: dict[str, str] | None = None
) -> tuple[list[Component], list[Unknown]]:
    """Run the collectors ``ids`` (all when None) over ROOT as a scan does, fused."""
    reg = all_collectors()
    classes = list(reg.values()) if ids is None else [reg[i] for i in ids]
    matcher = build_matcher(classes)
    spool = Spool()
    try:
        fs = FsView.from_directory(root, matcher, spool)
        target = Target(kind="directory", reference=str(root), env=dict(env or {}))
        return run_collectors(fs, target, classes)
    finally:
        spool.close()


def by_stack(components: list[Component], stack: str) -> list[Component]:
    return [c for c in components if c.stack == stack]


def triples(components: list[Component], stack: str) -> set[tuple[str, str | None, str | None]]:
    """(name, version, path) of a stack's components; path = the library or the install
    location when known, else the first evidence path."""
    out = set()
    for c in by_stack(components, stack):
        path = c.properties.get("library") or c.properties.get("location")
        if path is None and c.evidence:
            path = c.evidence[0].path
        out.add((c.name, c.version, path))
    return out
