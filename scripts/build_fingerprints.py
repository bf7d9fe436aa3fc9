#!/usr/bin/env python3
"""Build gpusbom's fingerprint database (``src/gpusbom/data/fingerprints.json``) and its
coverage report (``fingerprints-coverage.txt`` beside it) from NVIDIA's wheels on PyPI.

For each distribution asked for (``--dist``, default :data:`SMALL` then :data:`LARGE`), the
index's JSON simple API (PEP 691; the index pip uses: ``--index-url``, default
``https://pypi.org/simple``) lists its files; one manylinux x86-64 wheel per version uploaded
on or after ``--since`` is downloaded (checked against the index's sha256) into a cache
directory outside the repository, read once, and deleted. Every ELF shared library inside is
streamed to a scratch file once (its SHA-256 and size computed as it is written), its GNU
build-id read from its first bytes (``gpusbom.binary.buildid``) and its ``DT_SONAME`` with
pyelftools; the scratch file is deleted.

The version of every record is the wheel's own: its file name's version, checked against the
``Version`` of its ``.dist-info/METADATA`` (a wheel where they differ is skipped and
reported). The product is the ``cuda`` collector's: the library stem's
(``gpusbom.catalog.names``; ``libcublasLt`` -> ``cublaslt``) or else the wheel's
(``nvidia-cuda-cupti-cu12`` -> ``cupti`` for ``libnvperf_host.so``).

The vendor release lists (``releases`` and ``complete_from``, see
``gpusbom.fingerprints.releases``) come from PyPI's index listings and NVIDIA's
``cuda-toolkit`` metapackage (``gpusbom.fingerprints.pypi``, shared with ``gpusbom
fingerprints update``), the Debian/Ubuntu ``nvidia-cuda-toolkit`` packages (their versions;
Ubuntu 18.04/20.04's Contents indexes) and the curated rows of
``scripts/fingerprint_vendor_releases.yaml`` (NVIDIA's CUDA Dockerfiles); cached in
``<cache>/releases.json``.

Wheels larger than ``--max-wheel-mb`` are not downloaded: the coverage report lists every
version seen with what was done with it (``ok``, ``skipped: ...``). Results per wheel are kept
in ``<cache>/done.jsonl``, so an interrupted build resumes where it stopped and a later run
with a larger ``--max-wheel-mb`` adds to it.

NVIDIA's redistributable manifests (``--redistrib URL``, repeatable; a local file or a
directory of ``redistrib_*.json`` too) are a second source, on a machine that reaches
``developer.download.nvidia.com``: every linux-x86_64 archive of every component the
catalog maps to a product is downloaded relative to the manifest (bounded, checked against
the manifest's sha256 before it is read), its regular ``lib*.so*`` members fingerprinted by
the same code as a wheel's, with the manifest's component version and the manifest's URL as
the source (``gpusbom.fingerprints.redistrib``); the components' versions join the release
lists. ``--no-pypi`` builds from the manifests alone (no PyPI listing, no release lists but
the curated file's, or the cached ``releases.json``); ``--out DIR`` writes the database and
the report elsewhere than ``src/gpusbom/data``.

Usage::

    scripts/build_fingerprints.py [--since 2023-12-07] [--max-wheel-mb 150]
        [--dist nvidia-cuda-runtime-cu12 ...] [--cache ~/.cache/gpusbom-fingerprints]
        [--redistrib https://developer.download.nvidia.com/compute/cuda/redist/redistrib_12.4.1.json ...]
        [--no-pypi] [--out DIR] [--report-only]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from gpusbom.catalog import names  # noqa: E402
from gpusbom.fingerprints import redistrib  # noqa: E402
from gpusbom.fingerprints.database import (  # noqa: E402
    FingerprintDB,
    Record,
    Release,
    dumps,
    load_bytes,
)
from gpusbom.fingerprints.pypi import (  # noqa: E402
    LARGE,
    RELEASE_VERSION_RX,
    SMALL,
    UpdateError,
    download,
    fingerprint_wheel,
    list_wheels,
    release_rows,
    session,
    with_cublaslt,
)

DATA = ROOT / "src" / "gpusbom" / "data"
def _load_done(done: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    if done.exists():
        for ln in done.read_text().splitlines():
            if ln.strip():
                d = json.loads(ln)
                out[d["filename"]] = d
    return out


def _status(w: dict[str, Any], d: dict[str, Any] | None, max_mb: float) -> str:
    if w.get("skip"):
        return "skipped: " + str(w["skip"])
    if d is not None:
        return str(d["status"])
    if (w.get("size") or 0) > max_mb * 1e6:
        return (f"not built: a {w['size'] / 1e6:.0f} MB wheel; large products were built for "
                "their latest few versions only (disk/bandwidth)")
    return "not built: not reached in this build"


# -- vendor release lists ---------------------------------------------------------------------

VENDOR_FILE = Path(__file__).resolve().parent / "fingerprint_vendor_releases.yaml"
#: Debian and Ubuntu suites whose ``nvidia-cuda-toolkit`` binary packages are read
DISTROS = (
    ("debian", "https://deb.debian.org/debian", ("bullseye", "bookworm", "trixie"),
     "non-free", "Packages.xz"),
    ("ubuntu", "https://archive.ubuntu.com/ubuntu", ("bionic", "focal", "jammy", "noble"),
     "multiverse", "Packages.gz"),
)
#: binary package name -> product (packages built from ``nvidia-cuda-toolkit``)
_DEB_PRODUCTS = (
    (re.compile(r"libcublaslt\d+"), "cublaslt"), (re.compile(r"libcublas\d+(?:\.\d+)?"), "cublas"),
    (re.compile(r"libcudart\d+(?:\.\d+)?"), "cudart"), (re.compile(r"libcufft\d+"), "cufft"),
    (re.compile(r"libcurand\d+"), "curand"), (re.compile(r"libcusparse\d+"), "cusparse"),
    (re.compile(r"libcusolver\d+"), "cusolver"), (re.compile(r"libnvrtc\d+(?:\.\d+)?"), "nvrtc"),
    (re.compile(r"libnvjpeg\d+"), "nvjpeg"), (re.compile(r"libcupti\d+(?:\.\d+)?"), "cupti"),
    (re.compile(r"libnppc\d+"), "npp"), (re.compile(r"libnvjitlink\d+"), "nvjitlink"),
    (re.compile(r"nvidia-cuda-toolkit"), "cuda-toolkit"),
)
def distro_releases(sess: Any) -> list[Release]:
    """Component versions of the Debian/Ubuntu ``nvidia-cuda-toolkit`` binary packages: from
    11.x on their versions read ``<component>~<toolkit>-<revision>`` (``libcublas12
    12.4.5.8~12.4.1-2``; cuRAND/cuFFT ``11.1.1+~10.3.5.147~12.4.1``); older ones carry the
    toolkit's version only (``10.1.243-3``): a ``cuda-toolkit`` release."""
    import gzip
    import lzma

    out: list[Release] = []
    for distro, base, suites, comp, fname in DISTROS:
        for suite in suites:
            url = f"{base}/dists/{suite}/{comp}/binary-amd64/{fname}"
            r = sess.get(url, timeout=120)
            if r.status_code != 200:
                print(f"  {url}: HTTP {r.status_code}", file=sys.stderr)
                continue
            raw = lzma.decompress(r.content) if fname.endswith(".xz") else gzip.decompress(r.content)
            for stanza in raw.decode("utf-8", "replace").split("\n\n"):
                fields = dict(re.findall(r"^([A-Za-z-]+): ?(.*)$", stanza, re.M))
                if fields.get("Source", "").split(" ")[0] != "nvidia-cuda-toolkit" and \
                        fields.get("Package") != "nvidia-cuda-toolkit":
                    continue
                pkg, version = fields.get("Package", ""), fields.get("Version", "")
                product = next((p for rx, p in _DEB_PRODUCTS if rx.fullmatch(pkg)), None)
                if product is None or not version:
                    continue
                upstream = version.split(":")[-1].rsplit("-", 1)[0]
                comp_v, sep, toolkit = upstream.rpartition("~")
                if not sep:  # toolkit-versioned packages (CUDA <= 10.1 in Debian/Ubuntu)
                    comp_v, toolkit = "", upstream
                comp_v = comp_v.split("+~")[-1]
                src = f"{distro}:{suite}/{pkg}"
                if product == "cuda-toolkit":
                    if RELEASE_VERSION_RX.fullmatch(toolkit):
                        out.append(Release("cuda-toolkit", toolkit, src))
                elif comp_v and RELEASE_VERSION_RX.fullmatch(comp_v):
                    out.append(Release(product, comp_v, src))
    return out


#: Ubuntu suites whose toolkit packages carry the toolkit's version only (CUDA 9.1, 10.1):
#: the component versions are their library file names, read from the suite's Contents index
CONTENTS = ("https://archive.ubuntu.com/ubuntu", ("bionic", "focal"))
_CONTENTS_RX = re.compile(
    r"^usr/lib/x86_64-linux-gnu/(?P<stem>lib[A-Za-z]+)\.so\.(?P<v>\d+\.\d+\.\d+(?:\.\d+)?)"
    r"\s+\S*/(?P<pkg>[a-z0-9.+-]+)$")


def contents_releases(sess: Any, cache: Path) -> list[Release]:
    """Component versions of the Ubuntu toolkit packages that carry only the toolkit's
    version (``libcublas10 10.1.243-3`` holds ``libcublas.so.10.2.1.243``): the versioned
    library file names their suite's ``Contents-amd64.gz`` lists for them."""
    import gzip

    stems = names.libraries("cuda")
    out: list[Release] = []
    base, suites = CONTENTS
    for suite in suites:
        path = cache / f"ubuntu-{suite}-Contents-amd64.gz"
        if not path.exists():
            r = sess.get(f"{base}/dists/{suite}/Contents-amd64.gz", timeout=600)
            r.raise_for_status()
            path.write_bytes(r.content)
        for line in gzip.decompress(path.read_bytes()).decode("utf-8", "replace").splitlines():
            m = _CONTENTS_RX.match(line)
            if m is None or not any(rx.fullmatch(m.group("pkg")) for rx, _ in _DEB_PRODUCTS):
                continue
            product = stems.get(m.group("stem"))
            if product is not None:
                out.append(Release(product, m.group("v"), f"ubuntu:{suite}/{m.group('pkg')}"))
    return out


def vendor_file_releases() -> list[Release]:
    """The curated rows of :data:`VENDOR_FILE` (NVIDIA's CUDA Dockerfiles), with the release
    lines of the toolkit-numbered components."""
    import yaml

    doc = yaml.safe_load(VENDOR_FILE.read_text())
    out = [Release(p, str(v), s) for p, v, s in doc["releases"]]
    tl = doc["toolkit_lines"]
    for line in tl["lines"]:
        src = f"{tl['source']}/{line}"
        out.append(Release("cuda-toolkit", line, src))
        out += [Release(c, line, src) for c in tl["components"]]
    return out


def gather_releases(sess: Any, args: Any) -> dict[str, Any]:
    """The vendor release lists (cached in ``<cache>/releases.json``): PyPI's (index listings
    and cuda-toolkit pins, ``gpusbom.fingerprints.pypi``), the distro packages and the curated
    Dockerfile rows, with ``complete_from`` (each product's pin in cuda-toolkit 12.0.0)."""
    cached = args.cache / "releases.json"
    if args.report_only and cached.exists():
        return dict(json.loads(cached.read_text()))
    rows, complete = release_rows(sess, args.index, args.cache)
    rows += distro_releases(sess)
    rows += contents_releases(sess, args.cache)
    rows += vendor_file_releases()
    rows = with_cublaslt(rows, complete)
    doc = {"releases": sorted({(r.product, r.version, r.source) for r in rows}),
           "complete_from": dict(sorted(complete.items()))}
    cached.write_text(json.dumps(doc))
    return doc


def build_redistrib(sess: Any, args: Any, done: dict[str, dict[str, Any]], done_path: Path
                    ) -> tuple[list[dict[str, Any]], list[Release]]:
    """Fingerprint the archives of every ``--redistrib`` manifest (see the module docstring);
    (one coverage row per archive or note, the manifests' release rows). Results are kept in
    ``done`` (keyed by the source and the archive's sha256) like a wheel's."""
    rows: list[dict[str, Any]] = []
    releases: list[Release] = []
    for ref in args.redistrib or []:
        for one in redistrib.manifest_refs(ref):
            kept = args.cache / "manifests" / (hashlib.sha256(one.encode()).hexdigest() + ".json")
            try:
                if args.report_only and kept.exists():  # downloading nothing: the copy kept
                    saved = json.loads(kept.read_text())
                    url, data = saved["url"], saved["manifest"].encode()
                else:
                    url, data = redistrib.read_manifest(sess, one)
                    kept.parent.mkdir(exist_ok=True)
                    kept.write_text(json.dumps({"url": url,
                                                "manifest": data.decode("utf-8", "replace")}))
                man = redistrib.parse_manifest(data, url)
            except UpdateError as e:
                print(f"  {e}", file=sys.stderr, flush=True)
                rows.append({"manifest": one, "archive": "-", "version": "-",
                             "status": f"refused: {e}"[:300]})
                continue
            print(f"{url}: {man.release_product} {man.release_label}, "
                  f"{len(man.archives)} archive(s)", flush=True)
            rows += [{"manifest": url, "archive": "-", "version": "-", "status": f"note: {n}"}
                     for n in man.notes]
            releases += redistrib.release_rows(man)
            for a in man.archives:
                key = f"redistrib:{man.source(a)}@{a.sha256}"
                row = {"manifest": url, "archive": a.label, "version": a.version, "key": key}
                rows.append(row)
                if key in done or args.report_only:
                    continue
                print(f"  {a.label} {a.version} ({(a.size or 0) / 1e6:.0f} MB)", flush=True)
                with tempfile.TemporaryDirectory(dir=args.cache) as tmp:
                    try:
                        path = redistrib.fetch_archive(sess, man, a, Path(tmp))
                        recs, notes = redistrib.fingerprint_archive(path, man, a, Path(tmp))
                        entry = {"filename": key, "status": "ok",
                                 "records": [r.__dict__ for r in recs], "notes": notes}
                    except Exception as e:  # noqa: BLE001 - reported, the build goes on
                        entry = {"filename": key, "status": f"failed: {e}"[:300],
                                 "records": []}
                        print(f"    {entry['status']}", file=sys.stderr, flush=True)
                done[key] = entry
                with open(done_path, "a") as f:
                    f.write(json.dumps(entry) + "\n")
    return rows, releases


def write_outputs(done: dict[str, dict[str, Any]], seen: list[dict[str, Any]], args: Any,
                  built: str, releases: dict[str, Any] | None = None,
                  redist_rows: list[dict[str, Any]] | None = None) -> FingerprintDB:
    redist_keys = {r["key"] for r in redist_rows or [] if "key" in r}
    records = [Record(**r) for k, d in done.items() if d.get("status") == "ok"
               and (not k.startswith("redistrib:") or k in redist_keys) for r in d["records"]]
    rel = releases or {"releases": [], "complete_from": {}}
    db = FingerprintDB(records, built=built, releases=[Release(*r) for r in rel["releases"]],
                       complete_from=rel["complete_from"])
    text = dumps(db.to_document())
    load_bytes(text.encode(), name="new database")  # the result must load (validation)
    out_dir = Path(getattr(args, "out", None) or DATA)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "fingerprints.json").write_text(text)
    lines = [
        "Fingerprint database coverage (scripts/build_fingerprints.py)",
        f"built {built}; source: "
        + ("" if args.no_pypi else
           f"NVIDIA wheels on PyPI ({args.index}), manylinux x86-64, one wheel per version "
           f"uploaded on or after {args.since}")
        + ("; " if not args.no_pypi and args.redistrib else "")
        + (f"NVIDIA redistrib manifests ({len(args.redistrib)} given), linux-x86_64 archives"
           if args.redistrib else "")
        + "; the status columns below say which were built and why the others were not",
        f"records: {len(db)}; products: {len(db.counts())}",
        "",
        "product      files  versions  range",
    ]
    from packaging.version import Version

    three_years = f"{int(built[:4]) - 3}{built[4:10]}"
    uploaded = {(w["dist"], w["version"]): w["uploaded"] for w in seen}
    for product, per in db.counts().items():
        vs = list(per)
        vs.sort(key=Version)
        lines.append(f"{product:12} {sum(per.values()):5}  {len(vs):8}  {vs[0]} .. {vs[-1]}")
    lines += ["", f"versions fingerprinted per product, of the versions on PyPI uploaded since "
                  f"{three_years} (three years before the build; a version is counted once "
                  "whatever its wheel family)",
              "product      fingerprinted  on PyPI  missing"]
    on_pypi: dict[str, set[str]] = {}
    for (dist, ver), up in uploaded.items():
        product = names.cuda_wheel(dist)
        if product and up and up >= three_years and RELEASE_VERSION_RX.fullmatch(ver):
            on_pypi.setdefault(product, set()).add(str(Version(ver)))
            if product == "cublas":
                on_pypi.setdefault("cublaslt", set()).add(str(Version(ver)))
    counts = db.counts()
    for product in sorted(on_pypi):
        have = {str(Version(v)) for v in counts.get(product, {})}
        missing = sorted(on_pypi[product] - have, key=Version)
        lines.append(f"{product:12} {len(on_pypi[product] & have):13}  {len(on_pypi[product]):7}"
                     f"  {', '.join(missing) if missing else '-'}")
    lines += ["", "vendor release lists (releases: versions a list names; complete from: the "
                  "release from which the lists name every release)",
              "product      releases  complete from  sources"]
    per_src: dict[str, set[str]] = {}
    for r in db.releases:
        per_src.setdefault(r.product, set()).add(r.source.split(":", 1)[0])
    for product, n in db.release_counts().items():
        lines.append(f"{product:12} {n:8}  {db.complete_from.get(product, '-'):13}  "
                     f"{', '.join(sorted(per_src[product]))}")
    no_bid = sorted({f"{r.product} {r.file}" for r in db.records if not r.build_id})
    lines += ["", f"files without a GNU build-id (identified by SHA-256 only): {len(no_bid)} "
              "names", *(f"  {n}" for n in no_bid)]
    for key in ("sha256", "build_id"):
        rel: dict[str, set[tuple[str, str]]] = {}
        for r in db.records:
            k = getattr(r, key)
            if k:
                rel.setdefault(k, set()).add((r.product, r.version))
        shared = sorted(sorted(v) for v in rel.values() if len(v) > 1)
        lines += ["", f"{key} values shared by several releases (not identified by that key: "
                      f"never a guess): {len(shared)}",
                  *("  " + ", ".join(f"{p} {v}" for p, v in s) for s in shared)]
    lines += ["", "distribution / version / uploaded / status (files fingerprinted)"]
    for w in seen:
        d = done.get(w["filename"])
        status = _status(w, d, args.max_wheel_mb)
        n = len((d or {}).get("records", []))
        lines.append(f"{w['dist']:26} {w['version']:14} {w['uploaded']:10} {status}"
                     + (f" ({n})" if d and d.get("status") == "ok" else "")
                     + (" [yanked]" if w.get("yanked") else ""))
    if redist_rows:
        lines += ["", "NVIDIA redistrib manifest / component[.variant] / version / status "
                      "(files fingerprinted)"]
        for row in redist_rows:
            d = done.get(row.get("key", ""))
            status = str(row.get("status") or (d["status"] if d else "not built: report only"))
            n = len((d or {}).get("records", []))
            lines.append(f"{row['manifest']} {row['archive']:24} {row['version']:14} {status}"
                         + (f" ({n})" if d and d.get("status") == "ok" else ""))
            lines += [f"    {note}" for note in (d or {}).get("notes", [])]
    (out_dir / "fingerprints-coverage.txt").write_text("\n".join(lines) + "\n")
    return db


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", default="https://pypi.org/simple")
    ap.add_argument("--since", default="2023-12-07", help="upload date of the oldest wheel")
    ap.add_argument("--max-wheel-mb", type=float, default=150.0)
    ap.add_argument("--dist", action="append", help="distribution (repeat); default: all")
    ap.add_argument("--cache", type=Path,
                    default=Path.home() / ".cache" / "gpusbom-fingerprints")
    ap.add_argument("--latest", type=int, default=0,
                    help="only the N most recently uploaded versions of each --dist "
                         "(the others are reported as not built)")
    ap.add_argument("--redo-without-build-id", action="store_true",
                    help="fingerprint again the wheels with a file recorded without build-id")
    ap.add_argument("--report-only", action="store_true",
                    help="write the outputs from what was built, downloading nothing")
    ap.add_argument("--redistrib", action="append", metavar="URL",
                    help="an NVIDIA redistrib_*.json manifest (URL, file or directory; "
                         "repeat)")
    ap.add_argument("--no-pypi", action="store_true",
                    help="no PyPI wheels nor PyPI/distro release lists (with --redistrib)")
    ap.add_argument("--out", type=Path, default=DATA,
                    help="where fingerprints.json and the coverage report are written")
    args = ap.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    done_path = args.cache / "done.jsonl"
    done = _load_done(done_path)
    sess = session("gpusbom-build-fingerprints/1")
    dists = [] if args.no_pypi else (args.dist or [*SMALL, *LARGE])
    seen: list[dict[str, Any]] = []
    listing_cache = args.cache / "listing.json"
    listing: dict[str, list[dict[str, Any]]] = (
        json.loads(listing_cache.read_text()) if listing_cache.exists() else {})
    for dist in dists:
        if dist not in listing or not args.report_only:
            listing[dist] = list_wheels(sess, args.index, dist, args.since)
            listing_cache.write_text(json.dumps(listing))
        seen.extend(listing[dist])
    if args.redo_without_build_id:  # only this run's wheels: the others keep their records
        names = {w["filename"] for w in seen}
        done = {k: d for k, d in done.items() if k not in names
                or not any(r.get("build_id") is None for r in d.get("records", []))}
    if args.latest and not args.report_only:
        for dist in dists:
            eligible = [w for w in listing[dist] if not w.get("skip")]
            for w in eligible[: max(0, len(eligible) - args.latest)]:
                w["not_now"] = True  # in the listing order: by upload date
    built = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if not args.report_only:
        for w in seen:
            if w.get("skip") or w.get("not_now") or w["filename"] in done:
                continue
            if (w.get("size") or 0) > args.max_wheel_mb * 1e6:
                continue
            print(f"{w['dist']} {w['version']} ({(w.get('size') or 0) / 1e6:.0f} MB)",
                  flush=True)
            with tempfile.TemporaryDirectory(dir=args.cache) as tmp:
                try:
                    path = download(sess, w, Path(tmp))
                    recs = fingerprint_wheel(path, w, Path(tmp))
                    entry = {"filename": w["filename"], "status": "ok",
                             "records": [r.__dict__ for r in recs]}
                except Exception as e:  # noqa: BLE001 - reported in the coverage, build goes on
                    entry = {"filename": w["filename"], "status": f"failed: {e}"[:300],
                             "records": []}
                    print(f"  {entry['status']}", file=sys.stderr, flush=True)
            done[w["filename"]] = entry
            with open(done_path, "a") as f:
                f.write(json.dumps(entry) + "\n")
    redist_rows, redist_releases = build_redistrib(sess, args, done, done_path)
    if args.no_pypi:
        cached = args.cache / "releases.json"
        releases = (dict(json.loads(cached.read_text())) if cached.exists() else
                    {"releases": sorted({(r.product, r.version, r.source)
                                         for r in vendor_file_releases()}),
                     "complete_from": {}})
    else:
        releases = gather_releases(sess, args)
    releases = {"releases": sorted({*map(tuple, releases["releases"]),
                                    *((r.product, r.version, r.source)
                                      for r in redist_releases)}),
                "complete_from": releases["complete_from"]}
    db = write_outputs(done, seen, args, built, releases, redist_rows)
    print(f"{len(db)} records written to {args.out / 'fingerprints.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
