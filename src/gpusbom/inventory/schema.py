"""The inventory schema (SQLAlchemy Core). Migrations in ``migrations/versions`` create it;
a test checks that the migrated database and this metadata agree.

Content-addressed (migration 0004): a scan row is the subject, the time, the labels and
three references, each the sha256 of a canonical JSON:

- ``cset``: the component set (the scan's components, relationships, stacks, unknowns),
  whose rows are ``components``, ``products`` and ``devices`` (keyed by ``set_id``);
- ``fset``: the finding set, rows in ``findings`` with the per-set counts
  ``finding_counts`` and ``affected_advisories``; ``inventory rematch`` points a scan at
  the finding set of the current advisory database, the ingested one stays in the body;
- ``pset``: the probe set (outcomes, without the timings), rows in ``probes``.

Each set is stored once (``content_sets`` says it is), however many scans share it: a
daily scan that changed nothing adds one ``scans`` row and updates one ``latest`` row.
The scan's full JSON is split the same way: the envelope (target, tool, probes; under a
kilobyte compressed) is a row of ``envelopes`` by its hash, shared by the daily scans of a
host (the time, the one part that changes, is the scan row's ``stamp``), the component
and finding bodies are blobs in the blob store (``blobs.py``) under the set ids.

``scans`` keeps every scan; ``latest`` is a copy of the newest scan row of every
(kind, subject), so every latest-only question reads ``latest`` and the set rows and never
touches history. On PostgreSQL, ``scans`` is partitioned by month of scan time
(``month`` = yyyymm, declarative range partitioning): ``prune`` drops whole partitions.
``changes`` holds one counter, bumped by every write (ingest, prune, rematch, triage), the
key of the dashboard's caches; each ``latest`` row keeps the value of the write that set it
(``seq``), so a reader that holds the rows of one value reads only those changed since
(and all of them again after a rebuild, counted by the ``latest_rebuilt`` counter).
"""

from __future__ import annotations

from ..extras import require

require("inventory")  # one line naming the pip install, not an ImportError of SQLAlchemy

from sqlalchemy import (  # noqa: E402 - after the extra's check
    JSON,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)

metadata = MetaData()


def _scan_columns() -> list[Column[object]]:
    return [
        Column("id", String(64), nullable=False),  # sha256 of the canonical scan JSON
        Column("month", Integer, nullable=False),  # yyyymm of ts (the partition key)
        Column("kind", String(16), nullable=False),  # host | image | sbom
        Column("subject", String(512), nullable=False),  # hostname, image name:tag, SBOM
        Column("reference", Text, nullable=False),
        Column("name", String(512)),
        Column("digest", String(128)),  # manifest digest or image id
        Column("hostname", String(255)),
        Column("platform", String(64)),
        Column("labels", JSON, nullable=False),
        Column("ts", String(32), nullable=False),  # scan time, UTC ISO 8601 "...Z"
        Column("ingested_at", String(32), nullable=False),
        Column("tool_name", String(64)),
        Column("tool_version", String(64)),
        Column("advisory_db", String(255)),  # "source@built" the findings came from
        Column("components", Integer, nullable=False),
        Column("cset", String(64), nullable=False),  # component set id
        Column("fset", String(64), nullable=False),  # finding set id (current findings)
        Column("ifset", String(64)),  # after rematch: the finding set as ingested
        Column("pset", String(64), nullable=False),  # probe set id
        Column("env", String(64), nullable=False),  # its envelope (envelopes.id)
        Column("stamp", Text),  # the scan's "timestamp" as written (JSON), not in env
    ]


scans = Table(
    "scans",
    metadata,
    *_scan_columns(),
    PrimaryKeyConstraint("id", "month"),
    Index("ix_scans_subject_ts", "kind", "subject", "ts"),
    Index("ix_scans_ts", "ts"),
    Index("ix_scans_hostname", "hostname"),
    Index("ix_scans_reference", "reference"),
    postgresql_partition_by="RANGE (month)",
)

# the newest scan of every (kind, subject), by (ts, ingested_at, id), as a full copy of its
# row plus the number of scans kept of the subject: ingest keeps it with one upsert
latest = Table(
    "latest",
    metadata,
    *_scan_columns(),
    Column("n_scans", Integer, nullable=False),
    Column("stack_text", Text),  # of its component set (content_sets.stack_text)
    # the change counter's value of the write that last set the row (ingest, rematch,
    # rebuild; writer.bump): a reader reads the rows changed since a value
    Column("seq", Integer, nullable=False, server_default="0"),
    PrimaryKeyConstraint("kind", "subject"),
    Index("ix_latest_scan_id", "id", unique=True),
    Index("ix_latest_cset", "cset"),
    Index("ix_latest_fset", "fset"),
    Index("ix_latest_pset", "pset"),
    Index("ix_latest_hostname", "hostname"),
    Index("ix_latest_reference", "reference"),
    Index("ix_latest_seq", "seq"),
)

# which sets are stored (their rows complete: written in the transaction that adds this
# row); kind: components | findings | probes
content_sets = Table(
    "content_sets",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("n", Integer, nullable=False),  # rows in the set
    Column("created", String(32), nullable=False),
    Column("stack_text", Text),  # components: the stack summary (scans of the set share it)
)

components = Table(
    "components",
    metadata,
    Column("set_id", String(64), primary_key=True),
    Column("idx", Integer, primary_key=True),
    Column("ref", Text),
    Column("name", String(512), nullable=False),
    Column("name_key", String(512), nullable=False),  # lower case, _ and . as -
    Column("version", String(255)),
    Column("type", String(32), nullable=False),
    Column("ecosystem", String(32)),
    Column("purl", Text),
    Column("stack", String(64)),
    Column("product", String(128)),
    Column("product_version", String(255)),
    Column("release", String(64)),
    Column("location", Text),
    Column("gpu_targets", Text),  # cuda:sass / cuda:ptx / hip:targets, "; "-joined
    Column("evidence_methods", String(255)),  # comma-joined, for the advisory matcher
    Column("properties", JSON, nullable=False),
    Index("ix_components_name_key", "name_key", "set_id"),
    Index("ix_components_type", "type", "set_id"),
    Index("ix_components_product", "product", "set_id"),
    Index("ix_components_name", "name", "set_id"),
    Index("ix_components_eco_name", "ecosystem", "name"),
)

# every GPU product a component provides (fusion's Component.products, or its own
# stack/product properties): "where is cuDNN" finds the deb, the wheel and the bare library
products = Table(
    "products",
    metadata,
    Column("set_id", String(64), primary_key=True),
    Column("comp_idx", Integer, primary_key=True),
    Column("n", Integer, primary_key=True),
    Column("stack", String(64), nullable=False),
    Column("product", String(128), nullable=False),
    Column("version", String(255)),
    Index("ix_products_product", "product", "set_id", "comp_idx", "version"),
    Index("ix_products_stack", "stack", "product", "set_id"),
)

devices = Table(
    "devices",
    metadata,
    Column("set_id", String(64), primary_key=True),
    Column("idx", Integer, primary_key=True),
    Column("ref", Text),
    Column("model", String(255)),
    Column("vendor", String(64)),
    Column("pci_address", String(32)),
    Column("compute_capability", String(64)),  # CUDA sm, or the gfx / Intel arch
    Column("kernel_driver", String(64)),
    Column("driver_version", String(64)),
    Column("uuid", String(128)),
    Column("properties", JSON, nullable=False),
)

# the probe outcomes (the timings and errors measured are in the scan's envelope)
probes = Table(
    "probes",
    metadata,
    Column("set_id", String(64), primary_key=True),
    Column("idx", Integer, primary_key=True),
    Column("backend", String(32), nullable=False),
    Column("device_id", String(32)),
    Column("device", String(255)),
    Column("device_ref", Text),
    Column("pci_address", String(32)),
    Column("outcome", String(16), nullable=False),
    Column("reason", Text),
    Column("error_name", String(128)),
)

findings = Table(
    "findings",
    metadata,
    Column("set_id", String(64), primary_key=True),
    Column("idx", Integer, primary_key=True),
    Column("rule_id", String(128), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("severity", String(16), nullable=False),
    Column("title", Text, nullable=False),
    Column("status", String(16)),  # advisory findings: affected | review | not-affected
    Column("advisory", String(128)),
    Column("component_ref", Text),
    Column("installed_version", String(255)),
    Column("fixed_version", String(255)),
    Index("ix_findings_rule", "rule_id"),
    Index("ix_findings_advisory", "advisory", "status", "set_id"),
)

# findings per set and severity
finding_counts = Table(
    "finding_counts",
    metadata,
    Column("set_id", String(64), primary_key=True),
    Column("severity", String(16), primary_key=True),
    Column("n", Integer, nullable=False),
)

# the advisories a finding set marks affected (one row per set and advisory)
affected_advisories = Table(
    "affected_advisories",
    metadata,
    Column("set_id", String(64), primary_key=True),
    Column("advisory", String(128), primary_key=True),
    Index("ix_affected_advisories_advisory", "advisory", "set_id"),
)

# the rest of a scan's JSON (target, tool, probes, advisory database: all but the bodies
# and the time), zlib-compressed, by the sha256 of its canonical JSON: the same for every
# daily scan of a host that changed nothing
envelopes = Table(
    "envelopes",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("data", LargeBinary, nullable=False),
)

# blobs kept in the database itself (blob store "db": the default on PostgreSQL, where a
# directory on each pushing host would not be one store)
blobs = Table(
    "blobs",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("data", LargeBinary, nullable=False),  # zlib
)

# one row per counter; "changes" is bumped by every write
changes = Table(
    "changes",
    metadata,
    Column("name", String(32), primary_key=True),
    Column("value", Integer, nullable=False),
)

#: set tables by the scan column that references them
SET_TABLES = {"cset": (components, products, devices),
              "fset": (findings, finding_counts, affected_advisories),
              "pset": (probes,)}

# ------------------------------------------------------------------ triage (written by people)
# One analysis per (component, vulnerability), applied to every stored host and image with
# that component: ``component`` is the purl without qualifiers or subpath
# (``pkg:pypi/nvidia-cuda-runtime-cu12@12.4.127``), else ``name@version``. Migration 0003.
analyses = Table(
    "analyses",
    metadata,
    Column("component", String(1024), primary_key=True),
    Column("vulnerability", String(128), primary_key=True),  # upper case (CVE-..., GHSA-...)
    Column("state", String(32), nullable=False),  # triage.STATES
    Column("justification", String(64)),  # OpenVEX justification (not_affected)
    Column("comment", Text, nullable=False),
    Column("author", String(255), nullable=False),
    Column("expires", String(32)),  # UTC ISO 8601 "...Z"; none: until changed
    Column("created", String(32), nullable=False),
    Column("updated", String(32), nullable=False),
)
