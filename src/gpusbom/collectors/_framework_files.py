"""Reading the files ML frameworks write about their own build, without importing or running
them: module-level literal constants of Python source (``torch/version.py``, jax's and
onnxruntime's version files), TensorFlow's ``build_info``, and what a torch build targets.
Used by the frameworks collector (``frameworks.py``).
"""

from __future__ import annotations

import ast
import re
from typing import Any

__all__ = ["module_constants", "tensorflow_build_info", "torch_built_for"]

_LOCAL_CU_RX = re.compile(r"\+cu(\d+)(\d)$")



def module_constants(text: str) -> dict[str, Any]:
    """Module-level ``NAME = <literal>`` / ``NAME: T = <literal>`` assignments of Python source,
    read with ``ast`` (never executed). Chained ``a = b = 'x'`` gives both names."""
    out: dict[str, Any] = {}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return out
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = list(node.targets), node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        if value is None:
            continue
        try:
            lit = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        for t in targets:
            if isinstance(t, ast.Name):
                out[t.id] = lit
    return out


def _major_minor(v: str) -> str:
    m = re.match(r"(\d+)(?:\.(\d+))?", v)
    if not m:
        return v
    return m.group(1) + (f".{m.group(2)}" if m.group(2) is not None else "")


def torch_built_for(consts: dict[str, Any], version: str | None) -> str:
    cuda, hip, rocm, xpu = (consts.get(k) for k in ("cuda", "hip", "rocm", "xpu"))
    if isinstance(cuda, str) and cuda:
        return f"cuda {cuda}"
    if isinstance(rocm, str) and rocm:
        return f"rocm {_major_minor(rocm)}"
    if isinstance(hip, str) and hip:
        return f"rocm {_major_minor(hip)}"
    if isinstance(xpu, str) and xpu:
        return "xpu"
    if version and (m := _LOCAL_CU_RX.search(version)):
        return f"cuda {m.group(1)}.{m.group(2)}"
    return "cpu"


def tensorflow_build_info(text: str) -> dict[str, Any]:
    """``build_info`` of ``tensorflow/python/platform/build_info.py``: the
    ``collections.OrderedDict([...])`` of TF >= 2.3, or module constants of older ones."""
    info: dict[str, Any] = {}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return info
    for node in tree.body:
        if not (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "build_info" for t in node.targets)
        ):
            continue
        val = node.value
        try:
            if isinstance(val, ast.Call) and val.args:
                pairs = ast.literal_eval(val.args[0])
                info.update(dict(pairs))
            else:
                lit = ast.literal_eval(val)
                if isinstance(lit, dict):
                    info.update(lit)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
    if not info:
        info = {k: v for k, v in module_constants(text).items() if not k.startswith("_")}
    return info
