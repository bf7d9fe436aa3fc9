"""Every public exception class of gpusbom derives from ``errors.GpusbomError`` (one error
model: the CLI maps it to an exit code in one place), and the layer bases exist."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import gpusbom
from gpusbom import errors
from gpusbom.errors import GpusbomError


def _public_exceptions() -> list[type[BaseException]]:
    found = []
    for m in pkgutil.walk_packages(gpusbom.__path__, "gpusbom."):
        if m.name.endswith("__main__"):
            continue
        mod = importlib.import_module(m.name)  # an import error fails the test: no skipping
        for name, obj in vars(mod).items():
            if (inspect.isclass(obj) and issubclass(obj, BaseException)
                    and obj.__module__ == mod.__name__ and not name.startswith("_")):
                found.append(obj)
    return found


def test_every_public_error_is_a_gpusbom_error() -> None:
    found = _public_exceptions()
    assert len(found) > 20  # the walk sees the package
    outside = sorted(f"{c.__module__}.{c.__qualname__}" for c in found
                     if not issubclass(c, GpusbomError))
    assert outside == []


def test_layer_bases() -> None:
    for base in ("SourceError", "ViewError", "CollectorError", "AdvisoryError", "WriterError"):
        assert issubclass(getattr(errors, base), GpusbomError), base
    from gpusbom.advisories.db import AdvisoryError
    from gpusbom.fsview.view import NotCapturedError

    assert AdvisoryError is errors.AdvisoryError and issubclass(AdvisoryError, ValueError)
    assert issubclass(NotCapturedError, errors.ViewError) and issubclass(NotCapturedError, LookupError)
    from gpusbom.cli._common import exit_code

    assert exit_code(errors.SourceNotFoundError("x")) == 3
    assert exit_code(errors.PolicyFailed("x")) == 1
    assert exit_code(errors.UsageError("x")) == 2
    assert exit_code(errors.IncompleteError("x")) == 4
    assert exit_code(errors.CollectorError("x")) == 70
    assert exit_code(ValueError("x")) == 70
