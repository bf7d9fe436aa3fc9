"""CycloneDX JSON's components and dependencies written directly, byte for byte what
cyclonedx-python-lib writes for them.

On a host of ~870 components the library took ~1.5 CPU-s to write CycloneDX JSON (2-core
VM; ~1.1 s on a 16-core H200 host, where it was most of ``scan --host -o cyclonedx-json``):
its model keeps every list in a ``SortedSet`` whose elements compare by tuples of all their
fields (a component's: 30), ``Bom.validate`` looks each component's dependency entry up by a
scan of all of them (quadratic), the bom-ref discriminator checks each ref against a list of
the others (quadratic), and py_serializable encodes each object through a per-object
``default`` hook (the evidence twice: it is dumped and parsed again).

Here the library still writes everything but the components and the dependencies: the
metadata (target component, tools, properties), the serial number, the vulnerabilities and
the document's frame, from a ``Bom`` built without components (``build_bom(skeleton=True)``).
The components and the dependency graph are the same values the library path gets
(``_cyclonedx_impl``'s ``_graph``, ``_component_property_pairs``, ``_identifiers``,
``_evidence_parts``, ``_licenses``), as dicts in the library's order:

- object keys sorted (py_serializable registers properties in name order), a property
  whose value is None or an empty list left out;
- every set the library keeps as a ``SortedSet`` deduplicated and sorted as it sorts it:
  components and nested file components by (type, group, name, version, bom-ref) (refs are
  unique, so nothing after the ref decides), a version of None after any other;
  properties by (name, value); identities by field; methods by (technique, confidence,
  value); occurrences and dependencies by bom-ref; ``dependsOn`` by ref;
- a ``Decimal`` confidence as ``float``;
- ``dependsOn`` present on every dependency (``_explicit_depends_on``'s ``[]`` after
  ``ref`` on a leaf).

Only CycloneDX 1.6 and 1.7 JSON, from cyclonedx-python-lib 11 (the release this was proven
against), with every bom-ref present and unique (else the library would rename some: its
discriminator), takes this path; anything else returns None and the library writes it
all. ``tests/writers/test_cyclonedx_fast.py`` compares both paths' bytes on every fixture.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

from cyclonedx.model.license import DisjunctiveLicense, LicenseExpression
from cyclonedx.output import make_outputter
from cyclonedx.schema import OutputFormat, SchemaVersion

from ..model import Component, ScanResult
from ._common import one_line, own_file_sha256, prop, split_name_email
from ._cyclonedx_impl import (
    _component_property_pairs,
    _evidence_parts,
    _graph,
    _identifiers,
    _licenses,
    build_bom,
    tool_ref,
)
from ._devicecode import file_pairs, nested_files
from ._jsonfast import dumps_indented
from ._probes import component_probe_pairs

#: the schema versions whose components this module writes as the library does
SPECS = (SchemaVersion.V1_6, SchemaVersion.V1_7)
#: the document's frame, added by the library's outputter after the Bom's own keys
_CORE = ("$schema", "bomFormat", "specVersion")


class _Unsupported(Exception):
    """Something this module does not write as the library would: the library writes it."""


def _library_major() -> int:
    import cyclonedx

    try:
        return int(str(getattr(cyclonedx, "__version__", "0")).split(".")[0])
    except ValueError:  # unknown: not the release proven against
        return 0


_PROVEN = _library_major() == 11


def _properties(pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    for _n, v in pairs:
        if v is None or not isinstance(v, str):
            raise _Unsupported("a property value that is not a string")
    return [{"name": n, "value": v} for n, v in sorted(set(pairs))]


def _licenses_json(values: list[str], cache: dict[tuple[str, ...], list[Any] | None]
                   ) -> list[Any] | None:
    key = tuple(values)
    if key not in cache:
        out: list[Any] = []
        for lic in _licenses(values):
            if isinstance(lic, DisjunctiveLicense) and lic.id and lic.name is None \
                    and lic.text is None and lic.url is None and not lic.properties \
                    and lic.acknowledgement is None and not lic.bom_ref.value:
                out.append({"license": {"id": lic.id}})
            elif isinstance(lic, LicenseExpression) and lic.acknowledgement is None \
                    and not lic.bom_ref.value:
                out.append({"expression": lic.value})
            else:
                raise _Unsupported("a licence with more than an id or an expression")
        cache[key] = out or None
    return cache[key]


def _supplier(value: str | None) -> dict[str, Any] | None:
    if not value:
        return None
    name, email = split_name_email(value)
    out: dict[str, Any] = {}
    if email:
        out["contact"] = [{"email": email}]
    if name is not None:
        out["name"] = name
    return out or None


def _evidence(c: Component, spec: SchemaVersion, purl: str | None) -> dict[str, Any] | None:
    parts = _evidence_parts(c, spec, purl)
    if parts is None:
        return None
    methods = [{"confidence": float(conf), "technique": t.value, "value": v}
               for t, conf, v in sorted(set(parts.methods), key=lambda m: (m[0].value, m[1], m[2]))]
    identity = [{"concludedValue": v, "confidence": float(parts.best), "field": f.value,
                 "methods": methods}
                for f, v in sorted(parts.fields, key=lambda x: x[0].value)]
    out: dict[str, Any] = {"identity": identity}
    if parts.occurrences:
        occ = []
        for ref, loc, ctx in sorted(parts.occurrences):
            o: dict[str, Any] = {}
            if ctx is not None:
                o["additionalContext"] = ctx
            o["bom-ref"] = ref
            o["location"] = loc
            occ.append(o)
        out["occurrences"] = occ
    return out


def _sort_key(d: dict[str, Any]) -> tuple[Any, ...]:
    """The library's component order: (type, group, name, version, bom-ref), None last."""
    v = d.get("version")
    return (d["type"], d["name"], v is None, v or "", d["bom-ref"])


def _file_components(c: Component, refs: list[str]) -> list[dict[str, Any]] | None:
    out = []
    for i, d in enumerate(nested_files(c), 1):
        ref = f"{c.bom_ref}/file/{i:04d}"
        refs.append(ref)
        f: dict[str, Any] = {"bom-ref": ref}
        if d.sha256:
            f["hashes"] = [{"alg": "SHA-256", "content": d.sha256}]
        f["name"] = one_line(d.path)
        props = _properties([(prop(k), v) for k, v in file_pairs(d)])
        if props:
            f["properties"] = props
        f["type"] = "file"
        out.append(f)
    return sorted(out, key=_sort_key) or None


def _component(c: Component, spec: SchemaVersion, contained_by: list[str],
               probe_pairs: list[tuple[str, str]], refs: list[str],
               license_cache: dict[tuple[str, ...], list[Any] | None]) -> dict[str, Any]:
    pairs = _component_property_pairs(c, contained_by)
    own = own_file_sha256(c)
    purl_obj, cpe = _identifiers(c, pairs)
    purl = None if purl_obj is None else purl_obj.to_string()
    pairs.extend(probe_pairs)
    if not c.bom_ref:
        raise _Unsupported("a component without a bom-ref")
    refs.append(c.bom_ref)
    evidence = _evidence(c, spec, purl)
    if evidence is not None:
        refs.extend(o["bom-ref"] for o in evidence.get("occurrences", ()))
    fields: dict[str, Any] = {
        "bom-ref": c.bom_ref,
        "components": _file_components(c, refs),
        "cpe": cpe,
        "description": c.description,
        "evidence": evidence,
        "hashes": [{"alg": "SHA-256", "content": own[1]}] if own else None,
        "licenses": _licenses_json(c.licenses, license_cache),
        "name": one_line(c.name),
        "properties": _properties(pairs) or None,
        "purl": purl,
        "supplier": _supplier(c.supplier),
        "type": c.type.value,
        "version": one_line(c.version) if c.version else None,
    }
    return {k: v for k, v in fields.items() if v is not None}


def _vulnerability_refs(doc: dict[str, Any]) -> list[str]:
    return [v["bom-ref"] for v in doc.get("vulnerabilities") or () if "bom-ref" in v]


def render_json(result: ScanResult, spec: SchemaVersion) -> str | None:
    """The CycloneDX JSON document of ``result`` (the library's bytes), or None where this
    module does not write it (see the module's docstring)."""
    if not _PROVEN or spec not in SPECS or not result.components:
        return None
    try:
        return _render(result, spec)
    except _Unsupported:
        return None


def _render(result: ScanResult, spec: SchemaVersion) -> str:
    g = _graph(result)
    refs: list[str] = [g.root_ref, tool_ref(result)]
    license_cache: dict[tuple[str, ...], list[Any] | None] = {}
    components = sorted(
        (_component(c, spec, sorted(g.contained_by.get(c.bom_ref, [])),
                    component_probe_pairs(result, c.bom_ref) if result.probes else [],
                    refs, license_cache)
         for c in result.components),
        key=_sort_key)
    dependencies = []
    for ref, ds in sorted([(g.root_ref, g.top), *g.deps.items()]):
        dependencies.append({"dependsOn": sorted(ds), "ref": ref} if ds
                            else {"ref": ref, "dependsOn": []})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # as the library path: 1.5 drops and the like
        frame = json.loads(make_outputter(build_bom(result, spec, skeleton=True),
                                          OutputFormat.JSON, spec).output_as_string())
    refs += _vulnerability_refs(frame)
    if len(set(refs)) != len(refs) or not all(refs):
        raise _Unsupported("bom-refs the library's discriminator would rename")
    body = {k: v for k, v in frame.items() if k not in _CORE}
    if "components" in body or list(body) != sorted(body):
        raise _Unsupported("a frame unlike the one this module was proven against")
    body["components"] = components
    body["dependencies"] = dependencies
    doc = {k: body[k] for k in sorted(body)}
    doc.update((k, frame[k]) for k in _CORE if k in frame)
    text = dumps_indented(doc, indent=2)
    return text if text.endswith("\n") else text + "\n"
