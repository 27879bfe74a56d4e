"""Prometheus metrics of the service (one registry per app, so tests start from zero)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import get_args

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily

from schemas.tables import SolveStatus
from service.sdc.highs import Outcome

LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60)
SOLVER_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
#: How a solve ended, as the ``status`` label of ``sdc_solver_outcomes_total``: the values
#: of the HiGHS outcomes the service reports (``schemas.tables.SolveStatus``).
SOLVER_STATUSES: tuple[str, ...] = tuple(status.value for status in get_args(SolveStatus))
#: Refused requests by HTTP status, as the ``reason`` label of ``sdc_rejected_requests_total``.
REJECTION_REASONS = {
    401: "unauthorized",
    403: "forbidden",
    408: "timeout",
    413: "too_large",
    422: "invalid",
    429: "rate_limited",
    503: "overloaded",
}


class ApiKeyCells:
    """``sdc_filter_cells_total{key_id,outcome}``: the cells each filter-role API key sent,
    admitted or refused by its budget (``service.api.cell_budget.CellBudget``), so that a
    sweep of probes shows as one key's cells; analysts are not budgeted. Key ids are
    bounded by the API key file. Plain numbers that the event loop's thread adds to and a
    scrape reads: a Counter's ``labels`` and ``inc`` cost several microseconds on every
    filter request."""

    def __init__(self, registry: CollectorRegistry):
        self.counts: dict[str, list[int]] = {}  # key id: [admitted, refused]
        registry.register(self)

    def of(self, key_id: str) -> list[int]:
        """The key's [admitted, refused] pair, to add to in place."""
        return self.counts.setdefault(key_id, [0, 0])

    def describe(self):
        return [self._family()]

    def collect(self):
        family = self._family()
        for key_id, (admitted, refused) in list(self.counts.items()):  # a copy: atomic
            family.add_metric([key_id, "admitted"], admitted)
            family.add_metric([key_id, "refused"], refused)
        yield family

    @staticmethod
    def _family() -> CounterMetricFamily:
        return CounterMetricFamily(
            "sdc_filter_cells",
            "Cells sent by filter-role keys, by key "
            "id and outcome (admitted, or refused by the key's budget)",
            labels=["key_id", "outcome"],
        )


@dataclass(frozen=True)
class Metrics:
    registry: CollectorRegistry
    requests: Counter
    latency: Histogram
    cells_evaluated: Counter
    sensitive_cells: Counter
    in_flight: Gauge
    rejected: Counter
    pool_admitted: Gauge
    pool_capacity: Gauge
    pool_threads: Gauge
    solver_seconds: Histogram
    solver_outcomes: Counter
    filter_decisions: Counter
    filter_cells: ApiKeyCells

    @classmethod
    def create(cls) -> Metrics:
        registry = CollectorRegistry()
        ProcessCollector(registry=registry)  # resident memory, CPU seconds, open files
        return cls(
            registry=registry,
            requests=Counter(
                "sdc_http_requests",
                "HTTP requests by route, method and status",
                ["route", "method", "status"],
                registry=registry,
            ),
            latency=Histogram(
                "sdc_http_request_duration_seconds",
                "Request latency by route",
                ["route"],
                buckets=LATENCY_BUCKETS,
                registry=registry,
            ),
            cells_evaluated=Counter(
                "sdc_cells_evaluated", "Cells assessed for sensitivity", registry=registry
            ),
            sensitive_cells=Counter(
                "sdc_sensitive_cells", "Cells found sensitive", registry=registry
            ),
            in_flight=Gauge(
                "sdc_http_requests_in_flight", "HTTP requests being served", registry=registry
            ),
            rejected=Counter(
                "sdc_rejected_requests",
                "Requests refused, by reason "
                "(unauthorized, forbidden, timeout, too_large, invalid, rate_limited, "
                "overloaded)",
                ["reason"],
                registry=registry,
            ),
            pool_admitted=Gauge(
                "sdc_pool_tasks", "Tasks running or queued in the compute pool", registry=registry
            ),
            pool_capacity=Gauge(
                "sdc_pool_capacity",
                "Tasks the compute pool admits (threads "
                "+ queue); sdc_pool_tasks / sdc_pool_capacity is saturation",
                registry=registry,
            ),
            pool_threads=Gauge(
                "sdc_pool_threads", "Worker threads of the compute pool", registry=registry
            ),
            solver_seconds=Histogram(
                "sdc_solver_seconds",
                "Wall time of solver runs by method",
                ["method"],
                buckets=SOLVER_BUCKETS,
                registry=registry,
            ),
            solver_outcomes=Counter(
                "sdc_solver_outcomes",
                f"Solver runs by method and how they ended ({', '.join(SOLVER_STATUSES)})",
                ["method", "status"],
                registry=registry,
            ),
            filter_decisions=Counter(
                "sdc_filter_decisions",
                "Online filter answers by decision (publish, suppress, refuse)",
                ["decision"],
                registry=registry,
            ),
            filter_cells=ApiKeyCells(registry),
        )

    def serve(self, host: str, port: int) -> Callable[[], None]:
        """Serve this registry on ``host:port`` (``SDC_METRICS_PORT``) from prometheus_client's
        threaded server, apart from the API: a port that only Prometheus may reach, and
        scrapes answered even while the event loop is busy. Returns the function that
        stops it."""
        server, thread = start_http_server(port, addr=host, registry=self.registry)

        def stop() -> None:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)

        return stop

    def observe_solve(self, method: str, status: str, seconds: float) -> None:
        """Record one solver run (audit intervals, suppression, ...). ``status`` (an
        :class:`~service.sdc.highs.Outcome` or its value) outside :data:`SOLVER_STATUSES` is
        counted as ``error`` to keep the label set bounded."""
        if status not in SOLVER_STATUSES:
            status = Outcome.ERROR
        self.solver_seconds.labels(method).observe(seconds)
        self.solver_outcomes.labels(method, status).inc()
