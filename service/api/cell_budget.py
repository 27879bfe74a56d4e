"""The filter role's cell budget: how many cells each filter-role API key may send."""

from __future__ import annotations

import math
import time

from starlette.requests import Request

from service.metrics import ApiKeyCells

from .errors import RequestError


class CellBudget:
    """Cells each filter-role key may send: a token bucket per key id in this process's
    memory (``SDC_FILTER_CELLS_PER_MINUTE``), full at first (a minute's worth) and refilled
    continuously, and at most ``max_cells`` in one request (``SDC_FILTER_MAX_CELLS``). What
    each key sent goes to ``cells`` (``sdc_filter_cells_total``). Key ids are bounded by
    the API key file."""

    def __init__(self, per_minute: int, max_cells: int, cells: ApiKeyCells, clock=time.monotonic):
        self.capacity = float(per_minute)
        self.per_second = per_minute / 60.0
        self.max_cells = max_cells
        self.cells = cells
        self.clock = clock
        self._keys: dict[str, list] = {}  # key id: [cells left, when, its ApiKeyCells pair]

    def take(self, key_id: str, cells: int) -> float:
        """Take ``cells`` from the key's bucket and return 0, or, when it holds fewer,
        take none and return the seconds until it will hold enough."""
        now = self.clock()
        entry = self._keys.get(key_id)
        if entry is None:
            entry = self._keys[key_id] = [self.capacity, now, self.cells.of(key_id)]
        left = min(self.capacity, entry[0] + (now - entry[1]) * self.per_second)
        entry[1] = now
        if cells <= left:
            entry[0] = left - cells
            entry[2][0] += cells
            return 0.0
        entry[0] = left
        entry[2][1] += cells
        return (cells - left) / self.per_second


def charge_cells(request: Request, n: int) -> None:
    """Charge a request's ``n`` cells to its caller's key when the role is ``filter``: 413
    over ``SDC_FILTER_MAX_CELLS`` in one request, 429 with ``Retry-After`` when the key's
    :class:`CellBudget` holds fewer. Probing a profile's parameters takes many cells: this
    sets what it costs, and ``sdc_filter_cells_total`` shows who spends them. Other roles
    pass free. Runs on the event loop, so the buckets need no lock."""
    caller = request.scope.get("state", {}).get("caller")
    if getattr(caller, "role", None) != "filter":
        return
    state = request.app.state
    budget = getattr(state, "cell_budget", None)
    if budget is None:  # one per app, made at its first filter-role request
        settings = state.settings
        budget = state.cell_budget = CellBudget(
            settings.filter_cells_per_minute, settings.filter_max_cells, state.metrics.filter_cells
        )
    if n > budget.max_cells:
        raise RequestError(
            413,
            f"{n} cells exceed the limit of {budget.max_cells} per request for the filter role",
            field="cells",
        )
    wait = budget.take(caller.key_id, n)
    if wait:
        raise RequestError(
            429,
            "this key has sent its cells per minute; retry after the Retry-After seconds",
            field="cells",
            headers={"Retry-After": str(max(1, math.ceil(wait)))},
        )
