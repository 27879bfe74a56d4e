"""Where CPU-bound request work runs.

Small tables (the online filter's case) are computed on the event loop: a thread hop
costs more than the work. Larger ones go to a worker thread so that health checks and
metrics stay responsive.
"""

from __future__ import annotations

from typing import Callable, TypeVar

from anyio import to_thread

T = TypeVar("T")

#: Tables up to this many cells are computed inline on the event loop (well under 1 ms).
INLINE_CELLS = 2_000


async def compute(fn: Callable[..., T], *args, size: int) -> T:
    if size <= INLINE_CELLS:
        return fn(*args)
    return await to_thread.run_sync(fn, *args)
