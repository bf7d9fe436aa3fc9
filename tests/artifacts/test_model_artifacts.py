"""Model artifacts (issue 31, item 5): a Triton kernel cache made by running Triton here, an
ONNX model with EPContext nodes, a Triton Inference Server model repository.

The Triton cache is real: Triton 3.6.0 (the test extra) compiles one kernel for sm_90 and one
for sm_80 without a GPU (``triton.compile`` with a ``GPUTarget``). The ONNX models are
*constructed* with the ``onnx`` package following ONNX Runtime's EPContext contrib-op schema
(op ``EPContext``, domain ``com.microsoft``; attributes ``embed_mode``, ``ep_cache_context``,
``source``, ``ep_sdk_version``, ``hardware_architecture``, ``partition_name``): the engine bytes
are a placeholder, not a TensorRT engine, and the attribute values are ours. The model
repository's ``model.plan`` is likewise a placeholder (a TensorRT plan is never read).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from gpusbom.artifacts.onnx_epcontext import epcontext_nodes
from gpusbom.cli.app import main

KERNEL = '''
import os, sys
os.environ["TRITON_CACHE_DIR"] = sys.argv[1]
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget

@triton.jit
def add_kernel(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=m) + tl.load(y + offs, mask=m), mask=m)

sig = {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32"}
for cc in map(int, sys.argv[2:]):
    triton.compile(triton.compiler.ASTSource(fn=add_kernel, signature=sig,
                                             constexprs={"BLOCK": 256}),
                   target=GPUTarget("cuda", cc, 32))
'''


@pytest.fixture(scope="module")
def triton_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("triton-img")
    cache = root / "root" / ".triton" / "cache"
    cache.mkdir(parents=True)
    script = root.parent / "mk_kernels.py"
    script.write_text(KERNEL)
    r = subprocess.run([sys.executable, str(script), str(cache), "90", "80"],
                       capture_output=True, text=True, timeout=600, check=False,
                       env={**os.environ, "HOME": str(root)})
    assert r.returncode == 0, r.stderr[-2000:]
    return root


def _cubins(root: Path) -> dict[str, int]:
    """cache entry path -> the SASS architecture in the cubin's own ELF header (e_flags)."""
    out = {}
    for c in root.rglob("*.cubin"):
        head = c.read_bytes()[:64]
        assert struct.unpack_from("<H", head, 18)[0] == 190  # EM_CUDA
        out["/" + str(c.relative_to(root))] = struct.unpack_from("<I", head, 48)[0] & 0xFF
    return out


def test_triton_cache_components(triton_image: Path, tmp_path: Path) -> None:
    out = tmp_path / "scan.json"
    assert main(["scan", f"dir:{triton_image}", "-o", f"json={out}"]) == 0
    doc = json.loads(out.read_text())
    arts = [c for c in doc["components"]
            if c.get("properties", {}).get("artifact") == "triton-kernel-cache"]
    cubins = _cubins(triton_image)
    assert sorted(cubins.values()) == [80, 90]
    assert len(arts) == 2
    for c in arts:
        (code,) = c["device_code"]
        assert code["format"] == "triton-cache" and code["kind"] == "artifact"
        assert code["targets"]["cuda:sass"] == f"sm_{cubins[code['path']]}"
        assert c["properties"]["triton:version"] == "3.6.0"
        assert c["properties"]["triton:backend"] == "cuda"


def test_triton_cache_check_h200(triton_image: Path, tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    rc = main(["check", f"dir:{triton_image}", "--gpu", "H200", "-o", f"json={out}"])
    doc = json.loads(out.read_text())
    (v,) = doc["verdicts"]
    got = {lib["file"]: lib["verdict"] for lib in v["libraries"] if lib.get("file")}
    want = {p: "runs" if sm == 90 else "will-fail" for p, sm in _cubins(triton_image).items()}
    assert got == want
    assert v["verdict"] == "will-fail" and rc == 1
    bad = next(p for p, sm in _cubins(triton_image).items() if sm == 80)
    assert any(bad in r and "no SASS for sm_90 (has sm_80)" in r for r in v["reasons"])


def _epcontext_model(path: Path, *, embed: bool) -> None:
    import onnx
    from onnx import TensorProto, helper

    attrs = {"embed_mode": 1 if embed else 0,
             "ep_cache_context": b"constructed-placeholder-not-an-engine" * 10 if embed
             else "model_ctx_sm90.engine",
             "source": "TensorrtExecutionProvider", "ep_sdk_version": "10.13.3",
             "hardware_architecture": "90", "partition_name": "TRTKernel_graph_main_0"}
    node = helper.make_node("EPContext", ["x"], ["y"], domain="com.microsoft", **attrs)
    relu = helper.make_node("Relu", ["y"], ["z"])
    graph = helper.make_graph(
        [node, relu], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    onnx.save(model, str(path))


def test_epcontext_reader(tmp_path: Path) -> None:
    p = tmp_path / "m.onnx"
    _epcontext_model(p, embed=True)
    (n,) = epcontext_nodes(p.read_bytes())
    assert (n.source, n.sdk_version, n.hardware_architecture, n.embed_mode) == (
        "TensorrtExecutionProvider", "10.13.3", "90", 1)
    assert n.context_bytes == len(b"constructed-placeholder-not-an-engine") * 10
    for cut in (1, 7, 40, len(p.read_bytes()) - 3):  # truncated models: ValueError only
        try:
            epcontext_nodes(p.read_bytes()[:cut])
        except ValueError:
            pass


def test_model_repository_and_epcontext_scan(tmp_path: Path) -> None:
    root = tmp_path / "img"
    repo = root / "models" / "resnet"
    (repo / "1").mkdir(parents=True)
    (repo / "config.pbtxt").write_text('name: "resnet"\nplatform: "tensorrt_plan"\n'
                                       "max_batch_size: 8\n")
    (repo / "1" / "model.plan").write_bytes(b"placeholder, not a TensorRT plan")
    _epcontext_model(root / "models" / "ctx_embedded.onnx", embed=True)
    _epcontext_model(root / "models" / "ctx_file.onnx", embed=False)
    (root / "models" / "broken.onnx").write_bytes(b"\x0a\xff\xff\xff\xff\x0f")
    out = tmp_path / "scan.json"
    assert main(["scan", f"dir:{root}", "-o", f"json={out}"]) == 0
    doc = json.loads(out.read_text())
    by = {c["properties"].get("artifact"): [] for c in doc["components"]}
    for c in doc["components"]:
        by[c["properties"].get("artifact")].append(c)
    (model,) = by["triton-model"]
    assert model["name"] == "resnet"
    assert model["properties"]["triton-model:platform"] == "tensorrt_plan"
    assert model["properties"]["triton-model:versions"] == "1"
    (plan,) = by["tensorrt-plan"]
    assert plan["properties"]["check"].startswith("unchecked")
    ctx = {c["name"]: c["properties"] for c in by["onnx-epcontext"]}
    assert set(ctx) == {"ctx_embedded.onnx#TRTKernel_graph_main_0",
                        "ctx_file.onnx#TRTKernel_graph_main_0"}
    emb = ctx["ctx_embedded.onnx#TRTKernel_graph_main_0"]
    assert emb["epcontext:sdk-version"] == "10.13.3"
    assert emb["epcontext:hardware-architecture"] == "90"
    assert emb["epcontext:embed-mode"] == "1"
    assert ctx["ctx_file.onnx#TRTKernel_graph_main_0"]["epcontext:engine-file"] == \
        "model_ctx_sm90.engine"
    assert any("broken.onnx" in (u.get("path") or "") + u.get("reason", "")
               for u in doc.get("unknowns", []))


def test_probe_artifact_usage(tmp_path: Path) -> None:
    f = tmp_path / "x.txt"
    f.write_text("not an artifact")
    assert main(["probe", "--artifact", str(f)]) == 2
