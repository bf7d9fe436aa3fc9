"""content-addressed scans: component, finding and probe sets stored once; bodies in the
blob store; ``latest`` a full copy of each subject's newest scan; ``scans`` partitioned by
month on PostgreSQL; indexes for every filter; the change counter

Every scan stored at 0003 is kept: its canonical JSON (``scan_documents``) is split into the
envelope (a row of ``envelopes``, the time in the scan row) and its component and finding bodies (blobs under
their sha256, written to the blob store the database is opened with), and its rows are
written again through ``normalize.rows`` (as ``ingest`` writes them today) with the scan's
own ``ingested_at`` and ``advisory_db``. The parts are checked to join back to the exact
bytes stored (the scan id); a scan that would not makes the migration fail, in its one
transaction, and the database stays at 0003. The old tables are dropped last.

The tables are defined here as they were at this revision (not imported from schema.py).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-07
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy import (
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

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

md = MetaData()

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
    md,
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
    md,
    *_scan_columns(),
    Column("n_scans", Integer, nullable=False),
    Column("stack_text", Text),  # of its component set (content_sets.stack_text)
    PrimaryKeyConstraint("kind", "subject"),
    Index("ix_latest_scan_id", "id", unique=True),
    Index("ix_latest_cset", "cset"),
    Index("ix_latest_fset", "fset"),
    Index("ix_latest_pset", "pset"),
    Index("ix_latest_hostname", "hostname"),
    Index("ix_latest_reference", "reference"),
)

# which sets are stored (their rows complete: written in the transaction that adds this
# row); kind: components | findings | probes
content_sets = Table(
    "content_sets",
    md,
    Column("id", String(64), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("n", Integer, nullable=False),  # rows in the set
    Column("created", String(32), nullable=False),
    Column("stack_text", Text),  # components: the stack summary (scans of the set share it)
)

components = Table(
    "components",
    md,
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
    md,
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
    md,
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
    md,
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
    md,
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
    md,
    Column("set_id", String(64), primary_key=True),
    Column("severity", String(16), primary_key=True),
    Column("n", Integer, nullable=False),
)

# the advisories a finding set marks affected (one row per set and advisory)
affected_advisories = Table(
    "affected_advisories",
    md,
    Column("set_id", String(64), primary_key=True),
    Column("advisory", String(128), primary_key=True),
    Index("ix_affected_advisories_advisory", "advisory", "set_id"),
)

# the rest of a scan's JSON (target, tool, probes, advisory database: all but the bodies
# and the time), zlib-compressed, by the sha256 of its canonical JSON: the same for every
# daily scan of a host that changed nothing
envelopes = Table(
    "envelopes",
    md,
    Column("id", String(64), primary_key=True),
    Column("data", LargeBinary, nullable=False),
)

# blobs kept in the database itself (blob store "db": the default on PostgreSQL, where a
# directory on each pushing host would not be one store)
blobs = Table(
    "blobs",
    md,
    Column("key", String(64), primary_key=True),
    Column("data", LargeBinary, nullable=False),  # zlib
)

# one row per counter; "changes" is bumped by every write
changes = Table(
    "changes",
    md,
    Column("name", String(32), primary_key=True),
    Column("value", Integer, nullable=False),
)


_OLD = ("affected_advisories", "finding_counts", "latest", "findings", "probes", "devices",
        "products", "components")


def _put_blob(conn: Any, blobs: Any, key: str, data: bytes) -> None:
    import zlib

    from gpusbom.inventory.blobs import DbStore

    if blobs is None or isinstance(blobs, DbStore):
        # the blobs table, through the migration's own connection (and transaction)
        conn.execute(sa.text("INSERT INTO blobs (key, data) VALUES (:k, :d) "
                             "ON CONFLICT DO NOTHING"), {"k": key, "d": zlib.compress(data, 6)})
    else:
        blobs.put(key, data)


def upgrade() -> None:
    from gpusbom.inventory import normalize, writer
    from gpusbom.model import ScanResult

    conn = op.get_bind()
    dialect = conn.dialect.name
    blobs = context.config.attributes.get("blobs")
    # the old derived and per-scan tables go (rebuilt from the documents); scans and
    # scan_documents are renamed and read below, their indexes dropped first (index names
    # are per schema)
    for name in _OLD:
        op.drop_table(name)
    op.drop_index("ix_scans_subject_ts", table_name="scans")
    op.drop_index("ix_scans_ts", table_name="scans")
    op.rename_table("scan_documents", "old_scan_documents")
    op.rename_table("scans", "old_scans")
    if dialect == "postgresql":  # the primary key's index keeps its name through a rename
        op.execute("ALTER TABLE old_scans RENAME CONSTRAINT scans_pkey TO old_scans_pkey")
    md.create_all(conn)
    months = sorted({normalize.month_of(ts) for (ts,) in conn.execute(
        sa.text("SELECT ts FROM old_scans"))})
    if dialect == "postgresql":
        for m in months:
            writer.ensure_partition(conn, m)
    ids = [r[0] for r in conn.execute(sa.text(
        "SELECT id FROM old_scans ORDER BY ts, ingested_at, id"))]
    for i in range(0, len(ids), 200):
        chunk = ids[i:i + 200]
        got = conn.execute(sa.text(
            "SELECT s.id, s.ingested_at, s.advisory_db, d.data FROM old_scans s "
            "JOIN old_scan_documents d ON d.scan_id = s.id WHERE s.id IN :ids")
            .bindparams(sa.bindparam("ids", expanding=True)), {"ids": chunk}).all()
        for sid, ingested_at, advisory_db, data in got:
            raw = normalize.decompress(bytes(data))
            doc = json.loads(raw)
            parts = normalize.Split(doc)
            if normalize.join(parts.envelope, parts.component_body,
                              parts.finding_body, parts.stamp) != raw:
                raise RuntimeError(f"migration 0004: scan {sid} does not split and join "
                                   "back to its stored bytes")
            _put_blob(conn, blobs, parts.cset, parts.component_body)
            _put_blob(conn, blobs, parts.fset, parts.finding_body)
            result = ScanResult.from_dict(doc)
            rows = normalize.rows(result, sid, advisory_db=advisory_db,
                                  ingested_at=ingested_at, parts=parts)
            writer.add_scan(conn, dialect, rows, latest_seq=False)
    op.drop_table("old_scan_documents")
    op.drop_table("old_scans")


def downgrade() -> None:
    raise NotImplementedError("0004 cannot be undone (export the scans and ingest them "
                              "into a database made by the older gpusbom)")
