"""analyses: triage decisions recorded in the dashboard

One row per (component, vulnerability): the state (not_affected, false_positive, accepted,
in_triage), justification, comment, author and expiry a person recorded; applied to every
stored host and image with that component and exported as OpenVEX / CycloneDX VEX.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "analyses",
        sa.Column("component", sa.String(1024), primary_key=True),
        sa.Column("vulnerability", sa.String(128), primary_key=True),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("justification", sa.String(64)),
        sa.Column("comment", sa.Text, nullable=False),
        sa.Column("author", sa.String(255), nullable=False),
        sa.Column("expires", sa.String(32)),
        sa.Column("created", sa.String(32), nullable=False),
        sa.Column("updated", sa.String(32), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("analyses")
