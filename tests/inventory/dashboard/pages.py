"""The dashboard's routes, as the tests visit them."""

from __future__ import annotations

from urllib.parse import quote

import dash_data


def page_paths(wheels: str) -> list[str]:
    """One URL of every page (relative to the server root), with real parameters."""
    adv = "NVIDIA-5821"
    return [
        "", "search", "search?component=cudnn&version=%3C9.15", "advisories",
        f"advisory?id={adv}", "matrix",
        f"cell?image={quote(wheels)}&gpu={quote('nvidia|NVIDIA H200|9.0||580.159.04|')}",
        "host?name=vm", "host?name=b300-node", f"image?name={quote(wheels)}",
        f"image?name={quote(dash_data.HOSTILE_SUBJECT)}",
    ]


def api_paths(wheels: str) -> list[str]:
    return ["api/" + (p or "overview") for p in page_paths(wheels)]


OTHER = ["api/openapi.json", "metrics", "static/style.css", "static/favicon.svg"]
