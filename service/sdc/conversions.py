"""Conversions between rule parameters (seeds 000, 003 and 004).

Each function is one formula of a seed. :func:`equivalents` assembles, for a given rule,
the rules the seeds relate it to, each with the direction of the relation:

``equivalent``
    The two rules flag the same cells (up to cells exactly on the boundary).
``more_protective``
    The returned rule flags every cell the given rule flags, and possibly more.
``less_protective``
    The given rule flags every cell the returned rule flags, and possibly more.
``relaxed_for_negative_values``
    The given rule's parameters relaxed for variables that can be negative (seed 004
    strategy 1; seed 000 "Negative contributions").
"""

from __future__ import annotations

from dataclasses import dataclass

#: The least percentage a rule parameter may be (p, k): the rules divide by it (``100/p``,
#: ``q/p``, ``100/k``, and ``p/f`` under relaxed parameters, f up to 1e6), and below about
#: 1e-304 the ratio is infinite: a (p,q) rule with p = 5e-324 read every cell as a tie
#: and called it sensitive (2026-11-27). A rule of p -> 0 never fires (seed 003 D, "if
#: p = 0 ... there are no sensitive cells"), so nothing is lost at 1e-12 (1e-9 is how
#: callers ask the filter to publish everything). The wire's rules (schemas.rules) and
#: the equivalents :func:`equivalents` returns hold to it.
MIN_PERCENT = 1e-12


def p_from_2k(k: float) -> float:
    """p of the p%-rule that replaces a (2,k)-dominance rule: ``p = 100 (100 - k) / k``.

    Seed 000, "How to obtain the p parameter?" (from ``k = 100 * 100 / (100 + p)``); seed
    003 D gives the same value as the p%-rule "closest to the (2,k) rule" that is less
    conservative. Any cell safe under (2,k) is safe under this p% (seed 000, proof A).
    """
    return 100.0 * (100.0 - k) / k


def k2_from_p_seed000(p: float) -> float:
    """``k = 100 * 100 / (100 + p)`` (seed 000, "p%-rule and dominance-rule"): the (2,k)
    rule that flags every cell the p%-rule flags (proof A)."""
    return 100.0 * 100.0 / (100.0 + p)


def p_star(p: float, q: float) -> float:
    """``p* = 100 p / q``: the (p,q) rule as a p%-rule with ``q* = 100`` (seed 000,
    eq-p-star; seed 004 eq. (1))."""
    return 100.0 * p / q


def k_star(k: float, q: float) -> float:
    """``(100 - k*)/100 = (100 - k)/q`` (seed 000, eq-k-star; seed 004 eq. (2))."""
    return 100.0 - 100.0 * (100.0 - k) / q


def p_relaxed(p: float, f: float) -> float:
    """``p_f = p / f`` for variables that can be negative, ``q = 100 f`` (seed 000,
    "Negative contributions"; seed 004 strategy 1)."""
    return p / f


def k_relaxed(k: float, f: float) -> float:
    """``k_f`` with ``(100 - k_f)/100 = (100 - k)/(100 f)`` (seed 000, "Negative
    contributions"; seed 004 strategy 1), i.e. ``k_f = 100 - (100 - k)/f``."""
    return k_star(k, 100.0 * f)


def k1_from_p(ratio: float) -> float:
    """``k_1 = 100 / (p/100 + 1)`` (seed 003 Table 1 and D): if the (1,k_1) measure is
    positive so is the p% measure. ``ratio`` is ``p/100`` (or ``p/q`` for the pq rule)."""
    return 100.0 / (ratio + 1.0)


def k2_from_p(ratio: float) -> float:
    """``k_2 = 200 / (p/100 + 2)`` (seed 003 Table 1 and D): if the (2,k_2) measure is
    positive so is the p% measure. ``ratio`` is ``p/100`` (or ``p/q``)."""
    return 200.0 / (ratio + 2.0)


def p_from_1k(k1: float) -> float:
    """``p/100 = 100/k_1 - 2`` (seed 003 D, "for a given value of k_1 we must have"): the
    p%-rule closest to the (1,k_1) rule among those that flag no cell the (1,k_1) rule
    leaves safe (``S^(1,k_1) >= S^p%``), i.e. less protective than (1,k_1).

    In seed 003 D's coordinates ``z_i = 100 x_i / T`` the p% boundary is chosen to meet
    the (1,k_1) boundary ``z_1 = k_1`` on the diagonal ``z_1 = z_2``, at ``(k_1, k_1)``:
    with ``z_2 <= min(z_1, 100 - z_1)`` every p%-sensitive cell then has ``z_1 > k_1``.
    That point is a possible cell only for ``k_1 < 50`` (``z_1 + z_2 <= 100``); for
    ``k_1 >= 50`` the formula gives ``p <= 0``, a rule that flags nothing (seed 003 D:
    "With k_1 = 75, the less conservative p-percent rule would have p = -66.7, which would
    result in no cell suppression"), so there is no such p%-rule. Example: (1,40) gives
    ``p = 50``. Seed 000 ("p%-rule and dominance-rule") says the same from the other side:
    a p%-rule replacing a (1,k) rule with the (2,k) formula flags many more cells, and p has
    to be reduced to keep to the cells the (1,k) rule flagged.
    """
    return 100.0 * (100.0 / k1 - 2.0)


def p_covering_1k(k1: float) -> float:
    """``p/100 = 100/k_1 - 1`` (seed 003 D): the least p%-rule that flags every cell the
    (1,k_1) rule flags."""
    return 100.0 * (100.0 / k1 - 1.0)


def p_covering_2k(k2: float) -> float:
    """``p/100 = 200/k_2 - 2`` (seed 003 D): the least p%-rule that flags every cell the
    (2,k_2) rule flags."""
    return 100.0 * (200.0 / k2 - 2.0)


@dataclass(frozen=True)
class Equivalent:
    """A rule related to the given one: ``rule`` is ``(type, parameters)``."""

    kind: str
    params: dict
    relation: str
    source: str


def equivalents(kind: str, params: dict, negative_factor: float | None = None) -> list[Equivalent]:
    return [e for e in _equivalents(kind, params, negative_factor) if _valid(e)]


def _equivalents(kind: str, params: dict, negative_factor: float | None) -> list[Equivalent]:
    """Rules the seeds relate to the rule ``kind`` with ``params``.

    Parameters
    ----------
    kind : {"dominance", "p_percent", "pq"}
    params : dict
        ``{"n", "k"}``, ``{"p"}`` or ``{"p", "q"}``, with ``"c"`` (coalition size) for
        the last two.
    negative_factor : float, optional
        ``f > 1``: return only the rule relaxed for negative values (seed 004 strategy 1).

    Returns
    -------
    list of Equivalent
        Only rules whose parameters are valid (``0 < p < 100``, ``0 < k < 100``).
    """
    out: list[Equivalent] = []
    neg = "relaxed_for_negative_values"
    if kind == "dominance":
        n, k = params["n"], params["k"]
        if negative_factor is not None:
            return [
                Equivalent(
                    "dominance",
                    {"n": n, "k": k_relaxed(k, negative_factor)},
                    neg,
                    "seed 000 Negative contributions; seed 004 strategy 1",
                )
            ]
        if n == 2:
            out.append(
                Equivalent(
                    "p_percent",
                    {"p": p_from_2k(k)},
                    "less_protective",
                    "seed 000 How to obtain the p parameter (proof A)",
                )
            )
            out.append(
                Equivalent("p_percent", {"p": p_covering_2k(k)}, "more_protective", "seed 003 D")
            )
        elif n == 1:
            if k < 50.0:  # no p%-rule less protective than (1,k) for k >= 50 (p <= 0)
                out.append(
                    Equivalent("p_percent", {"p": p_from_1k(k)}, "less_protective", "seed 003 D")
                )
            out.append(
                Equivalent("p_percent", {"p": p_covering_1k(k)}, "more_protective", "seed 003 D")
            )
    elif kind == "p_percent":
        p, c = params["p"], _coalition(params)
        if negative_factor is not None:
            return [
                Equivalent(
                    "p_percent",
                    {"p": p_relaxed(p, negative_factor), **c},
                    neg,
                    "seed 000 Negative contributions; seed 004 strategy 1",
                )
            ]
        out.append(
            Equivalent(
                "pq",
                {"p": p, "q": 100.0, **c},
                "equivalent",
                "seed 002 section 2; seed 000 The (p,q)-rule",
            )
        )
        if c:
            return out  # the dominance relations below are the seeds' for one intruder
        out.append(
            Equivalent(
                "dominance",
                {"n": 2, "k": k2_from_p_seed000(p)},
                "more_protective",
                "seed 000 p%-rule and dominance-rule (proof A)",
            )
        )
        out.append(
            Equivalent(
                "dominance",
                {"n": 1, "k": k1_from_p(p / 100.0)},
                "less_protective",
                "seed 003 B.1.d Table 1",
            )
        )
        out.append(
            Equivalent(
                "dominance",
                {"n": 2, "k": k2_from_p(p / 100.0)},
                "less_protective",
                "seed 003 B.1.d Table 1",
            )
        )
    elif kind == "pq":
        p, q, c = params["p"], params["q"], _coalition(params)
        if negative_factor is not None:
            return [
                Equivalent(
                    "pq", {"p": p, "q": q * negative_factor, **c}, neg, "seed 004 strategy 1"
                )
            ]
        out.append(
            Equivalent(
                "p_percent",
                {"p": p_star(p, q), **c},
                "equivalent",
                "seed 000 eq-p-star; seed 004 eq. (1)",
            )
        )
        if c:
            return out
        out.append(
            Equivalent(
                "dominance",
                {"n": 1, "k": k1_from_p(p / q)},
                "less_protective",
                "seed 003 B.1.d Table 1 (q/p)",
            )
        )
        out.append(
            Equivalent(
                "dominance",
                {"n": 2, "k": k2_from_p(p / q)},
                "less_protective",
                "seed 003 B.1.d Table 1 (q/p)",
            )
        )
    else:
        raise ValueError(f"no conversions for rule type {kind!r}")
    return out


def _coalition(params: dict) -> dict:
    """``{"c": c}`` for a coalition of more than one intruder, else ``{}``.

    The conversions between the p%- and (p,q)-rules keep the coalition (seed 003 B.1.a:
    ``c`` enters both measures the same way). The dominance relations (seed 000 proof A,
    seed 003 B.1.d Table 1) are derived for a single intruder, so for ``c > 1`` none is
    returned rather than one that flags different cells."""
    c = params.get("c", 1)
    return {"c": c} if c != 1 else {}


def _valid(e: Equivalent) -> bool:
    """Only rules the API accepts: MIN_PERCENT <= p, k < 100 and p < q <= 10000 (a p%-rule
    of 6e-8 relaxed by a factor of 551,983 for negative values is p = 1.1e-13, which the
    reply's schema refused: a 500 until 2026-11-27, found by schemathesis)."""
    value = e.params.get("p", e.params.get("k"))
    q = e.params.get("q", 100.0)
    return value is not None and MIN_PERCENT <= value < 100.0 and value < q <= 10_000.0
