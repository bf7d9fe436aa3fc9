"""The row fields the server, ICD, driver and framework collectors read (#34): a collector
finds its row by its own id (``detection.collected_by``), reads the row's further fields
through the checked readers, and a malformed field is an error naming its row."""

from __future__ import annotations

import re

import pytest

from gpusbom import catalog
from gpusbom.catalog import CatalogError, detection, packages
from gpusbom.collectors import _libs

ROWS = """\
- id: toy-server
  vendor: T
  stack: toy-inference
  name: Toy server
  collector: [toy-server]
  collected_by: toysrv
  role: release
  root: /opt/toysrv
  labels: [com.example.toy.version]
- id: toy-loader
  vendor: T
  stack: toyicd
  name: Toy loader
  collector: [toy-loader]
  loader: {file: libtoy.so.1, namespace: toyns, supplier: Toy Group}
  icd_products:
    toy-suite: {vendor: toyv, supplier: Toy Inc., cpe: 'toy:suite', embedded: 'Toy (\\d+\\.\\d+)'}
    toy-gpu: {vendor: toyv, soname_is_version: true}
  icd_drivers:
    libtoy_a: [toy-suite, alpha]
    libtoy_gpu: toy-gpu
"""


@pytest.fixture
def rows(monkeypatch: pytest.MonkeyPatch) -> tuple[catalog.Product, ...]:
    got = catalog.load_text(ROWS)
    monkeypatch.setattr(detection, "products", lambda: got)
    return got


def test_collected_by_names_the_row_else_the_stack(rows: tuple[catalog.Product, ...]) -> None:
    assert [r.id for r in detection.collected_by("toysrv")] == ["toy-server"]
    assert [r.id for r in detection.collected_by("toyicd")] == ["toy-loader"]
    assert detection.collected_by("toy-inference") == (rows[0],)  # its stack
    assert detection.collected_by("nothing") == ()


def test_checked_readers(rows: tuple[catalog.Product, ...]) -> None:
    srv, loader = rows
    assert detection.strs(srv, "labels") == ("com.example.toy.version",)
    assert detection.string(srv, "collected_by") == "toysrv"
    assert detection.mapping(loader, "loader")["file"] == "libtoy.so.1"
    assert detection.strs(srv, "absent") == () and detection.mapping(srv, "absent") == {}
    with pytest.raises(CatalogError, match="toy-server: labels"):
        detection.string(srv, "labels")
    with pytest.raises(CatalogError, match="toy-server: root must be a mapping"):
        detection.mapping(srv, "root")


def test_icd_row_reads_the_loader_and_its_drivers(rows: tuple[catalog.Product, ...]) -> None:
    row = _libs.icd_row("toyicd")
    assert (row.stack, row.product, row.file, row.namespace, row.supplier) == (
        "toyicd", "toy-loader", "libtoy.so.1", "toyns", "Toy Group")
    assert row.fallback == "toyicd-icd"
    a = row.drivers["libtoy_a"]
    assert (a.product, a.vendor, a.supplier, a.cpe, a.driver) == (
        "toy-suite", "toyv", "Toy Inc.", "toy:suite", "alpha")
    assert a.embedded is not None and a.embedded.search(b"x Toy 3.1 y").group(1) == b"3.1"
    gpu = row.drivers["libtoy_gpu"]
    assert gpu.soname_is_version and gpu.driver is None and gpu.embedded is None


def test_a_driver_of_an_unknown_icd_product_names_its_row(
        monkeypatch: pytest.MonkeyPatch) -> None:
    got = catalog.load_text(ROWS.replace("libtoy_gpu: toy-gpu", "libtoy_gpu: toy-other"))
    monkeypatch.setattr(detection, "products", lambda: got)
    with pytest.raises(CatalogError, match="toy-loader: icd_products lacks toy-other"):
        _libs.icd_row("toyicd")


def test_the_shipped_rows_of_the_converted_collectors() -> None:
    assert [r.id for r in detection.collected_by("triton-server")] == [
        "triton-inference-server"]
    vk = _libs.icd_row("vulkan")
    assert vk.file == "libvulkan.so.1" and vk.drivers["libvulkan_lvp"].driver == "lavapipe"
    cl = _libs.icd_row("opencl")
    assert cl.file == "libOpenCL.so.1" and cl.implementation == "ocl-icd"
    assert cl.drivers["libpocl"].embedded is not None
    drv = next(r for r in detection.collected_by("nvidia-driver")
               if r.extra.get("driver_libraries"))
    assert re.fullmatch(detection.string(drv, "driver_version") or "", "580.95.05")


def test_framework_entries_carry_their_reader() -> None:
    hit = packages.entry_of("pypi", "onnxruntime-gpu")
    assert hit is not None and hit[1] == "onnxruntime"
    assert hit[0].detect["reader"] == "ort-build-info"
    assert packages.product_of("pypi", "onnxruntime-gpu") == ("onnxruntime", "onnxruntime")
    jax = packages.entry_of("pypi", "jax-cuda12-plugin")
    assert jax is not None and jax[1] == "jax-cuda12-plugin"
    assert packages.entry_of("pypi", "not-a-framework-xyz") is None
