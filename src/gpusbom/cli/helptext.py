"""Help text that lists what a registry holds, filled in when the help is shown.

An option's help may name ``{formats:SUBJECT}`` (the format ids of the writers of SUBJECT,
``gpusbom.writers``), ``{feeds}`` (the advisory feeds, ``gpusbom.advisories.feeds``) or
``{feed_vars}`` (their URLs' environment variables). Listing a registry imports its modules
(every writer: 0.4 s on a 2-core VM), which a command that shows no help must not pay, so
the text is filled when it is read (``--help``, the man page), not when the command is
built. A new writer or feed is then in the help with no change here."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

_PLACEHOLDER = re.compile(r"\{(formats|feeds|feed_vars)(?::(\w+))?\}")


def _formats(subject: str | None) -> str:
    from ..writers import all_writers

    return ", ".join(all_writers(subject or "scan"))


def _feeds(_arg: str | None) -> str:
    from ..advisories.feeds import all_feeds

    return ", ".join(f.name for f in all_feeds())


def _feed_vars(_arg: str | None) -> str:
    from .. import settings
    from ..advisories.feeds import all_feeds

    return ", ".join(settings.env_name(f.setting) for f in all_feeds() if f.setting)


_FILL: dict[str, Callable[[str | None], str]] = {
    "formats": _formats, "feeds": _feeds, "feed_vars": _feed_vars}


def fill(text: str) -> str:
    """``text`` with every placeholder replaced by what its registry holds now."""
    return _PLACEHOLDER.sub(lambda m: _FILL[m.group(1)](m.group(2)), text)


def lazy_help(cmd: Any) -> None:
    """Every option below ``cmd`` (a click command or group) whose help names a placeholder
    fills it in when the help is read."""
    for sub in (getattr(cmd, "commands", None) or {}).values():
        lazy_help(sub)
    for param in getattr(cmd, "params", ()):
        text = getattr(param, "help", None)
        if isinstance(text, str) and _PLACEHOLDER.search(text):
            param.__class__ = _filled_class(type(param))  # adds no state: only the help


_classes: dict[type[Any], type[Any]] = {}


def _filled_class(base: type[Any]) -> type[Any]:
    """``base`` (the option's click class) with a ``help`` that fills its placeholders."""
    if base not in _classes:
        def get(self: Any) -> Any:
            text = self.__dict__.get("help")
            return fill(text) if isinstance(text, str) else text

        def put(self: Any, value: Any) -> None:
            self.__dict__["help"] = value

        _classes[base] = type(f"Filled{base.__name__}", (base,),
                              {"help": property(get, put), "__module__": __name__})
    return _classes[base]
