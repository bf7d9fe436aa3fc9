"""The indented JSON writer writes exactly what ``json.dumps(..., indent=N)`` writes."""

from __future__ import annotations

import json
from enum import IntEnum
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpusbom.writers._jsonfast import dumps_indented

_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
_docs = st.recursive(
    _scalars,
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(st.text(max_size=8), kids, max_size=5),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None)
@given(_docs, st.sampled_from([1, 2, 4]), st.booleans(), st.booleans())
def test_same_bytes_as_json_dumps(doc: Any, indent: int, sort_keys: bool, ascii_only: bool) -> None:
    assert dumps_indented(doc, indent=indent, sort_keys=sort_keys, ensure_ascii=ascii_only) == \
        json.dumps(doc, indent=indent, sort_keys=sort_keys, ensure_ascii=ascii_only)


class _Level(IntEnum):
    LOW = 1


def test_what_it_leaves_to_json_dumps() -> None:
    # non-string keys, subclasses, tuples, special floats: json.dumps' own conversions
    doc = {"a": (1, 2.5, float("nan"), float("-inf")), "b": {1: True, None: "x"},
           "c": [_Level.LOW, "é\u2028\x00"], "d": [], "e": {}}
    for ea in (True, False):
        assert dumps_indented(doc, indent=2, ensure_ascii=ea) == json.dumps(doc, indent=2,
                                                                            ensure_ascii=ea)


def test_refuses_what_json_dumps_refuses() -> None:
    import pytest

    with pytest.raises(TypeError):
        dumps_indented({"a": {1, 2}})
