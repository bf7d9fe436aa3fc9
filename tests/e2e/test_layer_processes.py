"""Layers read by forked worker processes (the default on 4+ cores; forced here with
GPUSBOM_LAYER_PROCESSES): the same output as threads, and a bad layer in a worker is still
one error line, exit 3, no output file."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import imagetools as it
from fixtures.build import ensure

from test_bad_inputs import GOOD_LAYER, assert_input_error  # tests/e2e is on sys.path


def _scan(ref: str, out: Path, procs: str) -> None:
    env = {**os.environ, "GPUSBOM_LAYER_PROCESSES": procs, "SOURCE_DATE_EPOCH": "1767225600"}
    p = subprocess.run([sys.executable, "-m", "gpusbom", "scan", ref, "-q",
                        "-o", f"cyclonedx-json={out}"], capture_output=True, text=True,
                       timeout=300, env=env, check=False)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("form", ["oci", "docker-archive", "oci-archive"])
def test_worker_processes_give_the_same_sbom(form: str, tmp_path: Path) -> None:
    paths = ensure("multilayer")
    ref = {"oci": paths.oci_ref, "docker-archive": f"docker-archive:{paths.docker_archive}",
           "oci-archive": f"oci-archive:{paths.oci_archive}"}[form]
    _scan(ref, tmp_path / "threads.json", "0")
    _scan(ref, tmp_path / "procs.json", "3")
    assert (tmp_path / "threads.json").read_bytes() == (tmp_path / "procs.json").read_bytes()


def test_bad_layer_in_a_worker_process(tmp_path: Path) -> None:
    good = gzip.compress(it.tar_bytes(GOOD_LAYER), mtime=0)
    corrupt = good[:20] + bytes(b ^ 0x5A for b in good[20:60]) + good[60:]
    bad = it.Layer(b"", "gzip")
    bad.__dict__["_blob"] = corrupt
    image = it.Image(layers=[it.Layer(it.tar_bytes(GOOD_LAYER), "gzip"), bad])
    layout = it.write_oci_layout(tmp_path / "layout", image, tag="t")
    assert_input_error(f"oci:{layout}:t", tmp_path, "layer",
                       env={"GPUSBOM_LAYER_PROCESSES": "2"})
