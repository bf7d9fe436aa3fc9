"""the latest scan of every subject, findings per severity and affected advisories per scan

The dashboard's overview, the advisory list and /metrics read the latest scan of every
host and image with its finding counts. Computed on every request (a window function over
``scans``, then ~100 finding rows per scan aggregated) that costs about half a second at
10,000 scans on PostgreSQL; kept as rows written at ingest it is a join on a primary key.
A stored scan never changes, so the counts never go stale. Existing databases are filled
from their rows here, in SQL that SQLite and PostgreSQL both run.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "latest",
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("subject", sa.String(512), primary_key=True),
        sa.Column("scan_id", sa.String(64), nullable=False),
        sa.Column("ts", sa.String(32), nullable=False),
        sa.Column("ingested_at", sa.String(32), nullable=False),
        sa.ForeignKeyConstraint(["scan_id"], ["scans.id"]),
    )
    op.create_index("ix_latest_scan_id", "latest", ["scan_id"], unique=True)
    op.create_table(
        "finding_counts",
        sa.Column("scan_id", sa.String(64), primary_key=True),
        sa.Column("severity", sa.String(16), primary_key=True),
        sa.Column("n", sa.Integer, nullable=False),
        sa.ForeignKeyConstraint(["scan_id"], ["scans.id"], ondelete="CASCADE"),
    )
    op.create_table(
        "affected_advisories",
        sa.Column("scan_id", sa.String(64), primary_key=True),
        sa.Column("advisory", sa.String(128), primary_key=True),
        sa.ForeignKeyConstraint(["scan_id"], ["scans.id"], ondelete="CASCADE"),
    )
    op.create_index("ix_affected_advisories_advisory", "affected_advisories",
                    ["advisory", "scan_id"])
    # the advisory page reads one advisory's findings (the not-affected statements)
    op.create_index("ix_findings_advisory", "findings", ["advisory", "status"])
    # "where is PRODUCT": the product's rows of the latest scans from the index alone
    op.drop_index("ix_products_product", table_name="products")
    op.create_index("ix_products_product", "products", ["product", "scan_id", "comp_idx",
                                                        "version"])
    # the same order as Store.latest_scan_ids had as a window query: newest ts, then
    # ingested_at, then id
    op.execute(
        "INSERT INTO latest (kind, subject, scan_id, ts, ingested_at) "
        "SELECT kind, subject, id, ts, ingested_at FROM ("
        "SELECT kind, subject, id, ts, ingested_at, row_number() OVER ("
        "PARTITION BY kind, subject ORDER BY ts DESC, ingested_at DESC, id DESC) AS rn "
        "FROM scans) ranked WHERE rn = 1")
    op.execute(
        "INSERT INTO finding_counts (scan_id, severity, n) "
        "SELECT scan_id, severity, count(*) FROM findings GROUP BY scan_id, severity")
    op.execute(
        "INSERT INTO affected_advisories (scan_id, advisory) "
        "SELECT DISTINCT scan_id, advisory FROM findings "
        "WHERE status = 'affected' AND advisory IS NOT NULL")


def downgrade() -> None:
    op.drop_index("ix_products_product", table_name="products")
    op.create_index("ix_products_product", "products", ["product", "scan_id"])
    op.drop_index("ix_findings_advisory", table_name="findings")
    for name in ("affected_advisories", "finding_counts", "latest"):
        op.drop_table(name)
