"""GET a path of an ASGI app in process (no HTTP server, no httpx): for the inventory
scale test and benchmark, which time the dashboard's own work."""

from __future__ import annotations

import asyncio
from typing import Any


def asgi_get(app: Any, path: str) -> tuple[int, bytes]:
    path, _, query = path.partition("?")
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": query.encode(), "root_path": "",
             "headers": [(b"host", b"127.0.0.1"), (b"accept", b"text/html")],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    status = [0]
    body: list[bytes] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(msg: dict[str, Any]) -> None:
        if msg["type"] == "http.response.start":
            status[0] = msg["status"]
        elif msg["type"] == "http.response.body":
            body.append(msg.get("body", b""))

    asyncio.run(app(scope, receive, send))
    return status[0], b"".join(body)
