"""What a host scan loads beside its walk for the outputs asked for (``Writer.imports``):
the writers' modules, and the tables a ``module:function`` entry builds."""

from __future__ import annotations

import pytest

from gpusbom import licenses, writers
from gpusbom.host import source
from gpusbom.writers import has_writer


def test_the_outputs_modules_and_tables_load_beside_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writers, "_asked", [])
    licenses._known.cache_clear()
    assert has_writer("spdx-json") and has_writer("cyclonedx-json")
    asked = writers.asked_modules()
    assert "gpusbom.writers._spdx_impl:warm" in asked and "gpusbom.licenses:warm" in asked
    ran: list[str] = []
    source._import_later_stages([lambda: ran.append("beside")])
    assert licenses._known.cache_info().currsize == 1  # built by the warm-up, not a write
    assert ran == ["beside"]


def test_an_entry_that_fails_is_left_to_its_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writers, "asked_modules", lambda: ["gpusbom.licenses:no_such_function",
                                                          "no_such_module", "gpusbom.licenses:warm"])
    licenses._known.cache_clear()
    source._import_later_stages()
    assert licenses._known.cache_info().currsize == 1  # the entries after a failing one ran
