"""Validate in-toto statements two ways: the JSON Schemas in schemas/ (written from the
framework's specs, see schemas/README.md) and the framework's own protobuf bindings."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import jsonschema
from google.protobuf import json_format
from in_toto_attestation.predicates.test_result.v0 import test_result_pb2
from in_toto_attestation.predicates.vsa.v1 import vsa_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement as PbStatement
from referencing import Registry, Resource

SCHEMAS = Path(__file__).parent / "schemas"


def _load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    return doc


_STATEMENT = _load("statement-v1.schema.json")
_PREDICATES = {
    "https://in-toto.io/attestation/test-result/v0.1": _load("test-result-v0.1.schema.json"),
    "https://slsa.dev/verification_summary/v1": _load("vsa-v1.schema.json"),
}
_REGISTRY = Registry().with_resources(
    [(s["$id"], Resource.from_contents(s)) for s in (_STATEMENT, *_PREDICATES.values())]
    + [("https://gpusbom.dev/test-schemas/in-toto/statement-v1.json",
        Resource.from_contents(_STATEMENT))])
_PB = {"https://in-toto.io/attestation/test-result/v0.1": test_result_pb2.TestResult,
       "https://slsa.dev/verification_summary/v1": vsa_pb2.VerificationSummary}


def schema_errors(statement: dict[str, Any]) -> list[str]:
    """Every schema error of the statement and of its predicate (when its type has one)."""
    errors = [e.message for e in jsonschema.Draft202012Validator(
        _STATEMENT, registry=_REGISTRY).iter_errors(statement)]
    schema = _PREDICATES.get(statement.get("predicateType", ""))
    if schema is not None:
        errors += [f"predicate: {e.message}" for e in jsonschema.Draft202012Validator(
            schema, registry=_REGISTRY).iter_errors(statement.get("predicate"))]
    return errors


def _strip_extensions(predicate: dict[str, Any]) -> dict[str, Any]:
    # the parsing rules allow URI-named extension fields; protobuf messages have no room
    return {k: v for k, v in predicate.items() if "://" not in k}


def check_with_bindings(statement: dict[str, Any]) -> None:
    """Strict protobuf parse (unknown fields are errors) + the bindings' validate()."""
    pb = json_format.Parse(json.dumps(statement), statement_pb2.Statement())
    PbStatement.copy_from_pb(pb).validate()
    message = _PB.get(statement["predicateType"])
    if message is not None:
        predicate = _strip_extensions(statement["predicate"])
        if statement["predicateType"] == "https://slsa.dev/verification_summary/v1":
            # the framework's vsa/v1/vsa.proto declares verified_levels a single string,
            # against its own spec and SLSA's (an array of SlsaResult): the schema checks it
            levels = predicate.pop("verifiedLevels")
            assert isinstance(levels, list) and all(isinstance(x, str) for x in levels)
        json_format.Parse(json.dumps(predicate), message())


def read_bundle(text: str) -> list[dict[str, Any]]:
    """The statements of an in-toto Bundle (one DSSE envelope a line)."""
    out = []
    for line in text.splitlines():
        env = json.loads(line)
        assert set(env) == {"payloadType", "payload", "signatures"}, env.keys()
        assert env["payloadType"] == "application/vnd.in-toto+json"
        assert env["signatures"] == []
        out.append(json.loads(base64.b64decode(env["payload"], validate=True)))
    return out
