"""CycloneDX XML -> the same dict shape as CycloneDX JSON (only the parts gpusbom reads).

The element tree comes from defusedxml (``_detect``); this module never parses text.
"""

from __future__ import annotations

from typing import Any
from xml.etree.ElementTree import Element

from ..errors import InputError


def _local(tag: object) -> str:
    t = str(tag)
    return t.rsplit("}", 1)[-1]


def _child(el: Element, name: str) -> Element | None:
    for c in el:
        if _local(c.tag) == name:
            return c
    return None


def _children(el: Element | None, name: str) -> list[Element]:
    if el is None:
        return []
    return [c for c in el if _local(c.tag) == name]


def _text(el: Element, name: str) -> str | None:
    c = _child(el, name)
    if c is None or c.text is None:
        return None
    return c.text.strip()


def _properties(el: Element) -> list[dict[str, Any]]:
    return [
        {"name": p.get("name"), "value": (p.text or "")}
        for p in _children(_child(el, "properties"), "property")
    ]


def _licenses(el: Element) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    lic = _child(el, "licenses")
    if lic is None:
        return out
    for c in lic:
        tag = _local(c.tag)
        if tag == "license":
            d = {k: v for k in ("id", "name") if (v := _text(c, k))}
            out.append({"license": d})
        elif tag == "expression" and c.text:
            out.append({"expression": c.text.strip()})
    return out


def _entity(el: Element | None) -> dict[str, Any] | None:
    if el is None:
        return None
    d: dict[str, Any] = {}
    name = _text(el, "name")
    if name:
        d["name"] = name
    contacts = [{"email": e} for c in _children(el, "contact") if (e := _text(c, "email"))]
    if contacts:
        d["contact"] = contacts
    return d


def _evidence(el: Element) -> dict[str, Any] | None:
    ev = _child(el, "evidence")
    if ev is None:
        return None
    occ = []
    for o in _children(_child(ev, "occurrences"), "occurrence"):
        d = {"location": _text(o, "location") or o.get("location")}
        ctx = _text(o, "additionalContext")
        if ctx:
            d["additionalContext"] = ctx
        occ.append(d)
    return {"occurrences": occ}


def _hashes(el: Element) -> list[dict[str, Any]]:
    return [
        {"alg": h.get("alg"), "content": (h.text or "").strip()}
        for h in _children(_child(el, "hashes"), "hash")
    ]


def _component(el: Element, depth: int = 0) -> dict[str, Any]:
    if depth > 64:
        raise InputError("components nested more than 64 levels deep")
    d: dict[str, Any] = {"type": el.get("type"), "bom-ref": el.get("bom-ref")}
    for key in ("name", "version", "group", "description", "purl", "cpe", "publisher", "author"):
        v = _text(el, key)
        if v is not None:
            d[key] = v
    sup = _entity(_child(el, "supplier"))
    if sup:
        d["supplier"] = sup
    d["licenses"] = _licenses(el)
    d["properties"] = _properties(el)
    d["hashes"] = _hashes(el)
    ev = _evidence(el)
    if ev:
        d["evidence"] = ev
    nested = _children(_child(el, "components"), "component")
    if nested:
        d["components"] = [_component(c, depth + 1) for c in nested]
    return d


def _tools(meta: Element) -> Any:
    tools = _child(meta, "tools")
    if tools is None:
        return None
    comps = _children(_child(tools, "components"), "component")
    if comps:
        return {"components": [_component(c) for c in comps]}
    return [
        {k: v for k in ("vendor", "name", "version") if (v := _text(t, k))}
        for t in _children(tools, "tool")
    ]


def _dependencies(root: Element) -> list[dict[str, Any]]:
    out = []
    for dep in _children(_child(root, "dependencies"), "dependency"):
        out.append({
            "ref": dep.get("ref"),
            "dependsOn": [c.get("ref") for c in _children(dep, "dependency")],
        })
    return out


def xml_to_dict(root: Element, name: str) -> dict[str, Any]:
    """The parsed ``<bom>`` as a CycloneDX-JSON-shaped dict."""
    doc: dict[str, Any] = {}
    meta = _child(root, "metadata")
    try:
        if meta is not None:
            m: dict[str, Any] = {"properties": _properties(meta)}
            ts = _text(meta, "timestamp")
            if ts:
                m["timestamp"] = ts
            comp = _child(meta, "component")
            if comp is not None:
                m["component"] = _component(comp)
            tools = _tools(meta)
            if tools is not None:
                m["tools"] = tools
            doc["metadata"] = m
        doc["components"] = [_component(c) for c in _children(_child(root, "components"), "component")]
        doc["dependencies"] = _dependencies(root)
    except InputError as exc:
        raise InputError(f"{name}: {exc}") from None
    return doc
