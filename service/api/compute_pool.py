"""The compute pool: where CPU-bound request work runs, inline for small tables, else a
bounded pool of threads.

Small tables of routes whose work is linear in the cells (the online filter's case) are
computed on the event loop: a thread hop costs more than the work. Everything else, and
every solver (one LP can take longer than a whole filter request), goes to a fixed set of
worker threads with a short queue in front (``SDC_WORKER_THREADS``, ``SDC_QUEUE_DEPTH``).
When both are full the request is refused at once with 503 and ``Retry-After`` rather
than queued without bound: a caller can retry elsewhere, and health checks and metrics,
which never enter the pool, stay responsive while solvers run.

Large bodies are admitted the same way before they are read
(:meth:`ComputePool.admit_request`): parsing and validating a big table runs on the event
loop (a part at a time: :mod:`.body_parts`), so without that bound the loop itself would
become the unbounded queue.

When the server begins to stop (:meth:`ComputePool.drain`), tasks still waiting for a
thread are answered 503 with ``Retry-After`` at once and new ones are refused: only the
running ones must finish within the shutdown period, whatever the queue depth.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from starlette.exceptions import HTTPException

T = TypeVar("T")

#: Requests up to this size (cells, or entries: ``compute``) are computed inline (under 1 ms).
INLINE_CELLS = 2_000
#: Routes whose work grows linearly with the cells, without solvers: small tables inline.
INLINE_ROUTES = frozenset({"/v1/sensitivity", "/v1/frequency/sensitivity", "/v1/filter"})
#: Bodies over this many bytes (or of unknown length) need a request slot before reading.
LARGE_BODY_BYTES = 256 * 1024
#: Seconds a refused caller is told to wait.
RETRY_AFTER_SECONDS = 1


class PoolFull(HTTPException):
    def __init__(
        self, detail: str = "the service is at capacity; retry after the Retry-After seconds"
    ) -> None:
        super().__init__(503, detail, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


class ShuttingDown(PoolFull):
    """The server is stopping: the caller should retry, most likely on another instance."""

    def __init__(self) -> None:
        super().__init__("the service is shutting down; retry after the Retry-After seconds")


class ComputePool:
    """A thread pool that admits at most ``threads + queue_depth`` tasks."""

    def __init__(self, threads: int, queue_depth: int, metrics=None):
        self.threads, self.capacity = threads, threads + queue_depth
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="sdc-compute")
        self._lock = threading.Lock()
        self.admitted = 0
        self.large_requests = 0
        self.draining = False
        self._futures: set = set()  # submitted and not done: what drain() may cancel
        self.metrics = metrics
        if metrics is not None:
            metrics.pool_capacity.set(self.capacity)
            metrics.pool_threads.set(threads)

    def _release(self, future) -> None:
        # On the future's completion, not the awaiting task's: a cancelled request (client
        # gone) keeps its slot until the thread really stops working on it.
        with self._lock:
            self._futures.discard(future)
            self.admitted -= 1
            if self.metrics is not None:
                self.metrics.pool_admitted.set(self.admitted)

    async def run(self, fn: Callable[..., T], *args) -> T:
        with self._lock:
            if self.draining:
                raise ShuttingDown()
            if self.admitted >= self.capacity:
                raise PoolFull()
            self.admitted += 1
            if self.metrics is not None:
                self.metrics.pool_admitted.set(self.admitted)
            try:
                future = self._executor.submit(contextvars.copy_context().run, fn, *args)
            except RuntimeError:  # shut down
                self.admitted -= 1
                raise ShuttingDown() from None
            self._futures.add(future)
        future.add_done_callback(self._release)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            # drain() cancelled the queued future, not this task: that is a refusal.
            task = asyncio.current_task()  # this coroutine's: never None here
            if future.cancelled() and not (task is not None and task.cancelling()):
                raise ShuttingDown() from None
            raise

    def drain(self) -> None:
        """The server is stopping: refuse new tasks and large requests, and cancel the
        queued ones (their callers get :class:`ShuttingDown`); running tasks finish.
        Idempotent."""
        with self._lock:
            self.draining = True
            queued = list(self._futures)
        for future in queued:
            future.cancel()  # False, and no effect, for a task a thread already runs

    def admit_request(self) -> bool:
        """Take a slot for a large request (parse, validate, compute); False when full or
        draining. Called on the event loop only."""
        if self.draining or self.large_requests >= self.capacity:
            return False
        self.large_requests += 1
        return True

    def release_request(self) -> None:
        self.large_requests -= 1

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


#: The pool of the app serving the current request (set by the request middleware).
current_pool: contextvars.ContextVar[ComputePool | None] = contextvars.ContextVar(
    "sdc_pool", default=None
)
#: Whether the current route may compute small tables inline (see INLINE_ROUTES).
inline_allowed: contextvars.ContextVar[bool] = contextvars.ContextVar("sdc_inline", default=True)
_fallback: ComputePool | None = None


def _pool() -> ComputePool:
    global _fallback
    pool = current_pool.get()
    if pool is None:  # called outside a request (scripts, unit tests)
        if _fallback is None:
            _fallback = ComputePool(2, 2)
        pool = _fallback
    return pool


async def compute(fn: Callable[..., T], *args, size: int) -> T:
    """``fn(*args)``: inline when ``size`` (what ``fn`` reads: cells, and a structure's
    codes, :func:`service.pipeline.tables.request_size`) is small and the route's work is
    linear, else in the bounded pool."""
    if size <= INLINE_CELLS and inline_allowed.get():
        return fn(*args)
    return await _pool().run(fn, *args)


async def compute_resolved(resolve: Callable[..., T], body, settings) -> tuple[T, int]:
    """``resolve(body, settings)`` (a table request's structure checked and resolved) and
    the request's size for the computation after it, both by
    :func:`service.pipeline.tables.request_size`: off the event loop when large, since a
    structure may be large for its cells (800,000 parents over one cell held the loop 2 s,
    a campaign, h68)."""
    from service.pipeline.tables import request_size  # the pool knows no request types

    size = request_size(body)
    return await compute(resolve, body, settings, size=size), size
