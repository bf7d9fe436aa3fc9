"""The row fields the stack collectors' strategies read (``catalog/detection.py``): their
order, their checks, and the header parse they drive (``collectors/strategies/headers``)."""

from __future__ import annotations

import pytest

from gpusbom import catalog
from gpusbom.catalog import CatalogError, detection
from gpusbom.collectors.strategies import headers

ROWS = """\
- id: toy-lib
  vendor: T
  stack: toy
  name: Toy library
  collector: [toylib]
  env: [TOY_LIB_VERSION]
  headers:
    - {file: 'toylib*.h', macros: [TL_MAJOR, TL_MINOR], optional: TL_BUILD, suffix: TL_TAG, rank: file}
- id: toy-sdk
  vendor: T
  stack: toy
  name: Toy SDK
  collector: [toy-sdk]
  role: release
  root: /opt/toy
  version_files: {txt: VERSION, txt_pattern: 'Toy (\\d+\\.\\d+)'}
  env_release: TOY_VERSION
  headers:
    - {file: toy.h, code: TOY_VERSION, root_only: true}
- id: toy-runtime
  vendor: T
  stack: toy
  name: Toy runtime
  collector: [toyrt]
  part_of: toy-sdk
  role: runtime
  env: [TOY_RT_VERSION]
- id: toy-plugin
  vendor: T
  stack: other
  name: Toy plugin
  found_as: toy/toyplugin
  sonames: ['libtoyplugin.so*']
"""


@pytest.fixture
def rows(monkeypatch: pytest.MonkeyPatch) -> tuple[catalog.Product, ...]:
    got = catalog.load_text(ROWS)
    monkeypatch.setattr(detection, "products", lambda: got)
    return got


def test_order_release_then_parts_then_the_rest(rows: tuple[catalog.Product, ...]) -> None:
    assert [f.product for f in detection.found("toy")] == ["toy-sdk", "toyrt", "toylib",
                                                           "toyplugin"]
    # env-declared versions are listed in that order
    assert [v for f in detection.found("toy") for v in f.env] == ["TOY_RT_VERSION",
                                                                  "TOY_LIB_VERSION"]
    assert detection.found("other") == ()
    assert detection.gather("toy", "sonames") == ("libtoyplugin.so*",)
    rel = detection.release("toy")
    assert rel is not None and rel.product == "toy-sdk" and rel.txt_file == "VERSION"
    assert rel.root_rx.match("/opt/toy-1.2") and not rel.root_rx.match("/opt/toys")
    runtime = detection.with_role("toy", "runtime")
    assert runtime is not None and runtime.product == "toyrt"


def test_header_specs_drive_the_parse(rows: tuple[catalog.Product, ...]) -> None:
    text = "#define TL_MAJOR 3\n#define TL_MINOR TL_MINOR_\n#define TL_MINOR_ 1\n" \
           '#define TL_BUILD 7\n#define TL_TAG "-rc1"\n'
    assert headers.versions("toylib_version.h", text) == {"toylib": "3.1.7-rc1"}
    assert headers.versions("toy.h", "#define TOY_VERSION 12040\n") == {"toy-sdk": "12.4"}
    assert headers.versions("toylib.h", "#define TL_MAJOR 3\n") == {}  # a macro missing
    assert headers.versions("other.h", text) == {}
    assert headers.wanted("/opt/toy/include/toylib.h")
    assert not headers.wanted("/opt/toy/src/toylib.h")  # not under include/


@pytest.mark.parametrize("header", [
    "{file: x.h, macros: [A], code: B}",   # both
    "{file: x.h}",                         # neither
    "{file: x.h, code: A, rank: best}",    # unknown rank
    "{macros: [A]}",                       # no file
])
def test_a_malformed_header_spec_names_its_row(monkeypatch: pytest.MonkeyPatch,
                                               header: str) -> None:
    got = catalog.load_text(f"- id: bad-row\n  vendor: T\n  stack: toy\n  name: Bad\n"
                            f"  headers:\n    - {header}\n")
    monkeypatch.setattr(detection, "products", lambda: got)
    with pytest.raises(CatalogError, match="bad-row"):
        detection.found("toy")


def test_the_shipped_cuda_rows() -> None:
    """The CUDA collector's tables, now rows: the release, its runtime and compiler."""
    rel = detection.release("cuda")
    assert rel is not None and rel.product == "cuda-toolkit" and rel.cpe_product == "cuda_toolkit"
    assert rel.bin_tools[:3] == ("cuobjdump", "nvdisasm", "ptxas")
    assert [f.product for f in detection.found("cuda") if f.env] == [
        "cudart", "cublas", "cudnn", "nccl"]
    assert {h.product for h in detection.header_specs("cuda")} == {
        "cuda-toolkit", "cudart", "tensorrt", "cudnn", "nccl"}
