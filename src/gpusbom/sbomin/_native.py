"""gpusbom native JSON (``-o json``) -> ScanResult, with its types checked first."""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from ..model import SCHEMA_VERSION, ComponentType, ScanResult
from ._read import display_name

_TYPES = {t.value for t in ComponentType}


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(msg)


def _opt_str(v: Any) -> bool:
    return v is None or isinstance(v, str)


def _str_map(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items())


def _validate(doc: dict[str, Any]) -> None:
    t = doc.get("target")
    if not isinstance(t, dict):
        raise ValueError("target is missing or not an object")  # noqa: TRY004 - one message type
    _check(isinstance(t.get("kind"), str) and isinstance(t.get("reference"), str),
           "target.kind and target.reference must be strings")
    for key in ("env", "labels", "os_release"):
        _check(key not in t or _str_map(t[key]), f"target.{key} must map strings to strings")
    for key in ("components", "relationships", "unknowns", "stacks", "findings", "probes"):
        _check(key not in doc or isinstance(doc[key], list), f"{key} must be a list")
    for i, c in enumerate(doc.get("components", [])):
        w = f"components[{i}]"
        _check(isinstance(c, dict), f"{w} is not an object")
        _check(isinstance(c.get("name"), str), f"{w}.name must be a string")
        _check(_opt_str(c.get("version")), f"{w}.version must be a string or null")
        _check(c.get("type", "library") in _TYPES, f"{w}.type {c.get('type')!r} is unknown")
        for k in ("purl", "cpe", "supplier", "description", "ecosystem"):
            _check(_opt_str(c.get(k)), f"{w}.{k} must be a string or null")
        _check(isinstance(c.get("bom_ref", ""), str), f"{w}.bom_ref must be a string")
        _check(_str_map(c.get("properties", {})), f"{w}.properties must map strings to strings")
        for key in ("licenses", "depends_on"):
            v = c.get(key, [])
            _check(isinstance(v, list) and all(isinstance(x, str) for x in v),
                   f"{w}.{key} must be a list of strings")
        for j, e in enumerate(c.get("evidence", [])):
            _check(isinstance(e, dict) and isinstance(e.get("collector"), str)
                   and isinstance(e.get("method"), str), f"{w}.evidence[{j}] is malformed")
    for i, r in enumerate(doc.get("relationships", [])):
        _check(isinstance(r, dict) and all(isinstance(r.get(k), str)
                                           for k in ("source", "type", "target")),
               f"relationships[{i}] must have string source, type and target")


def from_native(doc: dict[str, Any], path: str) -> ScanResult:
    name = display_name(path)
    schema = doc.get("schema")
    if schema != f"gpusbom/scan/{SCHEMA_VERSION}":
        raise InputError(f"{name}: gpusbom JSON schema {schema!r} is not supported "
                         f"(this gpusbom reads gpusbom/scan/{SCHEMA_VERSION})")
    try:
        _validate(doc)
        result = ScanResult.from_dict(doc)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise InputError(f"{name}: malformed gpusbom JSON: {exc}") from None
    result.target.reference = f"sbom:{path}"
    result.target.source = "sbom"
    return result
