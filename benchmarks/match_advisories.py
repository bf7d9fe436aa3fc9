#!/usr/bin/env python3
"""Match 10,000 components against the bundled advisory database; prints the time.

    .venv/bin/python benchmarks/match_advisories.py [N] [--mix dense|image]

A mix of identities the collectors and other tools' SBOMs give: driver libraries of many
branches (as an image scan: the kernel-mode auto-VEX runs), container toolkit, torch
wheels (local versions), Level Zero debs, package names the product-identity catalog
resolves (cuda-toolkit-12-X and intel-oneapi-* debs, PyPI tritonserver and tensorrt,
pkg:generic driver purls), and plain packages no advisory names, against the full bundled
database (every NVIDIA bulletin since 2022). Catalog lookups and the version cache start
cold; the second run ("warm") reuses them. Target: under 1 s for 10,000.

``--mix dense`` (default) makes two components in three GPU products, each matching tens
of CVEs of the full database (about 11 findings per component): a worst case.
``--mix image`` models a large real image: 10,000 packages of which 2% are GPU products
(twenty driver libraries of one version, a CUDA toolkit and its metapackage debs, torch,
the container toolkit, tritonserver, oneAPI debs), the rest packages no advisory names.
"""

from __future__ import annotations

import sys
import time

from gpusbom.advisories.db import load_bundled
from gpusbom.advisories.matcher import match
from gpusbom.advisories.versions import parse
from gpusbom.model import Component, Evidence, Product


def components(n: int) -> list[Component]:
    out = []
    for i in range(n):
        k = i % 6
        if k == 0:
            v = f"{(535, 550, 570, 580, 590)[i % 5]}.{i % 300}.{i % 100:02d}"
            out.append(Component(name="libcuda", version=v, ecosystem="generic",
                                 properties={"stack": "nvidia-driver", "product": "libcuda"},
                                 evidence=[Evidence("nvidia-driver", "soname", f"/usr/lib/libcuda.so.{v}")],
                                 bom_ref=f"c{i}"))
        elif k == 1:
            v = f"1.{i % 18}.{i % 9}"
            out.append(Component(name="nvidia-container-toolkit", version=v, ecosystem="generic",
                                 properties={"stack": "nvidia-container-toolkit",
                                             "product": "nvidia-container-toolkit"}, bom_ref=f"c{i}"))
        elif k == 2:
            v = f"2.{i % 9}.{i % 3}+cu12{i % 9}"
            out.append(Component(name="torch", version=v, ecosystem="pypi", bom_ref=f"c{i}"))
        elif k == 3:
            v = f"1.{i % 20}.{i % 30}"
            out.append(Component(name="libze1", version=v + "-1", ecosystem="deb",
                                 products=[Product("level-zero", "level-zero-loader", v)],
                                 bom_ref=f"c{i}"))
        elif k == 4:
            kind = (i // 6) % 5
            if kind == 0:
                out.append(Component(name=f"cuda-toolkit-12-{i % 10}", version=f"12.{i % 10}.{i % 3}-1",
                                     ecosystem="deb", bom_ref=f"c{i}"))
            elif kind == 1:
                out.append(Component(name=f"intel-oneapi-mkl-202{i % 5}.{i % 3}",
                                     version=f"202{i % 5}.{i % 3}.0-{i}", ecosystem="deb",
                                     bom_ref=f"c{i}"))
            elif kind == 2:
                out.append(Component(name="tritonserver", version=f"2.{40 + i % 30}.0",
                                     ecosystem="pypi", bom_ref=f"c{i}"))
            elif kind == 3:
                out.append(Component(name="tensorrt-cu12", version=f"10.{i % 16}.0.{i % 40}",
                                     ecosystem="pypi", bom_ref=f"c{i}"))
            else:
                v = f"{(535, 550, 570, 580)[i % 4]}.{i % 200}.{i % 10:02d}"
                out.append(Component(name="libcuda", version=v, ecosystem="generic",
                                     purl=f"pkg:generic/nvidia/libcuda@{v}", bom_ref=f"c{i}"))
        else:
            out.append(Component(name=f"lib{i}", version=f"{i % 7}.{i % 11}-{i % 3}",
                                 ecosystem="deb", bom_ref=f"c{i}"))
    return out


def image_like(n: int) -> list[Component]:
    out: list[Component] = []
    gpu = max(1, n // 50)
    for i in range(gpu):
        k = i % 10
        if k < 4:
            lib = ("libcuda", "libnvidia-ml", "libnvidia-ptxjitcompiler", "libnvidia-nvvm")[k]
            out.append(Component(name=lib, version="580.95.05", ecosystem="generic",
                                 properties={"stack": "nvidia-driver", "product": lib},
                                 evidence=[Evidence("nvidia-driver", "soname",
                                                    f"/usr/lib/x86_64-linux-gnu/{lib}.so.580.95.05")],
                                 bom_ref=f"g{i}"))
        elif k == 4:
            out.append(Component(name=f"cuda-libraries-12-{i % 3 + 4}", version="12.4.1-1",
                                 ecosystem="deb", bom_ref=f"g{i}"))
        elif k == 5:
            out.append(Component(name="torch", version="2.5.1+cu124", ecosystem="pypi",
                                 bom_ref=f"g{i}"))
        elif k == 6:
            out.append(Component(name="nvidia-container-toolkit", version="1.17.3-1",
                                 ecosystem="deb", bom_ref=f"g{i}"))
        elif k == 7:
            out.append(Component(name="tritonserver", version="2.58.0", ecosystem="pypi",
                                 bom_ref=f"g{i}"))
        elif k == 8:
            out.append(Component(name="intel-oneapi-mkl-2024.0", version="2024.0.0-49656",
                                 ecosystem="deb", bom_ref=f"g{i}"))
        else:
            out.append(Component(name=f"nvidia-cublas-cu12-{i}", version="12.4.5.8",
                                 ecosystem="pypi", bom_ref=f"g{i}"))
    for i in range(n - gpu):
        out.append(Component(name=f"lib{i}", version=f"{i % 7}.{i % 11}-{i % 3}",
                             ecosystem=("deb", "pypi", "rpm")[i % 3], bom_ref=f"p{i}"))
    return out


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    mix = sys.argv[sys.argv.index("--mix") + 1] if "--mix" in sys.argv else "dense"
    args = [a for a in args if a not in ("dense", "image")]
    n = int(args[0]) if args else 10_000
    from gpusbom import catalog

    db = load_bundled()
    comps = components(n) if mix == "dense" else image_like(n)
    catalog.products()  # the table itself is read once per process, like the database
    parse.cache_clear()
    catalog.by_package.cache_clear()
    t0, c0 = time.perf_counter(), time.process_time()
    findings = match(comps, db, target_kind="image")
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    t1, c1 = time.perf_counter(), time.process_time()
    again = match(comps, db, target_kind="image")  # kept: freeing it is not matching
    warm, warm_cpu = time.perf_counter() - t1, time.process_time() - c1
    vulns = sum(len(a.vulnerabilities) for a in db)
    entries = [e for a in db for v in a.vulnerabilities for e in v.affected]
    ranges = sum(len(e.ranges) + len(e.versions) for e in entries)
    print(f"database: {len(db)} advisories, {vulns} CVEs, {len(entries)} affected entries, "
          f"{ranges} ranges/versions")
    assert len(again) == len(findings)  # noqa: S101 - the same work both times
    print(f"{n} components ({mix} mix): {len(findings)} findings, "
          f"{dt:.3f} s cold (version and catalog caches empty), {warm:.3f} s warm "
          f"(target < 1 s); CPU time {cpu:.3f} s cold, {warm_cpu:.3f} s warm")
    return 0 if dt < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
