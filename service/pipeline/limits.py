"""The service's limits on the work one request may ask for (``SDC_MAX_CELLS``,
``SDC_MAX_SOLVER_SECONDS``), checked before anything of that size is built."""

from __future__ import annotations

from service.config import Settings

from .errors import LimitError

#: What building the reply may take beyond the solve (the reply of /v1/suppress, /v1/audit,
#: /v1/adjust): the solve gets the time limit less the time already spent on the request
#: and ``min(REPLY_SECONDS, REPLY_SHARE * time_limit)``.
REPLY_SECONDS, REPLY_SHARE = 0.5, 0.05


def check_cell_count(n: int, max_cells: int, *, what: str = "cells", field: str = "cells") -> None:
    """:class:`LimitError` when ``n`` exceeds ``max_cells`` (``SDC_MAX_CELLS``): the cells
    sent, and (``what``, ``field``) the cells of the table they span or the entries a
    reply would list, which the caller sends no cell for. Call it before anything of size
    ``n`` is allocated."""
    if n > max_cells:
        raise LimitError(f"{n} {what} exceed the limit of {max_cells} per request", field=field)


def solver_seconds(asked: float | None, settings: Settings) -> float:
    """The solver time for a request: what the caller asked for, at most the service's cap."""
    cap = settings.max_solver_seconds
    return cap if asked is None else min(asked, cap)
