"""``latest.seq``: the change counter's value of the write that last set each row, so a
reader (the dashboard's /metrics) reads only the rows changed since the value it holds

Rows stored before this revision get 0; the first read after it reads every row (as it
did before), later ones the rows written since.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("latest", sa.Column("seq", sa.Integer(), nullable=False,
                                      server_default="0"))
    op.create_index("ix_latest_seq", "latest", ["seq"])


def downgrade() -> None:
    op.drop_index("ix_latest_seq", table_name="latest")
    op.drop_column("latest", "seq")
