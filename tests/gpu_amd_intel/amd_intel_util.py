"""Helpers of the ROCm / oneAPI / Level Zero / Intel GPU collector tests.

* ``DEB_PINS``: real Debian 12 "bookworm" (main) packages, pinned by sha256 and size
  exactly as ``apt-cache show NAME=VERSION`` prints them; obtained with the project's
  fixture fetcher (the machine's apt sources, cached and re-verified) — never stored in
  the repository.
* ``build_root(tmp, debs, extra)``: a root filesystem on disk holding the packages'
  files (merged /usr, as Debian 12 images have) and a dpkg database written the way
  ``fixtures/debpkg.py`` writes it (status + info/*.list), plus hand-written extra files.
* ``observe(root_or_view)``: runs every registered collector like the scanner does and
  returns (raw stack observations, fused components, unknowns).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fixtures.debpkg import DebPackage, read_deb, write_dpkg_db
from fixtures.fetch import Pin, fetch_bytes
from fixtures.layers import LayerTree
from gpusbom.collectors import all_collectors
from gpusbom.collectors.base import CollectContext, OwnershipIndex
from gpusbom.fsview.types import Limits, Spool
from gpusbom.fsview.view import FsView
from gpusbom.fusion import fuse
from gpusbom.model import Component, Target, Unknown, product_properties
from gpusbom.scan import build_matcher

MY_COLLECTORS = ("rocm", "intel-oneapi", "level-zero", "intel-gpu")
MERGED_USR = {"bin": "usr/bin", "lib": "usr/lib", "lib64": "usr/lib64", "sbin": "usr/sbin"}

# name -> (version, archive path, size, sha256), from `apt-cache show` on Debian 12
_PIN_ROWS = {
    "libamdhip64-5": ("5.2.3-8", "pool/main/r/rocm-hipamd/libamdhip64-5_5.2.3-8_amd64.deb", 4865232, "e89c3757b6ca16b7a03374a0a42402ab19e9e7000251d47379838be965330ebd"),
    "librocrand1": ("5.3.3-4", "pool/main/r/rocrand/librocrand1_5.3.3-4_amd64.deb", 8235040, "b145d4e47a26ce14da5f8550a092db8d3c7e2d84174c68885336de40f51b7b81"),
    "libhiprand1": ("5.3.3-4", "pool/main/r/rocrand/libhiprand1_5.3.3-4_amd64.deb", 9768, "c502efcfcf229efec8d92b2143590c49a83af6a3a344eb1ecd675a01ba994765"),
    "rocminfo": ("5.2.3-2", "pool/main/r/rocminfo/rocminfo_5.2.3-2_amd64.deb", 22360, "e3e71f70ea0f50a38f113798d71a85be4ff1fe1f7555c31c942eb00c4554eac2"),
    "rocm-smi": ("5.2.3-2", "pool/main/r/rocm-smi-lib/rocm-smi_5.2.3-2_amd64.deb", 48620, "054f32d833dda9c2cadb5048a922b2fc233f918f0685d9b1d513ccfc2b22fbf3"),
    "librocm-smi64-1": ("5.2.3-2", "pool/main/r/rocm-smi-lib/librocm-smi64-1_5.2.3-2_amd64.deb", 459208, "bf78b7308dbd4ec0186139a2cbc65cdeb3bb59233f774ec8d778115807a68fed"),
    "libhipsparse0": ("5.3.3+dfsg-2~deb12u1", "pool/main/h/hipsparse/libhipsparse0_5.3.3+dfsg-2~deb12u1_amd64.deb", 45516, "33a8ecf0b425eae1a88c47441b6abbaea7f70ddd17fc0c6dc9c103914e87d265"),
    "librocprim-dev": ("5.3.3-4", "pool/main/r/rocprim/librocprim-dev_5.3.3-4_amd64.deb", 143800, "86fb6bbdb6524db89fc63bcb0003e862ecbb3a3e37dd16594f713b7be61f29cd"),
    "libhsa-runtime64-1": ("5.2.3-3", "pool/main/r/rocr-runtime/libhsa-runtime64-1_5.2.3-3_amd64.deb", 439400, "9b633756945b16124376b274dbc681e4022c2b9704b8bdfa04637b09c7bfad93"),
    "libze1": ("1.8.12-1", "pool/main/l/level-zero/libze1_1.8.12-1_amd64.deb", 108288, "403b3e3821a3e2dfdc8e6392300350943de2f66d1ada1dc551f8d5ac175ef944"),
    "intel-opencl-icd": ("22.43.24595.41-1", "pool/main/i/intel-compute-runtime/intel-opencl-icd_22.43.24595.41-1_amd64.deb", 3711452, "698b08ffaec1da7821daad3965e78b1667a5e6f268fa7ccfaae24fb35c30dd08"),
    "libigc1": ("1.0.12504.6-1+deb12u1", "pool/main/i/intel-graphics-compiler/libigc1_1.0.12504.6-1+deb12u1_amd64.deb", 9287496, "148106ff69329fb1bd0dbab83814bdd8563edee6a7c2097dc21d00e9c3818dc2"),
    "libigdgmm12": ("22.3.3+ds1-1", "pool/main/i/intel-gmmlib/libigdgmm12_22.3.3+ds1-1_amd64.deb", 139496, "9591d6be5d624422ae58b9bba0e013bd6dbdd1f1420d60de4eb2cd1186f2f44a"),
}  # fmt: skip

DEB_PINS = {
    name: Pin("deb", name, ver, path, sha, size, "amd64")
    for name, (ver, path, size, sha) in _PIN_ROWS.items()
}


def debs(names: Iterable[str]) -> list[DebPackage]:
    out = []
    for n in names:
        pin = DEB_PINS[n]
        out.append(read_deb(fetch_bytes(pin), pin.filename))
    return out


def _materialise(tree: LayerTree, root: Path) -> None:
    for e in tree.sorted_entries():
        dest = root / e.path
        if e.kind == "dir":
            dest.mkdir(parents=True, exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_symlink() or dest.exists():
            dest.unlink()
        if e.kind == "symlink":
            os.symlink(e.linkname, dest)
        elif e.kind == "hardlink":
            os.link(root / e.linkname, dest)
        else:
            dest.write_bytes(e.data)
            os.chmod(dest, e.mode or 0o644)


def build_root(
    root: Path,
    packages: list[DebPackage],
    extra_files: dict[str, bytes] | None = None,
    extra_links: dict[str, str] | None = None,
) -> Path:
    tree = LayerTree("test root", 1735689600, dir_aliases=dict(MERGED_USR))
    for d in ("usr", "usr/bin", "usr/lib", "usr/lib64", "usr/sbin", "etc", "var/lib", "opt"):
        tree.dir(d)
    for link, target in MERGED_USR.items():
        tree.symlink(link, target)
    for p in packages:
        p.install_into(tree)
    if packages:
        write_dpkg_db(tree, packages)
    for path, data in (extra_files or {}).items():
        tree.file(path.lstrip("/"), data)
    for path, target in (extra_links or {}).items():
        tree.symlink(path.lstrip("/"), target)
    root.mkdir(parents=True, exist_ok=True)
    _materialise(tree, root)
    return root


def run_all(fs: FsView) -> tuple[list[Component], list[Component], list[Unknown]]:
    """(stack observations of MY collectors, fused components, unknowns)."""
    ownership = OwnershipIndex(fs)
    packages: list[Component] = []
    observations: list[Component] = []
    mine: list[Component] = []
    unknowns: list[Unknown] = []
    target = Target(kind="directory", reference="test")
    for cls in sorted(all_collectors().values(), key=lambda c: (c.phase, c.id)):
        ctx = CollectContext(fs=fs, target=target, collector_id=cls.id, ownership=ownership)
        found = list(cls().collect(ctx))
        unknowns.extend(ctx.unknowns)
        if cls.phase <= 1:
            packages.extend(found)
        else:
            observations.extend(found)
            if cls.id in MY_COLLECTORS:
                # copies: fusion rewrites the evidence lists of what it keeps
                mine.extend(Component.from_dict(c.to_dict()) for c in found)
    return mine, fuse(packages, observations, ownership.owner), unknowns


def observe_dir(root: Path) -> tuple[list[Component], list[Component], list[Unknown]]:
    limits = Limits()
    classes = list(all_collectors().values())
    with Spool(limits) as spool:
        fs = FsView.from_directory(root, build_matcher(classes), spool, limits)
        return run_all(fs)


def triples(components: Iterable[Component]) -> set[tuple[str, str | None, str | None]]:
    """(product, version, first evidence path) of stack observations."""
    return {
        ((c.product_name or c.name), c.version, c.evidence[0].path if c.evidence else None)
        for c in components
    }


def by_product(components: Iterable[Component], product: str) -> list[Component]:
    return [c for c in components if c.product_name == product]


def merged_into(fused: list[Component], path: str) -> list[dict[str, Any]]:
    """The fused components holding evidence for ``path`` from one of MY collectors."""
    return [
        {"name": c.name, "version": c.version, "ecosystem": c.ecosystem, "properties": {**c.properties, **product_properties(c)}}
        for c in fused
        if any(e.path == path and e.collector in MY_COLLECTORS for e in c.evidence)
    ]
