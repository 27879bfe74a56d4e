"""The audit of a suppression pattern (``/v1/audit``): intervals, flags, unions, verdict.
The mathematics is in :mod:`service.sdc.audit`."""

from __future__ import annotations

import time

import numpy as np

from schemas.tables import AuditRequest
from service.sdc.audit import PatternAudit, audit_pattern

from .errors import TABLE_FIELDS, core_errors
from .limits import REPLY_SECONDS, REPLY_SHARE
from .tables import ResolvedTableRequest, TableInputs, checked_table_inputs, table_problem


def audit(
    body: AuditRequest, resolved: ResolvedTableRequest, diagnostics: bool
) -> tuple[dict, tuple[str, float]]:
    """The reply (an :class:`~schemas.tables.AuditReply`; without ``diagnostics`` the
    verdict and which cells are protected, :func:`decisions_only`) and how the interval
    solve ended (status, seconds) for the metrics. The audit gets ``time_limit`` less
    what reading the table and making the problem took (count tables' dominance
    conditions are pruned there, within half of the limit, :func:`table_problem`)."""
    started = time.perf_counter()
    inputs = checked_table_inputs(body, resolved)
    suppressed = np.zeros(inputs.space.n_cells, bool)
    suppressed[inputs.cell_of_request[[i for i, c in enumerate(body.cells) if c.suppressed]]] = True
    if inputs.published is not None:
        suppressed |= ~inputs.published  # the cover table's cells outside the linked tables
    problem = table_problem(
        inputs, body.structure.tolerance, deadline=started + resolved.time_limit
    )
    with core_errors(TABLE_FIELDS, inputs.request_of_cell):
        # Less the reply's reserve, as /v1/suppress: a 100,000-cell audit's reply took
        # 0.9 s, all of it past the limit until 2026-11-27.
        limit = resolved.time_limit
        left = limit - (time.perf_counter() - started) - min(REPLY_SECONDS, REPLY_SHARE * limit)
        result = audit_pattern(problem, suppressed, time_limit=max(left, 1e-3))
    reply = audit_reply(inputs, suppressed, result, resolved.time_limit, disclose=resolved.disclose)
    return (
        reply if diagnostics else decisions_only(reply),
        (result.intervals.status, result.intervals.seconds),
    )


def decisions_only(reply: dict) -> dict:
    """An audit reply for callers without diagnostics (the filter role): the verdict and
    which cells are protected (the reasons of a verdict that is not safe; notes on a safe
    one are for analysts)."""
    reasons = reply["reasons"] if reply["verdict"] != "safe" else []
    return {
        "verdict": reply["verdict"],
        "reasons": reasons,
        "unions_checked": reply["unions_checked"],
        "unions": None,
        "aggregations": None,
        "solver": None,
        "cells": [
            {k: c[k] for k in ("key", "suppressed", "sensitive", "protected")}
            for c in reply["cells"]
        ],
    }


def _bound(v: float) -> float | None:
    return None if not np.isfinite(v) else v


def audit_reply(
    inputs: TableInputs,
    suppressed: np.ndarray,
    result: PatternAudit,
    time_limit: float,
    *,
    disclose: bool,
) -> dict:
    """The reply object of an audit (also the suppression's ``audit``).

    Protection levels and missing amounts are left out when the profile does not disclose
    measures: with the contributions they reveal the rule's parameters.
    """
    iv, check = result.intervals, result.protection
    # Under the shift for negative values the audit ran on ``Y = X + N M``; the reply is
    # on the caller's scale (until 2026-11-27 /v1/audit's intervals were on the shifted
    # scale: [0, 230] for a cell whose interval is [-20, 210]).
    offset = inputs.scale_offset()
    upper_level, lower_level = inputs.reachable_levels()  # as judged (table_problem)
    at = {int(c): k for k, c in enumerate(iv.cells)}
    derived = set(result.derived.tolist())
    shown = np.flatnonzero(suppressed | inputs.sensitive)
    cells = []
    for c in shown.tolist():
        entry = {
            "key": list(inputs.space.key(c)),
            "suppressed": bool(suppressed[c]),
            "sensitive": bool(inputs.sensitive[c]),
        }
        k = at.get(c)
        if k is None:  # a sensitive cell left published
            entry["protected"] = False
        else:
            certified = bool(iv.certified[k])
            entry.update(
                protected=bool(check.protected[k]) if inputs.sensitive[c] else None,
                interval=[_bound(iv.lower[k] - offset[c]), _bound(iv.upper[k] - offset[c])]
                if certified
                else None,
                certified=certified,
            )
            if inputs.sensitive[c] and certified:
                entry["flags"] = {
                    "exact": bool(check.exact[k]),
                    "upper_too_close": bool(check.upper_too_close[k]),
                    "lower_too_close": bool(check.lower_too_close[k]),
                    "too_narrow": bool(check.too_narrow[k]),
                }
                if disclose:
                    entry["missing_upper"] = float(check.missing_upper[k])
                    entry["missing_lower"] = float(check.missing_lower[k])
        if disclose and inputs.sensitive[c]:
            entry["upper_protection"] = float(upper_level[c])
            entry["lower_protection"] = float(lower_level[c])
        if suppressed[c] and result.aggregations is not None:
            entry["derived"] = c in derived
        cells.append(entry)
    agg = result.aggregations
    return {
        "verdict": result.verdict,
        "reasons": list(result.reasons),
        "unions_checked": agg is not None and agg.status in ("safe", "sensitive"),
        "cells": cells,
        "unions": _unions(inputs, result.unions) if result.unions is not None else None,
        "aggregations": _aggregations(inputs, agg, disclose) if agg is not None else None,
        "solver": {
            "status": iv.status,
            "message": iv.message,
            "lp_solves": iv.n_lp_solves,
            "components": iv.n_components,
            "seconds": round(iv.seconds, 6),
            "time_limit": time_limit,
        },
    }


def _unions(inputs: TableInputs, u) -> list[dict]:
    out = []
    members = u.members.tocsr()
    offset = inputs.scale_offset()  # the caller's scale under the shift (audit_reply)
    for k in range(len(u.relation)):
        row = slice(members.indptr[k], members.indptr[k + 1])
        fired = [label for label, f in zip(inputs.rule_labels, u.fired[:, k]) if f]
        out.append(
            {
                "relation": inputs.space.describe_relation(int(u.relation[k])),
                "cells": inputs.cell_keys(members.indices[row]),
                "coefficients": members.data[row].tolist(),
                "value": float(u.value[k] - members.data[row] @ offset[members.indices[row]]),
                "checked": bool(u.checked[k]),
                "sensitive": bool(u.sensitive[k]),
                "fired": fired,
            }
        )
    return out


def _aggregations(inputs: TableInputs, agg, disclose: bool) -> dict:
    worst = agg.worst
    if worst is not None:
        offset = inputs.scale_offset()[np.asarray(worst.cells, dtype=np.int64)]
        worst = {
            "cells": inputs.cell_keys(worst.cells),
            "coefficients": [float(v) for v in worst.coefficients],
            "value": float(worst.value - np.asarray(worst.coefficients, dtype=float) @ offset),
            "rule": inputs.rule_labels[worst.rule],
            "measure": worst.measure if disclose else None,
            "found_by": worst.found_by,
        }
    return {
        "status": agg.status,
        "message": agg.message,
        "derived": inputs.cell_keys(agg.derived),
        "sensitive_groups": len(agg.found),
        "worst": worst,
        "groups": agg.groups,
        "screened": agg.screened,
        "mip_solves": agg.mip_solves,
        "seconds": round(agg.seconds, 6),
    }
