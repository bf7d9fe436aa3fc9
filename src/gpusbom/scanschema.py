"""The JSON Schema of ``gpusbom scan -o json`` (``schema: gpusbom/scan/1``), kept in the
package as ``data/schema/scan-1.json`` and printed by ``gpusbom schema``."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from .errors import InputError
from .model import SCHEMA_VERSION

#: the ``schema`` value of the documents the schema describes
SCAN_SCHEMA_ID = f"gpusbom/scan/{SCHEMA_VERSION}"


def scan_schema_text() -> str:
    """The schema as shipped (JSON text, draft 2020-12)."""
    return (resources.files("gpusbom").joinpath("data", "schema", f"scan-{SCHEMA_VERSION}.json")
            .read_text("utf-8"))


def scan_schema() -> dict[str, Any]:
    got: dict[str, Any] = json.loads(scan_schema_text())
    return got


def validate_scan(doc: Any, name: str = "document") -> None:
    """Raise ``InputError`` (one line: the first problem and where) unless ``doc`` is a
    valid ``gpusbom/scan/1`` document."""
    import jsonschema  # type: ignore[import-untyped]

    validator = jsonschema.Draft202012Validator(scan_schema())
    err = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if err is not None:
        raise InputError(f"{name}: not a valid {SCAN_SCHEMA_ID} document: {err.message} "
                         f"at {err.json_path}")
