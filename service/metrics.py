"""Prometheus metrics of the service (one registry per app, so tests start from zero)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram

LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60)


@dataclass(frozen=True)
class Metrics:
    registry: CollectorRegistry
    requests: Counter
    latency: Histogram
    cells_evaluated: Counter
    sensitive_cells: Counter

    @classmethod
    def create(cls) -> Metrics:
        registry = CollectorRegistry()
        return cls(
            registry=registry,
            requests=Counter("sdc_http_requests", "HTTP requests by route, method and status",
                             ["route", "method", "status"], registry=registry),
            latency=Histogram("sdc_http_request_duration_seconds", "Request latency by route",
                              ["route"], buckets=LATENCY_BUCKETS, registry=registry),
            cells_evaluated=Counter("sdc_cells_evaluated", "Cells assessed for sensitivity",
                                    registry=registry),
            sensitive_cells=Counter("sdc_sensitive_cells", "Cells found sensitive",
                                    registry=registry),
        )
