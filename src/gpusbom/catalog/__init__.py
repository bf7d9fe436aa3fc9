"""The product-identity catalog: every name a GPU-stack product goes by, in one data table.

The table is ``products.yaml`` beside this module (package data). One row per product::

    - id: cuda-toolkit            # gpusbom's product id (advisory target, stack summary key)
      vendor: NVIDIA
      stack: cuda                 # the collectors' stack id
      name: NVIDIA CUDA Toolkit   # display name
      scheme: semver              # version scheme advisories use (advisories.versions.SCHEMES)
      version_rule: upstream      # package version -> product version: upstream (strip
                                  # epoch/revision) | leading-numeric (550.127.05 of
                                  # 550.127.05-0ubuntu1) | none (the package
                                  # version is not the product's) | as-is (default)
      collector: [cuda-toolkit]   # product ids the collectors emit under `stack` ("*": any)
      deb: [REGEX, ...]           # package names, full-match, case-insensitive; also
      rpm: [...]                  # pypi (canonicalised), conda, golang
      pypi: [...]
      conda: [...]
      golang: [...]
      generic: [...]              # pkg:generic names as "namespace/name" or "name"
      cpe: ["nvidia:cuda_toolkit"]          # CPE 2.3 vendor:product (literal); the first
                                            # is written on components (identity.py)
      cpe_guessed: true           # the CPE is not confirmed in NVD's dictionary
      vendor_strings: [REGEX, ...]          # CSAF / CVE product strings (re.search)
      platforms: [windows]        # only for products that never run on Linux
      parts: [cuobjdump, ...]     # tools/libraries inside the product a CVE may name
      part_of: ID                 # a row that is a component of another product
      libraries: [libcuda, ...]   # library stems/sonames (binary classifiers, #16)
      version_sources: [...]      # where collectors read the version (free-form rows;
                                  # for ``collect: catalog`` rows: soname, package)
      collect: catalog            # no collector module knows the product: the catalog
                                  # collector (collectors/catalog_libraries.py) finds its
                                  # ``libraries`` by file name
      stack_name: CUDA            # display name of ``stack`` (stack summary)
      display: cuDNN              # short display name of the ``collector`` products

How a stack collector finds the product (its library files, headers and version macros,
version-file keys, env names, wheels and conda records) is in more row fields, read by
:mod:`.detection` (the fields are listed there) and :mod:`.names`.

Display names of the stacks and collector products that no row names are in
``display.yaml`` beside this module (the stack summary reads both through
``stack_display`` / ``product_display``).

``$GPUSBOM_CATALOG`` names extra YAML files (``os.pathsep``-separated) whose rows are
appended to the shipped table: a site's own products, or a test's toy product. A file
that does not read or a row that does not validate is a configuration error (exit 3)
naming the file.

Unknown keys are kept in ``Product.extra`` so that other modules (binary classifiers,
collectors) can add fields without a schema change here.

API::

    from gpusbom import catalog
    catalog.products()                         # every row, in file order
    catalog.get("tensorrt")                    # one row (KeyError when unknown)
    catalog.by_package("deb", "cuda-toolkit-12-6")   # rows whose deb names match
    catalog.by_purl("pkg:generic/nvidia/libcuda@550.54.15")
    catalog.by_cpe("cpe:2.3:a:nvidia:cuda_toolkit:12.4:*:*:*:*:*:*:*")
    catalog.by_vendor_string("NVIDIA TensorRT-LLM", vendor="NVIDIA")  # first match
    catalog.by_collector("cuda", "cuda-toolkit")     # rows a collector product belongs to
    catalog.product_version(row, "deb", "12.6.3-1")  # "12.6.3"

Lookups are cached; the table is read once per process.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .. import settings
from .._pep503 import canonicalize_name
from .._resources import read_text
from ..errors import ConfigError, GpusbomError
from ._patterns import NamePattern, literal_prefixes

__all__ = [
    "PACKAGE_KEYS",
    "CatalogError",
    "NamePattern",
    "Product",
    "by_collector",
    "by_cpe",
    "by_package",
    "by_purl",
    "by_vendor_string",
    "cpe23",
    "get",
    "literal_prefixes",
    "normalise_name",
    "product_version",
    "product_display",
    "products",
    "stack_display",
]

T = TypeVar("T")

#: extra catalog files (``os.pathsep``-separated), appended to the shipped rows
ENV_EXTRA = settings.env_name("catalog")

#: row keys that list package names, by gpusbom ecosystem (``Component.ecosystem``)
PACKAGE_KEYS = ("deb", "rpm", "pypi", "conda", "golang", "generic")
_LIST_KEYS = (*PACKAGE_KEYS, "cpe", "vendor_strings", "collector", "platforms", "parts",
              "libraries", "version_sources")
_SCALAR_KEYS = ("id", "vendor", "stack", "name", "scheme", "version_rule", "part_of",
                "collect", "stack_name", "display")
_COLLECT = (None, "catalog")
_VERSION_RULES = ("as-is", "upstream", "leading-numeric", "none")
_ID = re.compile(r"^[a-z0-9][a-z0-9.+-]*$")


class CatalogError(GpusbomError, ValueError):
    """The catalog table is malformed (a packaging bug: tests load it)."""


class CatalogFileError(ConfigError, CatalogError):
    """An extra catalog file (``$GPUSBOM_CATALOG``) does not read or validate."""


@dataclass(frozen=True, eq=False)
class Product:
    """One catalog row (see the module docstring for the fields). Rows compare and hash
    by identity: the table holds each once."""

    id: str
    vendor: str
    stack: str
    name: str
    scheme: str | None = None
    version_rule: str = "as-is"
    collector: tuple[str, ...] = ()
    names: Mapping[str, tuple[NamePattern, ...]] = field(default_factory=dict)
    cpe: tuple[str, ...] = ()
    vendor_strings: tuple[NamePattern, ...] = ()
    platforms: tuple[str, ...] = ()
    parts: tuple[str, ...] = ()
    part_of: str | None = None
    libraries: tuple[str, ...] = ()
    version_sources: tuple[str, ...] = ()
    collect: str | None = None
    stack_name: str | None = None
    display: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def linux(self) -> bool:
        """Whether the product can be found on a Linux target (no ``platforms`` = yes)."""
        return not self.platforms or "linux" in self.platforms

    @property
    def product_id(self) -> str:
        """The product id the row's components carry (``Product.name``): its
        first named ``collector`` product, else the row id."""
        named = [c.rpartition("/")[2] for c in self.collector if c != "*"]
        return named[0] if named else self.id

    @property
    def found_as(self) -> tuple[str, str]:
        """(collector stack, product) the row's files are found as: its ``found_as``
        (``cuda/tensorrt``), else its own stack and ``product_id``."""
        where = self.extra.get("found_as")
        if not isinstance(where, str) or not where:
            return self.stack, self.product_id
        stack, _, product = where.partition("/")
        return stack, product or self.product_id

    def matches(self, ecosystem: str, name: str) -> bool:
        n = normalise_name(ecosystem, name)
        return any(rx.fullmatch(n) for rx in self.names.get(ecosystem, ()))


def normalise_name(ecosystem: str, name: str) -> str:
    """The form name patterns are matched against: lower case; PyPI/conda canonical."""
    if ecosystem == "pypi":  # PEP 503, the one PyPI normaliser the collectors use too
        return str(canonicalize_name(name.strip()))
    return name.strip().lower()


def _compile(row: dict[str, Any], key: str, where: str, eager: bool) -> tuple[NamePattern, ...]:
    """A row's patterns; ``eager``: compiled now, so that a bad one is an error naming its row
    (extra files and ``load_text``; the shipped table's patterns are compiled by its tests)."""
    out = []
    for pat in row.get(key) or ():
        if not isinstance(pat, str):
            raise CatalogError(f"{where}: {key} entries must be strings")
        np = NamePattern(pat)
        if eager:
            try:
                np.rx  # noqa: B018 - compiled for the error
            except re.error as exc:
                raise CatalogError(f"{where}: {key} {pat!r}: {exc}") from None
        out.append(np)
    return tuple(out)


def _row(row: Any, n: int, eager: bool = True) -> Product:
    if not isinstance(row, dict):
        raise CatalogError(f"row {n}: not a mapping")
    where = f"row {n} ({row.get('id', '?')})"
    for k in ("id", "vendor", "stack", "name"):
        if not isinstance(row.get(k), str) or not row[k]:
            raise CatalogError(f"{where}: missing {k!r}")
    if not _ID.match(row["id"]):
        raise CatalogError(f"{where}: id must be lower-case [a-z0-9.+-]")
    rule = row.get("version_rule", "as-is")
    if rule not in _VERSION_RULES:
        raise CatalogError(f"{where}: version_rule must be one of {_VERSION_RULES}")
    if row.get("collect") not in _COLLECT:
        raise CatalogError(f"{where}: collect must be 'catalog' when given")
    for k in ("stack_name", "display"):
        if row.get(k) is not None and not isinstance(row[k], str):
            raise CatalogError(f"{where}: {k} must be a string")
    for k in _LIST_KEYS:
        v = row.get(k)
        if v is not None and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            raise CatalogError(f"{where}: {k} must be a list of strings")
    names = {k: _compile(row, k, where, eager) for k in PACKAGE_KEYS if row.get(k)}
    extra = {k: v for k, v in row.items() if k not in (*_LIST_KEYS, *_SCALAR_KEYS)}
    return Product(
        id=row["id"],
        vendor=row["vendor"],
        stack=row["stack"],
        name=row["name"],
        scheme=row.get("scheme"),
        version_rule=rule,
        collector=tuple(row.get("collector") or ()),
        names=names,
        cpe=tuple(c.lower() for c in row.get("cpe") or ()),
        vendor_strings=_compile(row, "vendor_strings", where, eager),
        platforms=tuple(p.lower() for p in row.get("platforms") or ()),
        parts=tuple(row.get("parts") or ()),
        part_of=row.get("part_of"),
        libraries=tuple(row.get("libraries") or ()),
        version_sources=tuple(row.get("version_sources") or ()),
        collect=row.get("collect"),
        stack_name=row.get("stack_name"),
        display=row.get("display"),
        extra=extra,
    )


def _yaml(text: str, cache: bool = False) -> Any:
    """YAML text parsed by libyaml's safe loader (PyYAML's pure-Python one without it);
    ``cache``: gpusbom's own table, parsed once per content (``_tables``)."""
    if cache:
        from .._tables import cached_parse

        return cached_parse(text, _yaml)
    import yaml

    safe = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=safe)  # noqa: S506 - a safe loader (libyaml's when present)


def shipped_table(text: str, build: Callable[[Any], T]) -> T:
    """``build(data)`` for a table shipped with gpusbom, its YAML parse from the user cache
    (``_tables``); a cached parse that ``build`` refuses (damaged or planted: the same checks
    as the table's own) is dropped and the text parsed again."""
    from .._tables import cached_parse, drop

    try:
        return build(cached_parse(text, _yaml))
    except (CatalogError, ValueError, TypeError, KeyError, AttributeError, IndexError):
        drop(text)
        return build(cached_parse(text, _yaml))  # parsed afresh, and stored again


def _rows(text: str, eager: bool = True) -> list[Product]:
    if not eager:
        return shipped_table(text, lambda data: _rows_of(data, eager))
    return _rows_of(_yaml(text), eager)


def _rows_of(data: Any, eager: bool) -> list[Product]:
    if not isinstance(data, list):
        raise CatalogError("catalog: top level must be a list of rows")
    return [_row(r, i, eager) for i, r in enumerate(data, 1)]


def load_text(text: str, *extra: str) -> tuple[Product, ...]:
    """Rows from YAML text, then the rows of each ``extra`` text (tests and tools; the
    shipped table is ``products()``)."""
    rows = tuple(_rows(text) + [r for t in extra for r in _rows(t)])
    return _check(rows)


def _check(rows: tuple[Product, ...]) -> tuple[Product, ...]:
    ids = [r.id for r in rows]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise CatalogError(f"catalog: duplicate ids {', '.join(dup)}")
    known = set(ids)
    for r in rows:
        if r.part_of is not None and r.part_of not in known:
            raise CatalogError(f"catalog: {r.id}: part_of names unknown product {r.part_of!r}")
    return rows


def _yaml_error() -> type[Exception]:
    import yaml

    return yaml.YAMLError


def _extra_rows() -> list[Product]:
    out: list[Product] = []
    for name in settings.raw("catalog").split(os.pathsep):
        if not name.strip():
            continue
        try:
            with open(name, encoding="utf-8") as f:
                text = f.read()
            out.extend(_rows(text))
        except OSError as exc:
            raise CatalogFileError(f"{ENV_EXTRA} {name}: {exc.strerror or exc}") from None
        except _yaml_error() as exc:
            raise CatalogFileError(f"{ENV_EXTRA} {name}: not YAML: {exc}") from None
        except CatalogError as exc:
            raise CatalogFileError(f"{ENV_EXTRA} {name}: {exc}") from None
    return out


def _shipped_rows(text: str) -> tuple[Product, ...]:
    return tuple(_rows(text, eager=False))


@functools.lru_cache(maxsize=1)
def products() -> tuple[Product, ...]:
    """Every row of the shipped table, in file order (its YAML parsed once per content:
    ``_tables``; the rows built and checked from that data in every process), then the rows
    of the ``$GPUSBOM_CATALOG`` files."""
    text = read_text(__name__, "products.yaml")
    extra = _extra_rows()
    try:
        return _check(_shipped_rows(text) + tuple(extra))
    except CatalogError as exc:
        if not extra:
            raise
        raise CatalogFileError(f"{ENV_EXTRA}: {exc}") from None


@functools.lru_cache(maxsize=1)
def _display() -> dict[str, dict[str, str]]:
    return shipped_table(read_text(__name__, "display.yaml"), _display_of)


def _display_of(data: Any) -> dict[str, dict[str, str]]:
    if not isinstance(data, dict) or set(data) - {"stacks", "products"}:
        raise CatalogError("display.yaml: top level must be a mapping of stacks, products")
    out: dict[str, dict[str, str]] = {"stacks": {}, "products": {}}
    for key in out:
        part = data.get(key) or {}
        if not isinstance(part, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in part.items()):
            raise CatalogError(f"display.yaml: {key} must map ids to names")
        out[key].update(part)
    for r in products():  # a row's own names complete the table (a new product is one row)
        if r.stack_name:
            out["stacks"].setdefault(r.stack, r.stack_name)
        if not r.display:
            continue
        for c in r.collector:
            if c != "*":
                out["products"].setdefault(c.rpartition("/")[2], r.display)
        if r.extra.get("found_as"):  # the product a stack collector finds it as
            out["products"].setdefault(r.found_as[1], r.display)
    return out


def stack_display(stack: str) -> str:
    """``cuda`` -> ``CUDA``; the id itself when no name is known."""
    return _display()["stacks"].get(stack, stack)


def product_display(product: str) -> str:
    """``cudnn`` -> ``cuDNN``; the id itself when no name is known."""
    return _display()["products"].get(product, product)


def collected() -> tuple[Product, ...]:
    """Rows the catalog collector finds (``collect: catalog``)."""
    return tuple(r for r in products() if r.collect == "catalog")


@functools.lru_cache(maxsize=1)
def _by_id() -> dict[str, Product]:
    return {r.id: r for r in products()}


def get(product_id: str) -> Product:
    """The row with that id; ``KeyError`` when unknown."""
    return _by_id()[product_id]


def ids() -> tuple[str, ...]:
    return tuple(_by_id())


@functools.lru_cache(maxsize=64)
def _prefilter(ecosystem: str) -> tuple[tuple[str, ...], bool]:
    """Every literal prefix of one ecosystem's patterns, and whether some pattern has none:
    most package names match no row, and one ``str.startswith`` says so (10,000 names: 2 s
    of per-row loops -> milliseconds; the one alternation of every pattern that did this
    before cost 10-20 ms to compile in every scan)."""
    pats = [rx for r in products() for rx in r.names.get(ecosystem, ())]
    return (tuple(p for rx in pats for p in rx.prefixes or ()),
            any(rx.prefixes is None for rx in pats))


@functools.lru_cache(maxsize=65536)
def by_package(ecosystem: str | None, name: str) -> tuple[Product, ...]:
    """Rows whose ``ecosystem`` name patterns match ``name`` (file order)."""
    if not ecosystem or not name:
        return ()
    n = normalise_name(ecosystem, name)
    prefixes, unprefixed = _prefilter(ecosystem)
    if not unprefixed and n.isascii() and not n.startswith(prefixes):
        return ()
    return tuple(r for r in products()
                 if any(rx.may_match(n) and rx.fullmatch(n) for rx in r.names.get(ecosystem, ())))


_PEP503_RUNS = re.compile(r"[-_.]+")


def _purl_cannot_match(purl: str) -> bool:
    """True only when no row can match the purl's name, told without parsing the purl (an
    image's hundreds of packages: ``PackageURL.from_string`` was 25 ms of a scan of 801).

    For a purl of a type whose patterns all have literal starts, whose name is plain ASCII
    (no percent-escapes), the name ``by_package`` tests is, lower-cased (PyPI: with PEP 503's runs of
    ``-_.`` as one ``-``), part of the purl's last path segment before its version (as
    ``PackageURL.from_string`` splits it: the path ends at the first ``?`` or ``#``, the
    version starts at its last ``@``); when none of the type's literal starts occurs in
    that segment, none can start the name."""
    eco, _, path = purl[4:].strip().lstrip("/").partition("/")
    eco = eco.lower()
    if eco not in ("deb", "rpm", "pypi", "conda"):
        return False
    prefixes, unprefixed = _prefilter(eco)
    if unprefixed:
        return False
    path = path.partition("#")[0].partition("?")[0]
    if "@" in path:
        path = path.rpartition("@")[0]
    name = path.rstrip("/ \t\n\r\x0b\x0c").rpartition("/")[2]
    if "%" in name or not name.isascii():  # escaped or not ASCII: parse it
        return False
    text = _PEP503_RUNS.sub("-", name).lower() if eco == "pypi" else name.lower()
    return not any(p in text for p in prefixes)


def by_purl(purl: str | None) -> tuple[Product, ...]:
    """Rows a purl names: its type's patterns on ``name`` (golang: ``namespace/name``;
    generic: ``namespace/name`` and ``name``)."""
    if not purl or not purl.startswith("pkg:"):
        return ()
    if _purl_cannot_match(purl):
        return ()
    from packageurl import PackageURL

    try:
        p = PackageURL.from_string(purl)
    except ValueError:
        return ()
    eco = p.type.lower()
    if eco == "golang":
        return by_package("golang", f"{p.namespace}/{p.name}" if p.namespace else p.name)
    if eco == "generic":
        hits = by_package("generic", f"{p.namespace}/{p.name}") if p.namespace else ()
        return hits or by_package("generic", p.name)
    return by_package(eco, p.name)


_CPE_SPECIAL = re.compile(r"([^A-Za-z0-9_.\-])")


def cpe23(vendor_product: str, version: str | None, part: str = "a") -> str:
    """The one CPE builder: ``nvidia:cuda_toolkit`` + ``12.4.1`` ->
    ``cpe:2.3:a:nvidia:cuda_toolkit:12.4.1:*:*:*:*:*:*:*``. Characters CPE 2.3 formatted
    strings reserve are quoted (``oneapi_dpc\\+\\+\\/c\\+\\+_compiler``); no version
    is ``*`` (ANY)."""
    vendor, _, product = vendor_product.partition(":")
    esc = [_CPE_SPECIAL.sub(r"\\\1", x) for x in (vendor, product, version or "")]
    return f"cpe:2.3:{part}:{esc[0]}:{esc[1]}:{esc[2] or '*'}:*:*:*:*:*:*:*"


def _cpe_key(cpe: str) -> str | None:
    if cpe.startswith("cpe:2.3:"):
        parts = re.split(r"(?<!\\):", cpe)
        if len(parts) >= 5:
            return f"{parts[3]}:{parts[4]}".replace("\\", "").lower()
    elif cpe.startswith("cpe:/"):
        parts = cpe[5:].split(":")
        if len(parts) >= 3:
            return f"{parts[1]}:{parts[2]}".lower()
    return None


@functools.lru_cache(maxsize=1)
def _cpe_index() -> dict[str, tuple[Product, ...]]:
    out: dict[str, list[Product]] = {}
    for r in products():
        for c in r.cpe:
            out.setdefault(c, []).append(r)
    return {k: tuple(v) for k, v in out.items()}


def by_cpe(cpe: str | None) -> tuple[Product, ...]:
    """Rows whose CPE ``vendor:product`` the CPE (2.3 formatted string or 2.2 URI) names."""
    key = _cpe_key(cpe) if cpe else None
    return _cpe_index().get(key, ()) if key else ()


@functools.lru_cache(maxsize=4096)
def by_vendor_string(text: str, vendor: str | None = None) -> Product | None:
    """The first row (file order) whose ``vendor_strings`` match a CSAF/CVE product string;
    ``vendor`` (``NVIDIA``/``Intel``/``AMD``, case-insensitive) restricts the rows."""
    s = " ".join(text.split())
    for r in products():
        if vendor and r.vendor.lower() != vendor.lower():
            continue
        if any(rx.search(s) for rx in r.vendor_strings):
            return r
    return None


@functools.lru_cache(maxsize=1)
def _collector_index() -> dict[tuple[str, str], tuple[Product, ...]]:
    out: dict[tuple[str, str], list[Product]] = {}
    for r in products():
        for c in r.collector:
            out.setdefault((r.stack, c), []).append(r)
    return {k: tuple(v) for k, v in out.items()}


def by_collector(stack: str, product: str | None) -> tuple[Product, ...]:
    """Rows a collector's (stack, product) belongs to (exact product first, then ``*``)."""
    idx = _collector_index()
    return idx.get((stack, product or ""), ()) + idx.get((stack, "*"), ())


_EPOCH = re.compile(r"^\d+:")
_REVISION = re.compile(r"-[A-Za-z0-9.+~_]+$")
_REPACK = re.compile(r"[+~](?:dfsg|ds|repack)\d*$")
_LEADING = re.compile(r"^(\d+(?:\.\d+)+)")


def product_version(row: Product, ecosystem: str | None, version: str | None) -> str | None:
    """The product's version from a package version, by the row's ``version_rule``:
    ``upstream`` drops a distro epoch and revision (``1:12.6.3-1`` -> ``12.6.3``),
    ``leading-numeric`` keeps the leading dotted number (``550.127.05-0ubuntu1~24.04``
    -> ``550.127.05``)."""
    if not version or row.version_rule == "none":
        return None
    v = version
    if ecosystem in ("deb", "rpm", "apk") and row.version_rule in ("upstream", "leading-numeric"):
        v = _EPOCH.sub("", v)
        if "-" in v:
            v = _REVISION.sub("", v)
        v = _REPACK.sub("", v)
    if row.version_rule == "leading-numeric":
        m = _LEADING.match(v)
        v = m.group(1) if m else v
    if row.scheme == "semver" and "~" in v:
        v = v.replace("~", "-", 1)  # distro pre-release 1.17.8~rc.1 is semver 1.17.8-rc.1
    return v or None
