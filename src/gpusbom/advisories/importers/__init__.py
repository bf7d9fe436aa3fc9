"""Importers: vendor and community formats -> gpusbom advisory records.

Documents come from the network (``gpusbom advisories update``) or from files a user passes;
a document whose structure is not its schema's (a list where an object belongs, a number
where a string does) is a ``MalformedDocumentError``, which callers report and skip, never
an internal error.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from ...errors import AdvisoryError

F = TypeVar("F", bound=Callable[..., Any])


class MalformedDocumentError(AdvisoryError):  # an AdvisoryError is a ValueError too
    """An advisory document whose shape is not its format's."""


def shape_checked(kind: str) -> Callable[[F], F]:
    """Turn the ``AttributeError``/``TypeError``/``KeyError``/``IndexError`` that reading a
    document of the wrong shape raises into ``MalformedDocumentError`` naming ``kind``."""

    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except (AttributeError, TypeError, KeyError, IndexError) as exc:
                raise MalformedDocumentError(
                    f"malformed {kind} document: {type(exc).__name__}: {exc}"
                ) from None

        return wrapper  # type: ignore[return-value]

    return deco
