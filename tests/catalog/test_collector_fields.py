"""A stack collector's own row fields (``catalog.detection``: ``listed``, ``row_map``,
``row_with``, ``str_field``, ``str_map``) and the tables the AMD and Intel collectors build
from the shipped rows (issue #34: the ROCm, Level Zero, Intel GPU and oneAPI collectors hold
no product names; these are the tables they held before, now read from the rows)."""

from __future__ import annotations

import pytest

from gpusbom import catalog
from gpusbom.catalog import CatalogError, detection

ROWS = """\
- id: toy-a
  vendor: T
  stack: toy
  name: Toy A
  collector: [toya, toya2]
  libraries: [libtoya]
  install_dirs: [a, toya2]
  install_root: /opt/toy
  component_dirs: {c: toyc}
- id: toy-b
  vendor: T
  stack: toy
  name: Toy B
  collector: [toyb]
  install_dirs: [b, a]
  bad_list: nope
  bad_map: [x]
- id: toy-other
  vendor: T
  stack: other
  name: Toy other
  install_dirs: [z]
"""


@pytest.fixture
def rows(monkeypatch: pytest.MonkeyPatch) -> tuple[catalog.Product, ...]:
    got = catalog.load_text(ROWS)
    monkeypatch.setattr(detection, "products", lambda: got)
    return got


def test_list_fields_over_a_stacks_own_rows(rows: tuple[catalog.Product, ...]) -> None:
    # catalog order, first occurrence kept; another stack's rows are not read
    assert detection.listed("toy", "install_dirs") == ("a", "toya2", "b")
    assert {k: r.id for k, r in detection.row_map("toy", "install_dirs").items()} == {
        "a": "toy-a", "toya2": "toy-a", "b": "toy-b"}
    # a row's own list field (not in ``extra``) is read the same way
    assert detection.listed("toy", "libraries") == ("libtoya",)
    assert detection.listed("toy", "nothing") == ()


def test_scalar_and_map_fields(rows: tuple[catalog.Product, ...]) -> None:
    top = detection.row_with("toy", "install_root")
    assert top is not None and top.id == "toy-a"
    assert detection.row_with("toy", "nothing") is None
    assert detection.str_field(top, "install_root") == "/opt/toy"
    assert detection.str_map(top, "component_dirs") == {"c": "toyc"}
    assert detection.str_map(rows[1], "component_dirs") == {}


def test_malformed_fields_name_the_row(rows: tuple[catalog.Product, ...]) -> None:
    with pytest.raises(CatalogError, match="toy-b: bad_list must be a list"):
        detection.listed("toy", "bad_list")
    with pytest.raises(CatalogError, match="toy-b: bad_map must map"):
        detection.str_map(rows[1], "bad_map")
    with pytest.raises(CatalogError, match="toy-b: install_dirs must be a string"):
        detection.str_field(rows[1], "install_dirs")


def test_the_amd_and_intel_collectors_tables_come_from_the_rows() -> None:
    from gpusbom.collectors import intel_gpu, intel_oneapi, level_zero, rocm

    assert {s: v[2] for s, v in level_zero.LIBRARIES.items()} == {
        "libze_loader": False, "libze_intel_gpu": True, "libze_intel_gpu_legacy1": True}
    assert {k: r.found_as for k, r in intel_gpu.ICD_LIBS.items()} == {
        "intel-opencl/libigdrcl": ("intel-gpu", "intel-compute-runtime"),
        "intel-opencl/libigdrcl_legacy1": ("intel-gpu", "intel-compute-runtime")}
    assert intel_gpu.ICD_FILES == ("intel.icd", "intel_legacy1.icd")
    assert intel_gpu.BINS == ("ocloc",)
    assert intel_gpu.ABI_LIBS == {"libigc": "igc", "libigdfcl": "igc", "libigdgmm": "gmmlib"}
    assert (intel_oneapi.ROOT, intel_oneapi.RELEASE_PRODUCT) == ("/opt/intel/oneapi", "oneapi")
    assert intel_oneapi.COMPONENT_DIRS == {
        "compiler": "dpcpp-compiler", "mkl": "mkl", "tbb": "tbb", "dnnl": "onednn",
        "ccl": "oneccl", "mpi": "intel-mpi", "dpl": "onedpl", "dal": "onedal", "ipp": "ipp",
        "ippcp": "ippcp", "dpcpp-ct": "dpct", "debugger": "oneapi-debugger", "vtune": "vtune",
        "advisor": "advisor", "umf": "umf", "pti": "pti", "tcm": "tcm", "ishmem": "ishmem",
        "dev-utilities": "oneapi-dev-utilities"}
    assert intel_oneapi.BINARY_PRODUCTS == ("sycl-runtime",)
    assert (rocm.ROOT, rocm.RELEASE_PRODUCT, rocm.CORE_LIB) == ("/opt/rocm", "rocm-core",
                                                                "librocm-core")
    assert {s for s, (_, own) in rocm.ROCM_LIBRARIES.items() if own} == {"libamdhip64",
                                                                        "libhiprtc"}
    assert rocm.RELEASE_TABLES == {"hip-runtime": "data/hip_rocm.json"}
    assert sorted(rocm.ROCM_HEADERS) == [
        ("hipcub", "hipcub/hipcub_version.hpp", "HIPCUB_VERSION"),
        ("rocprim", "rocprim/rocprim_version.hpp", "ROCPRIM_VERSION")]
    assert sorted(rocm.TOOLS) == [
        ("rocm-smi", ("/usr/bin/rocm-smi", "/opt/rocm*/bin/rocm-smi")),
        ("rocminfo", ("/usr/bin/rocminfo", "/opt/rocm*/bin/rocminfo"))]
    assert rocm.RELEASE_CLASSIFIERS == ("rocm",)
