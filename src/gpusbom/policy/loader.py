"""Reading a policy file: YAML with line numbers, JSON Schema, then the checks a schema
cannot express (version ranges parse, dates are real dates).

Every error is a ``ConfigError`` (exit 3) of one line: ``FILE:LINE: rule 'RULE': problem``.
PyYAML's composed node tree keeps each node's line, so an error points at the exact
key or value; its default date resolver is turned off so ``expires: 2025-13-01`` stays
text and is reported as a bad date rather than crashing the loader.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .ranges import PolicyRange, RangeError, check_version

__all__ = ["BUILTIN", "Policy", "PolicyException", "load_policy", "load_policy_text", "schema"]

#: built-in policy names accepted by ``--policy`` (copies of ``policies/*.yaml``)
BUILTIN = ("default", "strict")
RULES = (
    "advisories", "driver_branches", "minimum_versions", "deny", "allow", "probes",
    "completeness", "advisory_db", "compatible_with",
)


@dataclass(frozen=True)
class ComponentRule:
    """A ``deny`` / ``allow`` entry."""

    component: str
    ecosystem: str | None = None
    versions: PolicyRange | None = None
    reason: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class PolicyException:
    """A waiver: matches violations by rule / advisory / component (all given must match)."""

    reason: str
    owner: str
    expires: _dt.date
    rule: str | None = None
    advisory: str | None = None
    component: str | None = None
    target: str | None = None
    line: int | None = None

    def expired(self, today: _dt.date) -> bool:
        return self.expires < today

    def describe(self) -> str:
        what = [f"{k} {v}" for k, v in (("rule", self.rule), ("advisory", self.advisory),
                                        ("component", self.component),
                                        ("target", self.target)) if v]
        return ", ".join(what)


@dataclass
class Policy:
    path: str  # file path, or "builtin:NAME"
    name: str
    rules: dict[str, Any]  # rule id -> its settings (validated), in file order
    exceptions: list[PolicyException] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)  # rule id -> line of its key
    description: str | None = None
    sha256: str | None = None

    def line_of(self, rule: str) -> int | None:
        return self.lines.get(rule)


@dataclass
class _Doc:
    value: Any
    lines: dict[tuple[Any, ...], int]  # path -> 1-based line of the node (keys: of the key)


def schema() -> dict[str, Any]:
    text = resources.files("gpusbom.policy").joinpath("builtin/policy.schema.json").read_text(
        encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _yaml_loader() -> type:
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    # dates stay text: we parse them ourselves and report bad ones with their line
    _Loader.yaml_implicit_resolvers = {
        k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
        for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    return _Loader


MAX_POLICY_BYTES = 1 << 20
MAX_POLICY_NODES = 100_000  # after alias expansion: a "billion laughs" file stops here
MAX_POLICY_DEPTH = 64
_FLOW = re.compile(r"[\[\]{}]")


def _bound_nodes(node: Any, where: str) -> None:
    """Reject a node graph whose expansion (aliases followed) is too big or too deep,
    before anything walks or validates it recursively."""
    import yaml

    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    # iterative post-order over the graph; aliases share node objects, so memoize by id
    stack: list[tuple[Any, bool]] = [(node, False)]
    on_path: set[int] = set()
    while stack:
        n, done = stack.pop()
        key = id(n)
        if done:
            on_path.discard(key)
            kids = _children(n, yaml)
            sizes[key] = 1 + sum(sizes[id(k)] for k in kids)
            depths[key] = 1 + max((depths[id(k)] for k in kids), default=0)
            if sizes[key] > MAX_POLICY_NODES:
                raise ConfigError(f"{where}: more than {MAX_POLICY_NODES} YAML nodes once "
                                  "aliases are expanded")
            if depths[key] > MAX_POLICY_DEPTH:
                raise ConfigError(f"{where}: YAML nested deeper than {MAX_POLICY_DEPTH} levels")
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise ConfigError(f"{where}: recursive YAML alias")
        on_path.add(key)
        stack.append((n, True))
        stack.extend((k, False) for k in _children(n, yaml) if id(k) not in sizes)


def _children(n: Any, yaml: Any) -> list[Any]:
    if isinstance(n, yaml.MappingNode):
        return [x for kv in n.value for x in kv]
    if isinstance(n, yaml.SequenceNode):
        return list(n.value)
    return []


def _parse_yaml(text: str, where: str) -> _Doc:
    import yaml

    if len(text) > MAX_POLICY_BYTES:
        raise ConfigError(f"{where}: {len(text)} characters: larger than the "
                          f"{MAX_POLICY_BYTES >> 20} MiB a policy file may be")
    depth = 0
    for m in _FLOW.finditer(text):  # flow nesting, checked before the recursive composer
        depth += 1 if m.group() in "[{" else -1
        if depth > MAX_POLICY_DEPTH:
            raise ConfigError(f"{where}: YAML nested deeper than {MAX_POLICY_DEPTH} levels")
    try:
        loader = _yaml_loader()(text)
    except yaml.YAMLError as exc:  # the reader rejects control characters up front
        raise ConfigError(f"{where}: not valid YAML: {exc}".splitlines()[0]) from None
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise ConfigError(f"{where}: YAML nested too deeply") from None
        if node is None:
            raise ConfigError(f"{where}: empty policy file")
        _bound_nodes(node, where)
        lines: dict[tuple[Any, ...], int] = {}
        _walk(node, (), lines, where)
        value = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = exc.problem or exc.context or "invalid YAML"
        raise ConfigError(f"{where}{line}: not valid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML: {exc}") from None
    finally:
        loader.dispose()
    return _Doc(value, lines)


def _walk(node: Any, path: tuple[Any, ...], lines: dict[tuple[Any, ...], int], where: str) -> None:
    import yaml

    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for k, v in node.value:
            key = k.value if isinstance(k, yaml.ScalarNode) else str(k.start_mark)
            if key in seen:
                raise ConfigError(f"{where}:{k.start_mark.line + 1}: duplicate key {key!r} "
                                  f"(first on line {seen[key]})")
            seen[key] = k.start_mark.line + 1
            lines[path + (key,)] = k.start_mark.line + 1
            _walk(v, path + (key,), lines, where)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[path + (i,)] = item.start_mark.line + 1
            _walk(item, path + (i,), lines, where)


def _rule_of(path: tuple[Any, ...]) -> str:
    if len(path) >= 2 and path[0] == "rules":
        return str(path[1])
    if path and path[0] == "exceptions":
        return "exceptions"
    return str(path[0]) if path else "(document)"


def _line(doc: _Doc, path: tuple[Any, ...]) -> int | None:
    p = tuple(path)
    while p not in doc.lines and p:
        p = p[:-1]
    return doc.lines.get(p)


def _err(where: str, doc: _Doc, path: tuple[Any, ...], problem: str,
         rule: str | None = None) -> ConfigError:
    line = _line(doc, path)
    loc = f"{where}:{line}" if line else where
    return ConfigError(f"{loc}: rule {rule or _rule_of(path)!r}: {problem}")


def _yaml_type(v: Any) -> str:
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string",
            list: "a list", dict: "a mapping", type(None): "empty (null)"}.get(type(v), type(v).__name__)


def _schema_error(where: str, doc: _Doc, error: Any) -> ConfigError:
    path = tuple(error.absolute_path)
    v = error.validator
    key = ".".join(str(p) for p in path[2 if path[:1] == ("rules",) else 0:]) or "value"
    if v == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed), key=str)
        bad = extra[0] if extra else "?"
        if path == ("rules",):
            return _err(where, doc, path + (bad,),
                        f"unknown rule {bad!r}; rules are: {', '.join(RULES)}", rule=str(bad))
        return _err(where, doc, path + (bad,),
                    f"unknown key {bad!r}" + (f"; allowed: {', '.join(allowed)}" if allowed else ""))
    if v == "type":
        want = error.validator_value
        hint = ""
        if want == "string" and isinstance(error.instance, (int, float)) \
                and not isinstance(error.instance, bool):
            hint = " (write versions and dates as quoted strings: '12.4')"
        return _err(where, doc, path, f"{key}: expected {want}, got {_yaml_type(error.instance)}"
                    f" {error.instance!r}{hint}")
    if v == "enum":
        return _err(where, doc, path, f"{key}: {error.instance!r} is not one of "
                    + ", ".join(str(x) for x in error.validator_value))
    if v == "required":
        missing = [m for m in error.validator_value if m not in (error.instance or {})]
        return _err(where, doc, path, f"{key}: missing {', '.join(repr(m) for m in missing)}")
    if v == "anyOf" and path[:1] == ("exceptions",):
        return _err(where, doc, path, "an exception needs at least one of rule, advisory, component")
    if v == "pattern" and path[-1:] == ("expires",):
        return _err(where, doc, path, f"expires: {error.instance!r} is not a date (YYYY-MM-DD)")
    if v == "pattern" and path[:2] == ("rules", "driver_branches"):
        return _err(where, doc, path, f"{key}: {error.instance!r} is not a driver branch "
                    "(R580, 580)")
    if v == "const":
        return _err(where, doc, path, f"{key}: must be {error.validator_value!r}")
    return _err(where, doc, path, f"{key}: {error.message}")


def load_policy_text(text: str, where: str) -> Policy:
    """Parse and validate policy YAML (``where`` names it in errors)."""
    import hashlib

    import jsonschema  # type: ignore[import-untyped]

    doc = _parse_yaml(text, where)
    if not isinstance(doc.value, dict):
        raise ConfigError(f"{where}:1: a policy is a mapping (version, rules, exceptions), "
                          f"got {_yaml_type(doc.value)}")
    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(doc.value),
                    key=lambda e: (_line(doc, tuple(e.absolute_path)) or 0, -len(e.absolute_path)))
    if errors:
        best = jsonschema.exceptions.best_match(errors)
        first_line = _line(doc, tuple(errors[0].absolute_path)) or 0
        # report the first problem in the file; best_match picks among those on that line
        same = [e for e in errors if (_line(doc, tuple(e.absolute_path)) or 0) == first_line]
        best = jsonschema.exceptions.best_match(same) or best
        raise _schema_error(where, doc, best)
    data: dict[str, Any] = doc.value
    rules: dict[str, Any] = {}
    lines: dict[str, int] = {}
    for rule, settings in data["rules"].items():
        lines[rule] = doc.lines[("rules", rule)]
        rules[rule] = _check_rule(rule, settings, where, doc)
    exceptions = []
    for i, ex in enumerate(data.get("exceptions") or []):
        try:
            expires = _dt.date.fromisoformat(ex["expires"])
        except ValueError:
            raise _err(where, doc, ("exceptions", i, "expires"),
                       f"expires: {ex['expires']!r} is not a date (YYYY-MM-DD)") from None
        exceptions.append(PolicyException(
            reason=ex["reason"], owner=ex["owner"], expires=expires, rule=ex.get("rule"),
            advisory=ex.get("advisory"), component=ex.get("component"),
            target=ex.get("target"), line=doc.lines.get(("exceptions", i)),
        ))
    return Policy(
        path=where, name=data.get("name") or Path(where).stem, rules=rules,
        exceptions=exceptions, lines=lines, description=data.get("description"),
        sha256=hashlib.sha256(text.encode()).hexdigest(),
    )


_BRANCH_RX = re.compile(r"^[Rr]?([0-9]+)$")


def _check_rule(rule: str, settings: Any, where: str, doc: _Doc) -> Any:
    """The semantic checks of one rule; returns its settings in the form the rules use."""
    base = ("rules", rule)
    if rule == "driver_branches":
        return {"allow": [m.group(1) for m in (_BRANCH_RX.match(b) for b in settings["allow"]) if m]}
    if rule == "minimum_versions":
        out = {}
        for product, version in settings.items():
            try:
                check_version(version, None)
            except RangeError as exc:
                raise _err(where, doc, base + (product,), f"{product}: {exc}") from None
            out[product] = version
        return out
    if rule in ("deny", "allow"):
        entries = []
        for i, e in enumerate(settings):
            rng = None
            if "versions" in e:
                try:
                    rng = PolicyRange.parse(e["versions"], e.get("scheme"))
                except RangeError as exc:
                    raise _err(where, doc, base + (i, "versions"),
                               f"{e['component']}: bad version range {e['versions']!r}: {exc}"
                               ) from None
            entries.append(ComponentRule(
                component=e["component"], ecosystem=e.get("ecosystem"), versions=rng,
                reason=e.get("reason"), line=doc.lines.get(base + (i,)),
            ))
        return entries
    if rule == "compatible_with":
        try:
            from ..compat import platform_from_string
        except ImportError:  # checked when the rule runs
            return dict(settings)
        from ..errors import GpusbomError

        for i, t in enumerate(settings["targets"]):
            try:
                platform_from_string(t)
            except (GpusbomError, ValueError) as exc:
                raise _err(where, doc, base + ("targets", i), f"target {t!r}: {exc}") from None
    return dict(settings)


def load_policy(path: str) -> Policy:
    """A policy file, or a built-in policy by name (``default``, ``strict``)."""
    p = Path(path)
    if not p.exists() and path in BUILTIN:
        text = resources.files("gpusbom.policy").joinpath(f"builtin/{path}.yaml").read_text(
            encoding="utf-8")
        return load_policy_text(text, f"builtin:{path}")
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: policy file not found (or use a built-in policy: "
                          f"{', '.join(BUILTIN)})") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a policy file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text (UTF-8) file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return load_policy_text(text, path)
