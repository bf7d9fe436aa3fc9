"""``gpusbom inventory serve``: a read-only web dashboard over the fleet inventory.

Pages (each with its JSON twin under ``/api/``, described by ``/api/openapi.json``):
fleet overview, search, advisories and one advisory, the compatibility matrix (images x host
GPU kinds) and its cells, one host, one image; ``/metrics`` is the Prometheus exposition
of ``gpusbom inventory metrics``. Starlette routes, Jinja2 renders (autoescaped), uvicorn
serves; the stylesheet ships in the package (no CDN, works air-gapped). See
docs/inventory.md ("Dashboard").
"""

from __future__ import annotations

from ...extras import require

require("inventory")  # Starlette, uvicorn: one line naming the pip install

from .app import create_app, parse_bind, read_token, serve  # noqa: E402 - after the check

__all__ = ["create_app", "parse_bind", "read_token", "serve"]
