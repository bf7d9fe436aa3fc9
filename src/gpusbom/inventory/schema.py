"""The inventory schema (SQLAlchemy Core). Migrations in ``migrations/versions`` create it;
a test checks that the migrated database and this metadata agree.

One row in ``scans`` per distinct scan (``id`` = sha256 of the scan's canonical JSON, so
the same scan ingested twice, even concurrently, is stored once: the primary key is the
unique constraint). The rest hangs off ``scan_id`` with the item's position in the scan
(``idx``), so one insert per table and no generated keys are needed.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Column,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()

scans = Table(
    "scans",
    metadata,
    Column("id", String(64), primary_key=True),  # sha256 of the canonical scan JSON
    Column("kind", String(16), nullable=False),  # host | image | sbom
    Column("subject", String(512), nullable=False),  # hostname, image name:tag, SBOM name
    Column("reference", Text, nullable=False),
    Column("name", String(512)),
    Column("digest", String(128)),  # manifest digest or image id
    Column("hostname", String(255)),
    Column("platform", String(64)),
    Column("labels", JSON, nullable=False),
    Column("ts", String(32), nullable=False),  # scan time, UTC, ISO 8601 "...Z" (sortable)
    Column("ingested_at", String(32), nullable=False),
    Column("tool_name", String(64)),
    Column("tool_version", String(64)),
    Column("advisory_db", String(255)),  # "source@built" of the DB the findings came from
    Column("components", Integer, nullable=False),
    Column("stack_text", Text),
    Index("ix_scans_subject_ts", "kind", "subject", "ts"),
    Index("ix_scans_ts", "ts"),
)

scan_documents = Table(
    "scan_documents",
    metadata,
    Column("scan_id", String(64), primary_key=True),
    Column("encoding", String(16), nullable=False),  # "json+zlib"
    Column("data", LargeBinary, nullable=False),
    ForeignKeyConstraint(["scan_id"], ["scans.id"], ondelete="CASCADE"),
)

components = Table(
    "components",
    metadata,
    Column("scan_id", String(64), primary_key=True),
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
    ForeignKeyConstraint(["scan_id"], ["scans.id"], ondelete="CASCADE"),
    Index("ix_components_name_key", "name_key", "scan_id"),
)

# every GPU product a component provides (fusion's Component.products, or its own
# stack/product properties): "where is cuDNN" finds the deb, the wheel and the bare library
products = Table(
    "products",
    metadata,
    Column("scan_id", String(64), primary_key=True),
    Column("comp_idx", Integer, primary_key=True),
    Column("n", Integer, primary_key=True),
    Column("stack", String(64), nullable=False),
    Column("product", String(128), nullable=False),
    Column("version", String(255)),
    ForeignKeyConstraint(["scan_id", "comp_idx"], ["components.scan_id", "components.idx"],
                         ondelete="CASCADE"),
    Index("ix_products_product", "product", "scan_id", "comp_idx", "version"),
    Index("ix_products_stack", "stack", "scan_id"),
)

devices = Table(
    "devices",
    metadata,
    Column("scan_id", String(64), primary_key=True),
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
    ForeignKeyConstraint(["scan_id"], ["scans.id"], ondelete="CASCADE"),
)

probes = Table(
    "probes",
    metadata,
    Column("scan_id", String(64), primary_key=True),
    Column("idx", Integer, primary_key=True),
    Column("backend", String(32), nullable=False),
    Column("device_id", String(32)),
    Column("device", String(255)),
    Column("device_ref", Text),
    Column("pci_address", String(32)),
    Column("outcome", String(16), nullable=False),
    Column("reason", Text),
    Column("error_name", String(128)),
    Column("max_abs_error", Float),
    Column("seconds", Float),
    ForeignKeyConstraint(["scan_id"], ["scans.id"], ondelete="CASCADE"),
)

findings = Table(
    "findings",
    metadata,
    Column("scan_id", String(64), primary_key=True),
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
    ForeignKeyConstraint(["scan_id"], ["scans.id"], ondelete="CASCADE"),
    Index("ix_findings_rule", "rule_id"),
    Index("ix_findings_advisory", "advisory", "status"),
)

# ------------------------------------------------------------------ derived, for reading fast
# A stored scan never changes (its id is its hash), so what the dashboard and the metrics
# count per scan is counted once, at ingest, instead of over ~100 finding rows per scan on
# every page view. Migration 0002 fills these for databases written before them.

# the latest scan of every (kind, subject), by (ts, ingested_at, id): what "latest" means
# everywhere. Ingest keeps it with one conditional upsert (ON CONFLICT DO UPDATE ... WHERE
# newer), which PostgreSQL and SQLite both run atomically, so concurrent writers of the same
# subject leave the newest scan. No ON DELETE: whatever removes a scan must fix this first.
latest = Table(
    "latest",
    metadata,
    Column("kind", String(16), primary_key=True),
    Column("subject", String(512), primary_key=True),
    Column("scan_id", String(64), nullable=False),
    Column("ts", String(32), nullable=False),
    Column("ingested_at", String(32), nullable=False),
    ForeignKeyConstraint(["scan_id"], ["scans.id"]),
    Index("ix_latest_scan_id", "scan_id", unique=True),
)

# findings per scan and severity
finding_counts = Table(
    "finding_counts",
    metadata,
    Column("scan_id", String(64), primary_key=True),
    Column("severity", String(16), primary_key=True),
    Column("n", Integer, nullable=False),
    ForeignKeyConstraint(["scan_id"], ["scans.id"], ondelete="CASCADE"),
)

# the advisories a scan's findings mark affected (one row per scan and advisory)
affected_advisories = Table(
    "affected_advisories",
    metadata,
    Column("scan_id", String(64), primary_key=True),
    Column("advisory", String(128), primary_key=True),
    ForeignKeyConstraint(["scan_id"], ["scans.id"], ondelete="CASCADE"),
    Index("ix_affected_advisories_advisory", "advisory", "scan_id"),
)
