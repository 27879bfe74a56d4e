"""Errors the core raises for input a caller can correct.

The API layer turns :class:`InputError` into a 422 reply; ``cell`` is the position of the
offending cell in the caller's list so the reply can name the cell by its key.
"""

from __future__ import annotations


class InputError(ValueError):
    """Input that cannot be assessed as sent.

    Parameters
    ----------
    message : str
        What is wrong, in words a caller can act on.
    field : str, optional
        Dotted path of the offending field inside a cell (``"contributions.value"``) or in
        the request (``"rules.negative_values"``).
    cell : int, optional
        Index of the offending cell in the request's cell list.
    """

    def __init__(self, message: str, *, field: str | None = None, cell: int | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.cell = cell


#: Codes one error message names at most; a structure with thousands of bad codes gets a
#: message of a few lines, not one as long as the request.
NAMED_CODES = 5


def some(codes, sep: str = ", ") -> str:
    """The first :data:`NAMED_CODES` of ``codes`` (a sequence), quoted, then how many more.

    >>> some(["a", "b"])
    "'a', 'b'"
    >>> some([str(i) for i in range(8)])
    "'0', '1', '2', '3', '4' and 3 more"
    """
    shown = sep.join(map(repr, codes[:NAMED_CODES]))
    more = len(codes) - NAMED_CODES
    return shown if more <= 0 else f"{shown} and {more} more"
