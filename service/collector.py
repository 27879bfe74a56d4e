"""The cyclic garbage collector's view of the process.

At start the app's objects leave it (frozen) and young objects are collected less often
(:func:`tune`): a request allocates thousands of short-lived validation objects, and
frequent full collections over the long-lived ones were the tail of the latency
distribution. A large body validated in parts (:mod:`service.api.body_parts`) allocates
millions of objects that live until the reply; the collector would pass over them again
and again, each pass holding the interpreter (about 0.15 s per pass over the 400,000 young
objects the thresholds allow, more for a full one). :func:`hide` freezes them part by
part; once the request is answered, :func:`look_again` collects whatever was frozen
meanwhile (cycles that became garbage) and freezes the rest, as at start.
"""

from __future__ import annotations

import gc

_hidden = False


def tune() -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


def hide() -> None:
    """Take every object alive now out of the collector's view."""
    global _hidden
    gc.freeze()
    _hidden = True


def look_again() -> None:
    """After :func:`hide`: one full collection of everything alive, then freeze it (45 ms
    for an idle app)."""
    global _hidden
    if _hidden:
        _hidden = False
        gc.unfreeze()
        tune()
