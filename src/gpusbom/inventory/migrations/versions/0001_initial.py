"""initial inventory schema: scans, documents, components, products, devices, probes, findings

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _scan_fk(*cols: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(list(cols), ["scans.id"], ondelete="CASCADE")


def upgrade() -> None:
    op.create_table(
        "scans",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("subject", sa.String(512), nullable=False),
        sa.Column("reference", sa.Text, nullable=False),
        sa.Column("name", sa.String(512)),
        sa.Column("digest", sa.String(128)),
        sa.Column("hostname", sa.String(255)),
        sa.Column("platform", sa.String(64)),
        sa.Column("labels", sa.JSON, nullable=False),
        sa.Column("ts", sa.String(32), nullable=False),
        sa.Column("ingested_at", sa.String(32), nullable=False),
        sa.Column("tool_name", sa.String(64)),
        sa.Column("tool_version", sa.String(64)),
        sa.Column("advisory_db", sa.String(255)),
        sa.Column("components", sa.Integer, nullable=False),
        sa.Column("stack_text", sa.Text),
    )
    op.create_index("ix_scans_subject_ts", "scans", ["kind", "subject", "ts"])
    op.create_index("ix_scans_ts", "scans", ["ts"])
    op.create_table(
        "scan_documents",
        sa.Column("scan_id", sa.String(64), primary_key=True),
        sa.Column("encoding", sa.String(16), nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        _scan_fk("scan_id"),
    )
    op.create_table(
        "components",
        sa.Column("scan_id", sa.String(64), primary_key=True),
        sa.Column("idx", sa.Integer, primary_key=True),
        sa.Column("ref", sa.Text),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("name_key", sa.String(512), nullable=False),
        sa.Column("version", sa.String(255)),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("ecosystem", sa.String(32)),
        sa.Column("purl", sa.Text),
        sa.Column("stack", sa.String(64)),
        sa.Column("product", sa.String(128)),
        sa.Column("product_version", sa.String(255)),
        sa.Column("release", sa.String(64)),
        sa.Column("location", sa.Text),
        sa.Column("gpu_targets", sa.Text),
        sa.Column("evidence_methods", sa.String(255)),
        sa.Column("properties", sa.JSON, nullable=False),
        _scan_fk("scan_id"),
    )
    op.create_index("ix_components_name_key", "components", ["name_key", "scan_id"])
    op.create_table(
        "products",
        sa.Column("scan_id", sa.String(64), primary_key=True),
        sa.Column("comp_idx", sa.Integer, primary_key=True),
        sa.Column("n", sa.Integer, primary_key=True),
        sa.Column("stack", sa.String(64), nullable=False),
        sa.Column("product", sa.String(128), nullable=False),
        sa.Column("version", sa.String(255)),
        sa.ForeignKeyConstraint(["scan_id", "comp_idx"], ["components.scan_id", "components.idx"],
                                ondelete="CASCADE"),
    )
    op.create_index("ix_products_product", "products", ["product", "scan_id"])
    op.create_index("ix_products_stack", "products", ["stack", "scan_id"])
    op.create_table(
        "devices",
        sa.Column("scan_id", sa.String(64), primary_key=True),
        sa.Column("idx", sa.Integer, primary_key=True),
        sa.Column("ref", sa.Text),
        sa.Column("model", sa.String(255)),
        sa.Column("vendor", sa.String(64)),
        sa.Column("pci_address", sa.String(32)),
        sa.Column("compute_capability", sa.String(64)),
        sa.Column("kernel_driver", sa.String(64)),
        sa.Column("driver_version", sa.String(64)),
        sa.Column("uuid", sa.String(128)),
        sa.Column("properties", sa.JSON, nullable=False),
        _scan_fk("scan_id"),
    )
    op.create_table(
        "probes",
        sa.Column("scan_id", sa.String(64), primary_key=True),
        sa.Column("idx", sa.Integer, primary_key=True),
        sa.Column("backend", sa.String(32), nullable=False),
        sa.Column("device_id", sa.String(32)),
        sa.Column("device", sa.String(255)),
        sa.Column("device_ref", sa.Text),
        sa.Column("pci_address", sa.String(32)),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("error_name", sa.String(128)),
        sa.Column("max_abs_error", sa.Float),
        sa.Column("seconds", sa.Float),
        _scan_fk("scan_id"),
    )
    op.create_table(
        "findings",
        sa.Column("scan_id", sa.String(64), primary_key=True),
        sa.Column("idx", sa.Integer, primary_key=True),
        sa.Column("rule_id", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("status", sa.String(16)),
        sa.Column("advisory", sa.String(128)),
        sa.Column("component_ref", sa.Text),
        sa.Column("installed_version", sa.String(255)),
        sa.Column("fixed_version", sa.String(255)),
        _scan_fk("scan_id"),
    )
    op.create_index("ix_findings_rule", "findings", ["rule_id"])


def downgrade() -> None:
    for name in ("findings", "probes", "devices", "products", "components", "scan_documents",
                 "scans"):
        op.drop_table(name)
