"""The advisory database read from its cached index (``advisories/_dbcache.py``) is the
database loaded whole: the same records, description and findings; a changed file, a damaged
index or another parse mode is validated afresh; a database that fails validation is never
indexed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpusbom import catalog
from gpusbom.advisories import _dbcache
from gpusbom.advisories.db import (
    AdvisoryError,
    describe,
    load_bundle_text,
    load_bundled,
    load_user,
    user_db_path,
)
from gpusbom.advisories.matcher import _build_index, match
from gpusbom.model import Component


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUSBOM_CACHE_DIR", str(tmp_path))
    load_bundled.cache_clear()
    yield tmp_path
    load_bundled.cache_clear()


def _index_files(cache: Path) -> list[Path]:
    return sorted((cache / "tables").glob("advisories-*.json"))


def _components(db: object) -> list[Component]:
    """A component for every identity the database's index names, at versions below, inside
    and above typical ranges."""
    out = []
    keys = _build_index(db).by_key  # type: ignore[arg-type]
    assert isinstance(keys, dict)
    for n, (kind, eco, name) in enumerate(sorted(keys)):
        for v in ("0.1", "1.0", "12.4.127", "535.54.03", "999.0"):
            ref = f"c{n}-{v}"
            if kind == "pkg":
                out.append(Component(name=name, version=v, ecosystem=eco, bom_ref=ref))
            elif kind == "src":
                out.append(Component(name=name + "-bin", version=v, ecosystem=eco, bom_ref=ref,
                                     properties={"source-package": name}))
            elif kind == "stack" and name != "*":
                out.append(Component(name=name, version=v, ecosystem="generic", bom_ref=ref,
                                     properties={"stack": eco, "product": name}))
    # catalog rows, by the package names their patterns take literally (libcuda1, torch...)
    for row in catalog.products():
        for eco, patterns in row.names.items():
            for np in patterns:
                for name in np.prefixes or ():
                    if np.fullmatch(name):
                        out += [Component(name=name, version=v, ecosystem=eco,
                                          bom_ref=f"{row.id}-{name}-{v}")
                                for v in ("0.1", "2.1.0", "12.4.127", "535.54.03", "999.0")]
    return out


def test_indexed_bundled_database_is_the_whole_one(cache: Path) -> None:
    whole = load_bundled()
    assert whole.index is None and len(_index_files(cache)) == 1
    load_bundled.cache_clear()
    indexed = load_bundled()
    assert indexed.index is not None and indexed is not whole
    # what a scan reads of it without building a record
    assert (len(indexed), indexed.newest, indexed.built) == (len(whole), whole.newest,
                                                             whole.built)
    assert describe(indexed, "2026-12-01T00:00:00Z") == describe(whole, "2026-12-01T00:00:00Z")
    comps = _components(whole)
    assert len(comps) > 300
    found = match(comps, indexed, target_kind="image")
    assert found == match(comps, whole, target_kind="image")
    assert len({f.advisory.advisory for f in found if f.advisory}) > 50
    # built on demand: only what was looked up so far, then everything, equal to the whole
    assert 0 < len(indexed.index._built) <= len(whole)  # type: ignore[union-attr]
    assert indexed.advisories == whole.advisories
    assert [a.id for a in indexed] == [a.id for a in whole]


def test_damaged_index_is_validated_afresh(cache: Path) -> None:
    load_bundled()
    (path,) = _index_files(cache)
    path.write_bytes(b"\x00not JSON")
    load_bundled.cache_clear()
    db = load_bundled()
    assert db.index is None  # loaded whole again, and the index rewritten
    load_bundled.cache_clear()
    assert load_bundled().index is not None


def test_damaged_record_is_a_miss(cache: Path) -> None:
    """A file whose content no longer matches its digest (one byte changed inside a record)
    is not used: the database is validated afresh rather than failing when that record is
    first built."""
    load_bundled()
    (path,) = _index_files(cache)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    load_bundled.cache_clear()
    assert load_bundled().index is None


def test_user_database_key_follows_its_bytes(cache: Path) -> None:
    bundled = json.loads((Path(_dbcache.__file__).parents[1] / "data/advisories.json")
                         .read_text(encoding="utf-8"))
    p = user_db_path()
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps(bundled), encoding="utf-8")
    first = load_user()
    assert first is not None and first.index is None
    again = load_user()
    assert again is not None and again.index is not None and len(again) == len(first)
    # one record fewer: other bytes, validated afresh
    bundled["advisories"] = bundled["advisories"][1:]
    p.write_text(json.dumps(bundled), encoding="utf-8")
    changed = load_user()
    assert changed is not None and changed.index is None and len(changed) == len(first) - 1
    # the same bytes as the bundled snapshot's parse mode differ: separate entries
    assert len(_index_files(cache)) == 2


def test_invalid_database_is_never_indexed(cache: Path) -> None:
    bundled = json.loads((Path(_dbcache.__file__).parents[1] / "data/advisories.json")
                         .read_text(encoding="utf-8"))
    bundled["advisories"][0]["sources"] = ["http://not-https.example"]
    p = user_db_path()
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps(bundled), encoding="utf-8")
    for _ in range(2):
        assert load_user() is None  # invalid: ignored, as before
    assert _index_files(cache) == []
    with pytest.raises(AdvisoryError):
        load_bundle_text(p.read_text(encoding="utf-8"), source=str(p))
