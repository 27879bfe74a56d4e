"""pandas helpers: a table's rows in, one row per cell of the protected table out.

A frame is either **microdata** (``rows="contributions"``, the default with rules or a
profile): one row per respondent's contribution, the cell named by the ``dimensions``
columns and the contribution by ``value`` (and optionally ``holding``, ``weight``); or a
**cell table** (``rows="cells"``, the default for count tables): one row per cell, leaves
and optionally margins, with its value.

Holdings are sent as they are, one contribution per row with its ``holding``: the service
sums the contributions of one holding within a cell before any rule (seed 000,
"Holdings"; README "Sensitivity of magnitude cells") and counts a holding present in
several leaves once when it judges their margin, which summing here per cell could not
do.

The result has the dimension columns, the cell's ``value`` (the reply's own when it
carries one, else the sum of the leaves' rows below the cell), its ``status``
(``primary``, ``secondary``, ``published``), and from the audit (analysts): ``sensitive``,
``protected``, the feasibility interval ``interval_lower``/``interval_upper`` (what an
intruder can infer of a suppressed cell; seed 003 B.2.a.iii), ``certified``, the flags
``exact``, ``upper_too_close``, ``lower_too_close``, ``too_narrow``, ``derived``, and the
protection levels when they may be shown. The whole reply is in ``frame.attrs["reply"]``
(the verdict, the loss, the solver's report).

pandas is an optional dependency of the client (``pip install './client[pandas]'``).
"""

from __future__ import annotations

import itertools
import math
import os
import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from .client import Routes
from .tauargus import read_hrc

if TYPE_CHECKING:
    import pandas as pd

Rows = Literal["contributions", "cells"]
#: A hierarchy: a tau-ARGUS ``.hrc`` file's path, ``{"children": {...}, "total": ...}``,
#: or the children mapping itself (each parent code's child codes).
Hierarchy = str | os.PathLike[str] | Mapping[str, Any]

#: The audit's per-cell fields, as result columns, in order.
AUDIT_COLUMNS = (
    "sensitive",
    "protected",
    "interval_lower",
    "interval_upper",
    "certified",
    "exact",
    "upper_too_close",
    "lower_too_close",
    "too_narrow",
    "derived",
    "upper_protection",
    "lower_protection",
)
FLAGS = ("exact", "upper_too_close", "lower_too_close", "too_narrow")


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise ImportError(
            "the frame helpers need pandas: pip install 'sdc-client[pandas]'"
        ) from None
    return pandas


class Dim:
    """One dimension of the table: its total, its parent of each code, its leaves."""

    def __init__(self, name: str, codes: Iterable[str], total: str, hierarchy: Hierarchy | None):
        self.name = name
        if hierarchy is None:
            self.total = total
            self.leaves = [c for c in dict.fromkeys(codes) if c != total]
            self.children: dict[str, list[str]] | None = None
            self.parent = {c: total for c in self.leaves}
            self.codes = [*self.leaves, total]
        else:
            children, self.total = _hierarchy(hierarchy, total)
            self.children = children
            self.parent = {c: p for p, kids in children.items() for c in kids}
            self.leaves = [c for c in self.parent if c not in children]
            self.codes = [self.total, *self.parent]
            unknown = [c for c in dict.fromkeys(codes) if c not in self.parent and c != self.total]
            if unknown:
                raise ValueError(
                    f"column {name!r}: codes not in its hierarchy: {unknown[:5]!r}"
                    + (" ..." if len(unknown) > 5 else "")
                )

    def wire(self) -> dict[str, Any]:
        if self.children is None:
            return {"name": self.name, "total": self.total, "leaves": self.leaves}
        return {"name": self.name, "total": self.total, "children": self.children}

    def up(self, code: str) -> list[str]:
        """``code`` and every code above it, up to the total."""
        chain = [code]
        while chain[-1] in self.parent:
            chain.append(self.parent[chain[-1]])
        return chain


def _hierarchy(spec: Hierarchy, total: str) -> tuple[dict[str, list[str]], str]:
    if isinstance(spec, str | os.PathLike):
        return read_hrc(os.fspath(spec), total=total), total
    if isinstance(spec.get("children"), Mapping):
        children, total = spec["children"], spec.get("total", total)
    else:
        children = spec
    kids = {str(p): [str(c) for c in cs] for p, cs in children.items()}
    # The total is the one parent that is nobody's child ({"All": [...]} works as well).
    roots = set(kids) - {c for cs in kids.values() for c in cs}
    if len(roots) != 1:
        raise ValueError(f"a hierarchy needs exactly one top code, found {sorted(roots)!r}")
    return kids, roots.pop()


def _column(frame: pd.DataFrame, name: str, what: str) -> Any:
    if name not in frame.columns:
        raise ValueError(
            f"{what} column {name!r} is not in the frame (its columns: {list(frame.columns)!r})"
        )
    return frame[name]


def _numbers(frame: pd.DataFrame, name: str, what: str) -> list[float]:
    pd = _pandas()
    column = pd.to_numeric(_column(frame, name, what), errors="coerce")
    bad = column.isna() | column.isin([math.inf, -math.inf])
    if bad.any():
        row = frame.index[bad.to_numpy().nonzero()[0][0]]
        raise ValueError(f"{what} column {name!r}: row {row!r} is not a finite number")
    return [float(v) for v in column.tolist()]


def _codes(frame: pd.DataFrame, name: str) -> list[str]:
    column = _column(frame, name, "dimension")
    missing = column.isna()
    if missing.any():
        row = frame.index[missing.to_numpy().nonzero()[0][0]]
        raise ValueError(f"dimension column {name!r}: row {row!r} has no code")
    return [str(v) for v in column.tolist()]


_TRUE = {"true", "yes", "y", "1", "x", "u", "m"}  # u, m: tau-ARGUS's primary and secondary
_FALSE = {"false", "no", "n", "0", "", "s", "z"}


def _flags(frame: pd.DataFrame, name: str) -> list[bool]:
    """A boolean column; in text, true/false, yes/no, 1/0, x or empty, or tau-ARGUS's
    status codes (``u``, ``m`` suppressed; ``s``, ``z`` published). Anything else is an
    error rather than a guess (``bool("False")`` is true)."""
    out = []
    for row, v in zip(frame.index, _column(frame, name, "suppressed").tolist(), strict=True):
        if v is None or (isinstance(v, float) and v != v):
            out.append(False)
        elif not isinstance(v, str):  # bool, a number, numpy's bool
            out.append(bool(v))
        elif str(v).strip().lower() in _TRUE | _FALSE:
            out.append(str(v).strip().lower() in _TRUE)
        else:
            raise ValueError(f"suppressed column {name!r}: row {row!r} is {v!r}, not true or false")
    return out


class Table:
    """A frame read as a table: the request's structure and cells, and each cell's value."""

    def __init__(
        self,
        frame: pd.DataFrame,
        dimensions: Sequence[str],
        value: str,
        *,
        rows: Rows,
        holding: str | None = None,
        weight: str | None = None,
        hierarchies: Mapping[str, Hierarchy] | None = None,
        total: str = "Total",
        suppressed: str | None = None,
    ):
        if isinstance(dimensions, str):
            raise TypeError("dimensions is a list of column names")
        hierarchies = hierarchies or {}
        unknown = set(hierarchies) - set(dimensions)
        if unknown:
            raise ValueError(
                f"hierarchies for columns that are not dimensions: {sorted(unknown)!r}"
            )
        self.names = list(dimensions)
        keys = list(zip(*(_codes(frame, d) for d in self.names), strict=True))
        values = _numbers(frame, value, "value")
        self.dims = [
            Dim(d, (k[i] for k in keys), total, hierarchies.get(d))
            for i, d in enumerate(self.names)
        ]
        self.keys, self.values = keys, values
        self.weights: list[float | None] | None = None
        flags = None
        if suppressed is not None:
            flags = _flags(frame, suppressed)
        self.cells: list[dict[str, Any]] = []
        if rows == "cells":
            seen: dict[tuple[str, ...], int] = {}
            for i, k in enumerate(keys):
                if k in seen:
                    raise ValueError(
                        f"rows {frame.index[seen[k]]!r} and {frame.index[i]!r} are the same "
                        f"cell {list(k)!r}; with rows='cells' each row is one cell"
                    )
                seen[k] = i
                cell: dict[str, Any] = {"key": list(k), "value": values[i]}
                if flags is not None:
                    cell["suppressed"] = flags[i]
                self.cells.append(cell)
        elif rows == "contributions":
            holdings = self._optional(frame, holding, str, "holding")
            weights = self._optional(frame, weight, float, "weight")
            self.weights = weights
            by_key: dict[tuple[str, ...], dict[str, Any]] = {}
            for i, k in enumerate(keys):
                if k not in by_key:
                    by_key[k] = {"key": list(k), "contributions": []}
                    if flags is not None:
                        by_key[k]["suppressed"] = False
                cell = by_key[k]
                c: dict[str, Any] = {"value": values[i]}
                if holdings is not None and holdings[i] is not None:
                    c["holding"] = holdings[i]
                if weights is not None and weights[i] is not None:
                    c["weight"] = weights[i]
                cell["contributions"].append(c)
                if flags is not None and flags[i]:
                    cell["suppressed"] = True  # a cell is suppressed if any of its rows says so
            self.cells = list(by_key.values())
        else:
            raise ValueError(f"rows must be 'contributions' or 'cells', not {rows!r}")
        self.rows = rows

    @staticmethod
    def _optional(frame: pd.DataFrame, name: str | None, kind: type, what: str) -> list[Any] | None:
        if name is None:
            return None
        column = _column(frame, name, what)
        return [None if v is None or v != v else kind(v) for v in column.tolist()]

    def structure(self) -> dict[str, Any]:
        return {"dimensions": [d.wire() for d in self.dims]}

    def all_keys(self) -> list[tuple[str, ...]]:
        """Every cell of the table, margins included."""
        return list(itertools.product(*(d.codes for d in self.dims)))

    def cell_values(self) -> dict[tuple[str, ...], float]:
        """Each cell's value: the sum of the rows of the leaves below it (the table is
        additive: a margin is the sum of its parts, seed 002 section 3), each row times its
        sampling weight (the published value, as the service computes it: an audit frame
        showed the unweighted sums, 120 for a cell published as 220); a margin sent as a
        row of a cell table keeps its own value."""
        leaf_sets = [set(d.leaves) for d in self.dims]
        total: dict[tuple[str, ...], float] = defaultdict(float)
        weights = self.weights or [None] * len(self.values)
        values = [v if w is None else w * v for v, w in zip(self.values, weights, strict=True)]
        for k, v in zip(self.keys, values, strict=True):
            if all(c in s for c, s in zip(k, leaf_sets, strict=True)):
                for up in itertools.product(*(d.up(c) for d, c in zip(self.dims, k, strict=True))):
                    total[up] += v
        if self.rows == "cells":
            total.update(zip(self.keys, self.values, strict=True))
        return dict(total)


def _rule_fields(rules: Any, profile: str | None, counts: Any) -> dict[str, Any]:
    return {"rules": rules, "profile": profile, "counts": counts}


def _service(client: Routes | None) -> Routes:
    if client is not None:
        return client
    from .local import LocalService

    return LocalService()


def _audit_columns(entry: Mapping[str, Any] | None) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(AUDIT_COLUMNS)
    if entry is None:
        return row
    interval = entry.get("interval") or (None, None)
    flags = entry.get("flags") or {}
    row.update(
        sensitive=entry.get("sensitive"),
        protected=entry.get("protected"),
        interval_lower=interval[0],
        interval_upper=interval[1],
        certified=entry.get("certified"),
        derived=entry.get("derived"),
        upper_protection=entry.get("upper_protection"),
        lower_protection=entry.get("lower_protection"),
        **{f: flags.get(f) for f in FLAGS},
    )
    return row


def _result(
    table: Table,
    statuses: Iterable[tuple[tuple[str, ...], str, float | None]],
    audit: Mapping[str, Any] | None,
    reply: Any,
) -> pd.DataFrame:
    pd = _pandas()
    values = table.cell_values()
    audited = {tuple(c["key"]): c for c in (audit or {}).get("cells", [])}
    records = []
    for key, status, value in statuses:
        record: dict[str, Any] = dict(zip(table.names, key, strict=True))
        record["value"] = value if value is not None else values.get(key, 0.0)
        record["status"] = status
        record.update(_audit_columns(audited.get(key)))
        if audit is not None and record["sensitive"] is None:
            record["sensitive"] = False  # the audit lists every sensitive cell
        records.append(record)
    frame = pd.DataFrame.from_records(
        records, columns=[*table.names, "value", "status", *AUDIT_COLUMNS]
    )
    frame.attrs["reply"] = reply
    return frame


def table_request(
    frame: pd.DataFrame,
    dimensions: Sequence[str],
    value: str,
    *,
    rows: Rows | None = None,
    holding: str | None = None,
    weight: str | None = None,
    hierarchies: Mapping[str, Hierarchy] | None = None,
    total: str = "Total",
    suppressed: str | None = None,
    rules: Any = None,
    profile: str | None = None,
    counts: Any = None,
) -> tuple[Table, dict[str, Any]]:
    """The table read from ``frame`` and the body of an audit or suppression request
    (without its options); see the module's docstring."""
    table = Table(
        frame,
        dimensions,
        value,
        rows=rows or ("cells" if counts is not None else "contributions"),
        holding=holding,
        weight=weight,
        hierarchies=hierarchies,
        total=total,
        suppressed=suppressed,
    )
    body = {"structure": table.structure(), "cells": table.cells}
    body.update({k: v for k, v in _rule_fields(rules, profile, counts).items() if v is not None})
    return table, body


def suppress(
    frame: pd.DataFrame,
    dimensions: Sequence[str],
    value: str,
    *,
    holding: str | None = None,
    weight: str | None = None,
    hierarchies: Mapping[str, Hierarchy] | None = None,
    total: str = "Total",
    rows: Rows | None = None,
    rules: Any = None,
    profile: str | None = None,
    counts: Any = None,
    method: Literal["fast", "exact"] = "fast",
    cost: str = "value",
    time_limit: float | None = None,
    client: Routes | None = None,
) -> pd.DataFrame:
    """Protect the table of ``frame`` by ``POST /v1/suppress`` (on ``client``, a
    :class:`~sdc_client.Client`; without one, in this process): one row per cell of the
    table, margins included, with its value, status and audit (module docstring). When no
    safe pattern was found (``frame.attrs["reply"]["safe"]`` false) the statuses are the
    primaries only, and a warning gives the solver's message."""
    table, body = table_request(
        frame,
        dimensions,
        value,
        rows=rows,
        holding=holding,
        weight=weight,
        hierarchies=hierarchies,
        total=total,
        rules=rules,
        profile=profile,
        counts=counts,
    )
    reply = _service(client).suppress(body, method=method, cost=cost, time_limit=time_limit)
    if not reply["safe"]:
        warnings.warn(f"no safe pattern: {reply['solver']['message']}", stacklevel=2)
    statuses = ((tuple(c["key"]), c["status"], c.get("value")) for c in reply["cells"])
    return _result(table, statuses, reply.get("audit"), reply)


def audit(
    frame: pd.DataFrame,
    dimensions: Sequence[str],
    value: str,
    *,
    suppressed: str,
    holding: str | None = None,
    weight: str | None = None,
    hierarchies: Mapping[str, Hierarchy] | None = None,
    total: str = "Total",
    rows: Rows | None = None,
    rules: Any = None,
    profile: str | None = None,
    counts: Any = None,
    time_limit: float | None = None,
    client: Routes | None = None,
) -> pd.DataFrame:
    """Audit the pattern of ``frame``'s ``suppressed`` column (true: the cell, or with
    microdata any row of it, is suppressed) by ``POST /v1/audit``: one row per cell of the
    table, margins included, ``status`` ``primary`` for a sensitive cell, ``secondary``
    for another suppressed cell, else ``published``; ``frame.attrs["reply"]["verdict"]``
    is the verdict."""
    table, body = table_request(
        frame,
        dimensions,
        value,
        rows=rows,
        holding=holding,
        weight=weight,
        hierarchies=hierarchies,
        total=total,
        suppressed=suppressed,
        rules=rules,
        profile=profile,
        counts=counts,
    )
    reply = _service(client).audit(body, time_limit=time_limit)
    audited = {tuple(c["key"]): c for c in reply["cells"]}

    def status(key: tuple[str, ...]) -> str:
        c = audited.get(key)
        if c is None:
            return "published"
        return "primary" if c["sensitive"] else "secondary" if c["suppressed"] else "published"

    keys = table.all_keys()
    return _result(table, ((k, status(k), None) for k in keys), dict(reply), reply)


def sensitivity(
    frame: pd.DataFrame,
    dimensions: Sequence[str],
    value: str,
    *,
    holding: str | None = None,
    weight: str | None = None,
    rules: Any = None,
    profile: str | None = None,
    client: Routes | None = None,
) -> pd.DataFrame:
    """Judge each cell of microdata ``frame`` by ``POST /v1/sensitivity`` (no structure,
    no margins): one row per cell with ``status`` (``safe``, ``unsafe``, ``empty``),
    ``sensitive``, the rules that fired, the total, the number of contributors and the
    protection levels (as the reply gives them)."""
    pd = _pandas()
    table = Table(frame, dimensions, value, rows="contributions", holding=holding, weight=weight)
    body: dict[str, Any] = {
        "cells": [{"key": c["key"], "contributions": c["contributions"]} for c in table.cells]
    }
    reply = _service(client).sensitivity(body, rules=rules, profile=profile)
    records = []
    for c in reply["cells"]:
        record: dict[str, Any] = dict(zip(table.names, c["key"], strict=True))
        fired = c.get("fired")
        record.update(
            status=c["status"],
            sensitive=c["sensitive"],
            fired=";".join(fired) if fired is not None else None,
            total=c.get("total"),
            count=c.get("count"),
            upper_protection=c.get("upper_protection"),
            lower_protection=c.get("lower_protection"),
        )
        records.append(record)
    result = pd.DataFrame.from_records(
        records,
        columns=[
            *table.names,
            "status",
            "sensitive",
            "fired",
            "total",
            "count",
            "upper_protection",
            "lower_protection",
        ],
    )
    result.attrs["reply"] = reply
    return result
