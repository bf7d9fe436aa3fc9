"""Prometheus text exposition (``gpusbom inventory metrics``, the dashboard's /metrics).

The subject is a Prometheus collector (``inventory.metrics``: findings by severity per host,
probe outcome per GPU, scan age); this writer is the one place it becomes text.
"""

from __future__ import annotations

from typing import Any, TextIO

from . import register
from .base import Writer, WriterOptions


def exposition(collector: Any) -> str:
    """The text format of what ``collector`` (a ``prometheus_client`` collector) yields."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry).decode("utf-8")


@register
class MetricsPrometheusWriter(Writer):
    format = "prometheus"
    subject = "metrics"
    description = "Prometheus text format (node-exporter's textfile collector)"

    def write(self, result: Any, out: TextIO, options: WriterOptions) -> None:
        out.write(exposition(result))
