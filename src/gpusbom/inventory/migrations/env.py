"""Alembic environment: runs on the connection ``Store`` hands over
(``config.attributes["connection"]``), inside the transaction it holds."""

from __future__ import annotations

from alembic import context

from gpusbom.inventory.schema import metadata

config = context.config
connection = config.attributes.get("connection")
if connection is None:  # pragma: no cover - the package runs migrations itself
    raise RuntimeError("gpusbom inventory migrations run through gpusbom.inventory.Store")

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
