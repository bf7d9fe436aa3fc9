"""A deliberately small Go-template renderer for the gpusbom Helm chart's tests.

Helm itself installs from none of the registries this project can reach (no Debian, PyPI
or npm package), so ``helm lint`` / ``helm template`` cannot run here. This renders the
subset of Go templates the chart uses and nothing more: ``{{ .Values.a.b }}``,
``.Release.Name|Namespace``, ``.Chart.*``, ``.`` inside ``range``; ``if`` / ``else if`` /
``else`` / ``end``; ``range LIST``; pipelines with ``quote``, ``toYaml``, ``nindent N``,
``indent N`` and ``default X``; ``{{-`` / ``-}}`` whitespace trimming as Go does. Anything
else raises ``Unsupported`` (a test renders every template, so the chart cannot drift
outside this subset without a failing test). The rendered manifests are then validated
against the Kubernetes schemas (kubernetes-validate).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

import yaml

_ACTION = re.compile(r"\{\{(-?)\s*(.*?)\s*(-?)\}\}", re.S)


class Unsupported(ValueError):
    pass


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    for m in _ACTION.finditer(text):
        chunk = text[pos:m.start()]
        if m.group(1):
            chunk = chunk.rstrip()
        if out and out[-1][0] == "trim-next":
            out.pop()
            chunk = chunk.lstrip()
        out.append(("text", chunk))
        out.append(("action", m.group(2)))
        if m.group(3):
            out.append(("trim-next", ""))
        pos = m.end()
    tail = text[pos:]
    if out and out[-1][0] == "trim-next":
        out.pop()
        tail = tail.lstrip()
    out.append(("text", tail))
    return out


def _truthy(v: Any) -> bool:
    return v not in (None, False, 0, "", [], {})


class _Renderer:
    def __init__(self, ctx: dict[str, Any]) -> None:
        self.ctx = ctx

    def value(self, word: str, dot: Any) -> Any:
        if word == ".":
            return dot
        if word.startswith('"'):
            return shlex.split(word)[0]
        if re.fullmatch(r"-?\d+", word):
            return int(word)
        if word.startswith("."):
            cur: Any = self.ctx
            for part in word[1:].split("."):
                cur = cur.get(part) if isinstance(cur, dict) else None
            return cur
        raise Unsupported(f"argument {word!r}")

    def pipeline(self, expr: str, dot: Any) -> Any:
        result: Any = None
        for i, cmd in enumerate(c.strip() for c in expr.split("|")):
            words = shlex.split(cmd, posix=False)
            fn, args = words[0], [self.value(w, dot) for w in words[1:]]
            if i > 0:
                args.append(result)
            if fn.startswith(".") or fn.startswith('"') or fn.isdigit():
                if len(words) != 1 or i > 0:
                    raise Unsupported(cmd)
                result = self.value(fn, dot)
            elif fn == "quote":
                result = '"' + str(args[0]).replace("\\", "\\\\").replace('"', '\\"') + '"'
            elif fn == "toYaml":
                result = yaml.safe_dump(args[0], default_flow_style=False).rstrip("\n")
            elif fn in ("nindent", "indent"):
                pad = " " * args[0]
                body = "\n".join(pad + ln for ln in str(args[1]).split("\n"))
                result = ("\n" if fn == "nindent" else "") + body
            elif fn == "default":
                result = args[1] if _truthy(args[1]) else args[0]
            else:
                raise Unsupported(f"function {fn!r}")
        return result

    def block(self, toks: list[tuple[str, str]], i: int, dot: Any, out: list[str],
              emit: bool) -> tuple[int, str]:
        """Render until an ``end`` / ``else`` at this level; returns (index, that keyword)."""
        while i < len(toks):
            kind, s = toks[i]
            i += 1
            if kind == "text":
                if emit:
                    out.append(s)
                continue
            word = s.split(None, 1)[0] if s else ""
            if word in ("end", "else"):
                return i - 1, s
            if word == "if":
                i = self.if_chain(toks, i, s[3:], dot, out, emit)
            elif word == "range":
                items = self.pipeline(s[6:], dot) if emit else []
                start = i
                end_i = i
                for item in items or [None]:
                    end_i, kw = self.block(toks, start, item, out, emit and items is not None
                                           and len(items) > 0)
                    if kw != "end":
                        raise Unsupported("range ... else")
                i = end_i + 1
            elif word.startswith("/*") or word in ("define", "template", "include", "with"):
                raise Unsupported(s)
            else:
                v = self.pipeline(s, dot) if emit else None
                if emit:
                    out.append("" if v is None else str(v))
        return i, ""

    def if_chain(self, toks: list[tuple[str, str]], i: int, cond: str, dot: Any,
                 out: list[str], emit: bool) -> int:
        taken = False
        while True:
            ok = emit and not taken and _truthy(self.pipeline(cond, dot))
            i, kw = self.block(toks, i, dot, out, ok)
            taken = taken or ok
            if kw == "end":
                return i + 1
            if kw == "else":
                i, kw2 = self.block(toks, i + 1, dot, out, emit and not taken)
                if kw2 != "end":
                    raise Unsupported("else without end")
                return i + 1
            if kw.startswith("else if "):
                cond = kw[len("else if "):]
                i += 1
                continue
            raise Unsupported(f"unterminated if ({kw!r})")


def render(text: str, values: dict[str, Any], release: dict[str, str],
           chart: dict[str, Any]) -> str:
    r = _Renderer({"Values": values, "Release": release,
                   "Chart": {k[0].upper() + k[1:]: v for k, v in chart.items()}})
    out: list[str] = []
    toks = _tokens(text)
    i, kw = r.block(toks, 0, None, out, True)
    if kw:
        raise Unsupported(f"stray {kw!r}")
    return "".join(out)
