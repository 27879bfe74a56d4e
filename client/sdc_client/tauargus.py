"""tau-ARGUS files: hierarchies (``.hrc``), codelists (``.cdl``), and patterns written with
tau-ARGUS's cell statuses, so that an agency moving from tau-ARGUS keeps its metadata.

Plain Python (no numpy, no server): the client, the command line and a notebook read a
tau-ARGUS hierarchy into the service's ``children`` form and write the service's pattern
back in tau-ARGUS's codes.

Formats (tau-ARGUS 4 user's manual, "hierarchical codelist" and "apriori file"):

``.hrc``
    One code a line, in pre-order (a parent before its children). A code's depth below
    the table's total is its number of leading level markers (``@`` unless the metadata
    sets another ``HIERLEADSTRING``): top-level codes have none, their children one, and
    so on. The total itself is not listed.
``.cdl``
    One code a line, optionally followed by a comma and a label (quotes allowed).
Statuses
    ``S`` safe, ``U`` unsafe (primary), ``P`` protected (published as is), ``M`` secondary
    suppression, ``Z`` empty. The service's ``primary`` is ``U``, ``secondary`` is ``M``,
    ``published`` is ``S`` (``Z`` for an empty cell). An apriori file (``.hst``) sets
    statuses for tau-ARGUS to start from, ``code;...;status`` with ``s`` (safe) and ``u``
    (unsafe: to be suppressed); a pattern imported that way marks primary and secondary
    cells ``u``, so tau-ARGUS keeps every one of them suppressed.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

#: The service's cell statuses as tau-ARGUS's.
STATUS_CODES = {"primary": "U", "secondary": "M", "published": "S"}
EMPTY = "Z"


class TauArgusFormatError(ValueError):
    """A tau-ARGUS file that cannot be read; the message names the line."""


def _text(source: str | Path | io.TextIOBase) -> str:
    if isinstance(source, io.TextIOBase):
        return source.read()
    path = Path(source)
    # tau-ARGUS writes files in the Windows code page; UTF-8 first, then Latin-1.
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def parse_hrc(text: str, *, total: str = "Total", lead: str = "@") -> dict[str, list[str]]:
    """The hierarchy of an ``.hrc`` text in the service's ``children`` form: each parent
    code's children, ``total`` the parent of the top-level codes.

    A code deeper than one level below the code before it, a code listed twice, or a
    code equal to ``total`` is refused with the line number.
    """
    if not lead:
        raise ValueError("the level marker must not be empty")
    children: dict[str, list[str]] = {total: []}
    path: list[str] = [total]  # the open ancestors: path[d] has depth d
    seen = {total}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        depth = 0
        while stripped.startswith(lead, depth * len(lead)):
            depth += 1
        code = stripped[depth * len(lead) :].strip()
        if not code:
            raise TauArgusFormatError(f"line {number}: a level marker without a code")
        if depth + 1 > len(path):
            raise TauArgusFormatError(
                f"line {number}: {code!r} is {depth + 1} levels deep but the code before "
                f"it only {len(path) - 1}"
            )
        if code in seen:
            raise TauArgusFormatError(f"line {number}: {code!r} is listed twice")
        seen.add(code)
        del path[depth + 1 :]
        children.setdefault(path[depth], []).append(code)
        path.append(code)
    if not children[total]:
        raise TauArgusFormatError("no codes in the hierarchy")
    return {parent: kids for parent, kids in children.items() if kids}


def read_hrc(
    source: str | Path | io.TextIOBase, *, total: str = "Total", lead: str = "@"
) -> dict[str, list[str]]:
    """:func:`parse_hrc` of a file (or an open text stream)."""
    return parse_hrc(_text(source), total=total, lead=lead)


def format_hrc(
    children: Mapping[str, Sequence[str]], *, total: str = "Total", lead: str = "@"
) -> str:
    """The ``.hrc`` text of a ``children`` hierarchy (the inverse of :func:`parse_hrc`)."""
    lines: list[str] = []
    stack = [(code, 0) for code in reversed(children.get(total, ()))]
    seen = {total}
    while stack:
        code, depth = stack.pop()
        if code in seen:
            raise ValueError(f"{code!r} appears twice in the hierarchy")
        seen.add(code)
        lines.append(lead * depth + code)
        stack.extend((kid, depth + 1) for kid in reversed(children.get(code, ())))
    return "\n".join(lines) + "\n"


def read_codelist(source: str | Path | io.TextIOBase) -> dict[str, str]:
    """A ``.cdl`` codelist: code to label (the code itself when no label is given)."""
    labels: dict[str, str] = {}
    for number, row in enumerate(csv.reader(io.StringIO(_text(source))), start=1):
        if not row or not row[0].strip():
            continue
        code = row[0].strip()
        if code in labels:
            raise TauArgusFormatError(f"line {number}: {code!r} is listed twice")
        labels[code] = row[1].strip() if len(row) > 1 and row[1].strip() else code
    return labels


def tau_status(status: str, *, empty: bool = False) -> str:
    """tau-ARGUS's code of one of the service's cell statuses (``Z`` for an empty
    published cell)."""
    if status not in STATUS_CODES:
        raise ValueError(f"unknown cell status {status!r}; one of {', '.join(STATUS_CODES)}")
    if empty and status == "published":
        return EMPTY
    return STATUS_CODES[status]


def format_pattern(cells: Iterable[Mapping], *, apriori: bool = False, sep: str = ";") -> str:
    """A pattern in tau-ARGUS's codes, one cell a line: ``code;...;value;status``, or for
    an apriori file (``apriori=True``, tau-ARGUS's ``.hst``) ``code;...;status`` with ``u``
    for every suppressed cell and ``s`` for the published ones.

    ``cells`` are the service's reply cells (``key``, ``status``, and ``value`` when the
    reply carries it); a cell with value 0 and status ``published`` is written ``Z``.
    """
    out = io.StringIO()
    writer = csv.writer(out, delimiter=sep, lineterminator="\n")
    for cell in cells:
        value = cell.get("value")
        code = tau_status(cell["status"], empty=value == 0)
        if apriori:
            writer.writerow([*cell["key"], "u" if code in ("U", "M") else "s"])
        else:
            writer.writerow([*cell["key"], "" if value is None else value, code])
    return out.getvalue()
