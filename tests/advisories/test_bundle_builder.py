"""The bundle builder (``scripts/build_advisory_bundle.py``) drives the registered feeds: a
feed that imports a local copy adds its option to the builder, its records to
``advisories/`` and the bundle, and its section to the coverage report, in feed order, with
no change to the builder. A toy feed registered here reads a local file."""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gpusbom.advisories.feeds import Feed, LocalImport, Output, Run, register, unregister

from .test_feeds import _toy_record

ROOT = Path(__file__).resolve().parents[2]


def _builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "build_advisory_bundle", ROOT / "scripts" / "build_advisory_bundle.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture()
def toy_local() -> Iterator[None]:
    @register
    class ToyLocal(Feed):
        name = "toy-local"
        order = 45  # after cve5: its report section comes after the Intel and AMD ones
        progress = "toy"
        local_option = "--toy"
        report_heads = ("Toy (",)

        def fetch(self, run: Run, url: str | None) -> Any:
            raise NotImplementedError

        def parse(self, run: Run, url: str | None, fetched: Any) -> Any:
            raise NotImplementedError

        def records(self, run: Run, url: str | None, parsed: Any) -> Output:
            raise NotImplementedError

        def local_options(self, parser: Any) -> None:
            parser.add_argument(self.local_option, metavar="FILE")

        def from_local(self, opts: Any, since: str) -> LocalImport:
            recs = json.loads(Path(opts.toy).read_text(encoding="utf-8"))
            return LocalImport(recs, [f"Toy (a local file; since {since})",
                                      f"  records: {len(recs)}"], pattern="TOY-*.json")

        def wrote(self, path: Path, record: dict[str, Any]) -> bool:
            return path.name.startswith("TOY-")

    try:
        yield
    finally:
        unregister("toy-local")


def test_a_feed_with_a_local_copy_builds_into_the_bundle(
        toy_local: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    mod = _builder()
    with pytest.raises(SystemExit):
        mod.main(["--help"])
    helptext = capsys.readouterr().out
    at = [helptext.index(opt) for opt in ("--nvidia", "--cve5", "--intel-index", "--toy")]
    assert at == sorted(at)  # feed order

    shutil.copytree(ROOT / "advisories", tmp_path / "advisories")
    report = tmp_path / "coverage.txt"
    shutil.copy(mod.REPORT, report)
    monkeypatch.setattr(mod, "SRC", tmp_path / "advisories")
    monkeypatch.setattr(mod, "REPORT", report)
    monkeypatch.setattr(mod, "OUT", tmp_path / "advisories.json")
    copy = tmp_path / "toy.json"
    rec = _toy_record()
    copy.write_text(json.dumps([rec]), encoding="utf-8")
    before = report.read_text(encoding="utf-8").split("\n")

    assert mod.main(["--toy", str(copy)]) == 0
    written = tmp_path / "advisories" / "TOY-2099-0001.json"
    assert written.read_text(encoding="utf-8") == json.dumps(rec, indent=2) + "\n"
    ids = [a["id"] for a in json.loads(mod.OUT.read_text(encoding="utf-8"))["advisories"]]
    assert "TOY-2099-0001" in ids
    # the NVIDIA and Intel/AMD sections kept as they were (no copy of theirs was given),
    # then the toy's, then the curated advisories (the toy's file is not one)
    curated = next(i for i, line in enumerate(before)
                   if line and not line.startswith(" ") and "(curated" in line)
    want = before[:curated] + ["Toy (a local file; since 2022-01-01)", "  records: 1", ""] \
        + before[curated:]
    assert report.read_text(encoding="utf-8").split("\n") == want
