"""Advisory feeds are a registry (``gpusbom.advisories.feeds``): a feed is one class with
``fetch``, ``parse`` and ``records``, and ``advisories update``, its ``--source`` help and
the feeds' settings iterate the registry. A toy feed registered here (reading a local file:
no network) is in the help, runs in the update, and its records reach the new database."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpusbom.advisories import feeds as feeds_pkg
from gpusbom.advisories.db import AdvisoryError, load_active, load_bundled, validate_record
from gpusbom.advisories.feeds import Feed, Output, Run, all_feeds, register, unregister
from gpusbom.cli.app import main

ROOT = Path(__file__).resolve().parents[2]


def _toy_record() -> dict[str, Any]:
    """A valid record made from a shipped one, under an id and CVE of its own."""
    rec = copy.deepcopy(next(iter(load_bundled())).raw)
    rec["id"] = "TOY-2099-0001"
    rec["vulnerabilities"] = rec["vulnerabilities"][:1]
    rec["vulnerabilities"][0]["id"] = "CVE-2099-7777"
    rec.pop("aliases", None)
    rec.pop("override", None)
    return rec


@pytest.fixture()
def toy(tmp_path: Path) -> Iterator[Path]:
    src = tmp_path / "toy-feed.json"
    src.write_text(json.dumps({"entries": [_toy_record(), {"id": "broken"}]}))

    @register
    class Toy(Feed):
        name = "toy"
        order = 25
        progress = "toy entries"
        runs_without_url = True  # it reads its local file

        def fetch(self, run: Run, url: str | None) -> bytes:
            return src.read_bytes()

        def parse(self, run: Run, url: str | None, fetched: bytes) -> list[dict[str, Any]]:
            return list(json.loads(fetched)["entries"])

        def records(self, run: Run, url: str | None, parsed: list[dict[str, Any]]) -> Output:
            kept = []
            for rec in parsed:
                try:
                    validate_record(rec)
                except AdvisoryError as exc:
                    run.skipped.append(f"{src}: {exc}")
                    continue
                kept.append(rec)
            run.descriptions["CVE-2099-7777"] = "a toy description"
            return Output({"name": "toy", "url": str(src), "records": len(kept)},
                          records=kept)

    try:
        yield src
    finally:
        unregister("toy")


def test_the_shipped_feeds_are_registered() -> None:
    assert [f.name for f in all_feeds()] == ["curated", "nvidia-csaf", "osv", "kev", "cve5"]
    for f in all_feeds():
        assert f.__module__.startswith(feeds_pkg.__name__ + ".")  # one module per feed
        assert sys.modules[f.__module__].__doc__  # which says what it fetches and checks


def test_a_toy_feed_is_in_the_help(toy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ei:  # click's --help in standalone mode
        from gpusbom.cli.app import command

        command(["advisories"])(args=["advisories", "update", "--help"], prog_name="gpusbom")
    assert ei.value.code == 0
    flat = " ".join(capsys.readouterr().out.split())
    assert "(curated, nvidia-csaf, osv, toy, kev, cve5)" in flat


def test_a_toy_feed_is_run_by_update(toy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GPUSBOM_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("GPUSBOM_NVIDIA_CSAF_URL", "GPUSBOM_OSV_URL", "GPUSBOM_CURATED_URL",
                "GPUSBOM_KEV_URL", "GPUSBOM_CVE5_URL"):
        monkeypatch.delenv(var, raising=False)
    off = [a for f in ("nvidia-csaf", "osv", "kev", "cve5") for a in ("--source", f"{f}=off")]
    assert main(["advisories", "update", *off]) == 0  # offline: only the shipped records
    captured = capsys.readouterr()
    assert "fetching toy entries..." in captured.err
    assert "toy: 1 records" in captured.out and f"skipped: {toy}" in captured.out
    db = load_active()
    assert db.get("TOY-2099-0001") is not None
    assert len(db) == len(load_bundled()) + 1
    assert db.descriptions.get("CVE-2099-7777") == "a toy description"
    feeds = json.loads(Path(db.source).read_text())["feeds"]
    assert [f["name"] for f in feeds] == ["curated", "toy"]


def test_the_shipped_feeds_list_in_a_fresh_process() -> None:
    # the registry is found by walking the package: no list of feeds to keep up to date
    out = subprocess.run([sys.executable, "-c", "from gpusbom.advisories.feeds import "
                          "all_feeds; print(' '.join(f.name for f in all_feeds()))"],
                         capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.split() == ["curated", "nvidia-csaf", "osv", "kev", "cve5"]
