"""The audit and both suppression methods against independent oracles on the table shapes,
rules and contributions the narrower brute-force tests of ``test_aggregations.py`` do not
draw: 3-D tables, two-level hierarchies (crossed with a flat dimension or with another
hierarchy), leaves without contributions, holdings spread over two or three leaves, the
(n,k)-dominance rule, p% and (p,q) with coalitions, the minimum frequency rule and pairs
of rules (seed 002 sections 3-6, seed 003 B.1).

The oracles share nothing with ``service``:

* the primary verdicts and protection levels, recomputed exactly
  (:func:`tests.bruteforce.is_sensitive` on each cell's leaves);
* the feasibility intervals, one fresh LP per bound (:func:`tests.reference.brute_force`);
  cells whose interval is a point are the derived ones (published, seed 002 sec. 3);
* the +-1 enumeration of :func:`tests.bruteforce.first_sensitive` (exact Fractions) when
  at most ``ENUMERATE_UP_TO`` relations touch the hidden cells;
* over every real ``mu``, whatever the number of relations: the elementary vectors
  (minimal supports) of the aggregations' space on the leaves, where every rule here
  reaches its most sensitive aggregation (:func:`oracle_circuits`), each re-judged
  exactly before it counts;
* where there are too many of those, the MIP of seed 002 section 6 written here from the
  seed (:func:`oracle_mip`, ``scipy.optimize.milp``, normalised to ``T = 1``), whose
  optimum, when it says sensitive, is turned into a rational ``mu`` and re-judged
  exactly; it also checks the elementary vectors in
  :func:`test_the_oracles_agree_with_each_other`;
* for the minimum frequency rule, the exact support search of
  :func:`tests.bruteforce.frequency_witness` (every real ``mu``).

``hypothesis.event`` records which shapes, rules, verdicts and oracles each example
really exercised (``--hypothesis-show-statistics``).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from fractions import Fraction
from typing import Any, cast

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, note, settings
from hypothesis import strategies as st
from scipy.optimize import Bounds, LinearConstraint, milp

from service.sdc import magnitudes, primary
from service.sdc.audit import audit_pattern
from service.sdc.magnitudes import Contributions
from service.sdc.problem import TableProblem
from service.sdc.rules import Dominance, MinimumFrequency, PPercent, PriorPosterior
from service.sdc.suppress import cell_costs, suppress
from service.sdc.table import Hierarchy, Table
from service.sdc.unions import UnionSource

from . import bruteforce
from .reference import brute_force as lp_intervals

#: Most relations touching the hidden cells for which the +-1 enumeration runs (3^8 / 2
#: combinations); past it the elementary vectors (or the MIP) and the support search
#: decide alone.
ENUMERATE_UP_TO = 8
#: Seconds for one oracle MIP; one that does not finish is counted (event), not judged.
MIP_SECONDS = 10.0
#: The oracle's optimum above which an aggregation is sensitive (T = 1).
MIP_EPS = 1e-7

SHAPES = ["2d", "3d", "hier", "hierhier"]
#: No example database (nothing written into the tree), no deadline (HiGHS on a shared
#: machine), and the health checks off: examples are slow by design.
SETTINGS = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))


# -- cases ---------------------------------------------------------------------------


def _two_level(name: str, groups, prefix: str) -> Hierarchy:
    children = {"T": [f"{prefix}{g}" for g in range(len(groups))]}
    for g, k in enumerate(groups):
        children[f"{prefix}{g}"] = [f"{prefix}{g}_{i}" for i in range(k)]
    return Hierarchy.from_children(name, children)


def _flat(name: str, k: int) -> Hierarchy:
    return Hierarchy.flat(name, [f"{name}{i}" for i in range(k)], "T")


def build_table(dims) -> Table:
    """``dims``: per dimension ``("flat", k)`` or ``("two_level", (sizes of the groups))``."""
    out = []
    for d, (kind, arg) in enumerate(dims):
        name = "xyz"[d]
        out.append(_flat(name, arg) if kind == "flat" else _two_level(name, arg, name))
    return Table(out)


def oracle_rule(rule) -> tuple:
    """The :mod:`tests.bruteforce` tuple of a service rule."""
    if isinstance(rule, PPercent):
        return ("p_percent", rule.p, rule.c)
    if isinstance(rule, PriorPosterior):
        return ("pq", rule.p, rule.q, rule.c)
    if isinstance(rule, Dominance):
        return ("dominance", rule.n, rule.k)
    return ("frequency", rule.n)


def rule_name(rule) -> str:
    if isinstance(rule, PPercent):
        return "p%" if rule.c == 1 else f"p%c{rule.c}"
    if isinstance(rule, PriorPosterior):
        return "pq" if rule.c == 1 else f"pqc{rule.c}"
    if isinstance(rule, Dominance):
        return f"({rule.n},k)"
    return "freq"


class WideCase:
    """A table, its leaves' contributions ``(respondent id, amount)`` (a holding is one id
    in several leaves) and a rule set; every cell (margins too) pools its leaves'
    contributions. The oracle judges on leaves (``atoms``), as the service does when every
    leaf is known."""

    def __init__(self, shape: str, dims, leaves: dict, rules: tuple):
        self.shape, self.dims, self.leaves, self.rules = shape, dims, leaves, rules
        t = self.t = build_table(dims)
        n = t.n_cells
        leaf_cells = np.flatnonzero(t.is_leaf)
        g = t.aggregation.tocsr()  # cells x leaves
        self.atoms = [
            [(int(leaf_cells[j]), 1) for j in g.indices[g.indptr[i] : g.indptr[i + 1]]]
            for i in range(n)
        ]
        own = {t.cell_index(k): lst for k, lst in leaves.items()}
        self.per_cell = [[rc for leaf, _ in self.atoms[i] for rc in own[leaf]] for i in range(n)]
        cell = np.array([i for i, lst in enumerate(self.per_cell) for _ in lst], dtype=np.int64)
        value = np.array([float(a) for lst in self.per_cell for _, a in lst])
        holding = np.array([r for lst in self.per_cell for r, _ in lst], dtype=np.int64)
        self.ruleset = primary.RuleSet(tuple(rules))
        self.c = Contributions(cell, value, holding)
        self.m = magnitudes.from_contributions(
            n, cell, value, holding=holding, depth=self.ruleset.depth
        )
        self.verdict = primary.assess(self.m, self.ruleset)
        self.source = UnionSource(self.m, self.ruleset, contributions=self.c)
        self.oracle_rules = [oracle_rule(r) for r in rules]
        self.a = t.relations.toarray()
        # The oracle's own figures: exact cell values, verdicts and protection levels.
        self.values = np.array([float(sum(a for _, a in lst)) for lst in self.per_cell])
        self.sensitive, self.level = primary_oracle(self)

    def __repr__(self) -> str:
        return (
            f"WideCase({self.shape!r}, {self.dims!r}, {self.leaves!r}, "
            f"({', '.join(map(repr, self.rules))},))"
        )

    def problem(self) -> TableProblem:
        v = self.verdict
        return TableProblem.of(
            self.t,
            self.m.value,
            v.sensitive,
            v.upper_protection,
            v.lower_protection,
            unions=self.source,
        )

    @property
    def rule_names(self) -> str:
        return "+".join(rule_name(r) for r in self.rules)


def primary_oracle(case: WideCase) -> tuple[np.ndarray, np.ndarray]:
    """Each cell judged exactly on its leaves under every rule (seed 003 B.1.d: sensitive
    when any fires) and its upper (= lower) protection level: the largest among the
    concentration rules that fire (seed 000 table "Upper protection levels": ``p/100 S``
    for p%, ``p/q S`` for (p,q), ``(100-k)/k S`` for (n,k)), 0 when only the frequency
    rule fires."""
    n = case.t.n_cells
    sensitive = np.zeros(n, bool)
    level = np.zeros(n)
    for i in range(n):
        lam = {i: 1}
        best = Fraction(0)
        for rule in case.oracle_rules:
            fires, s = bruteforce.is_sensitive(lam, case.per_cell, rule, atoms=case.atoms)
            if not fires:
                continue
            sensitive[i] = True
            s = cast(Fraction, s)  # the concentration rules' measure (frequency: a count)
            kind = rule[0]
            if kind == "p_percent":
                best = max(best, Fraction(rule[1]) / 100 * s)
            elif kind == "pq":
                best = max(best, Fraction(rule[1]) / Fraction(rule[2]) * s)
            elif kind == "dominance":
                k = Fraction(rule[2])
                best = max(best, (100 - k) / k * s)
        level[i] = float(best)
    return sensitive, level


RULES = {
    "p%": st.builds(
        PPercent, st.sampled_from([10.0, 15.0, 20.0, 25.0]), st.sampled_from([1, 1, 2])
    ),
    "pq": st.builds(
        PriorPosterior,
        st.sampled_from([10.0, 20.0]),
        st.sampled_from([40.0, 60.0, 100.0]),
        st.sampled_from([1, 1, 2]),
    ),
    "nk": st.builds(Dominance, st.integers(1, 3), st.sampled_from([60.0, 70.0, 75.0, 80.0, 90.0])),
    "freq": st.builds(MinimumFrequency, st.integers(2, 4)),
}
#: One rule or a pair (a cell or an aggregation is sensitive when any fires).
RULE_SETS = [
    ("p%",),
    ("pq",),
    ("nk",),
    ("freq",),
    ("p%", "nk"),
    ("p%", "freq"),
    ("pq", "nk"),
    ("nk", "freq"),
    ("pq", "freq"),
    ("p%", "pq"),
]


@st.composite
def wide_tables(draw, shapes=("2d", "3d", "hier", "hierhier")):
    shape = draw(st.sampled_from(shapes))
    if shape == "2d":
        dims = [("flat", draw(st.integers(2, 3))), ("flat", draw(st.integers(2, 4)))]
    elif shape == "3d":
        dims = [("flat", k) for k in draw(st.sampled_from([(2, 2, 2), (2, 2, 2), (3, 2, 2)]))]
    elif shape == "hier":
        groups = tuple(draw(st.lists(st.integers(1, 3), min_size=2, max_size=2)))
        dims = [("two_level", groups), ("flat", draw(st.integers(2, 3)))]
    else:
        dims = [
            ("two_level", tuple(draw(st.lists(st.integers(1, 2), min_size=2, max_size=2))))
            for _ in range(2)
        ]
    t = build_table(dims)
    keys = [t.key(int(c)) for c in np.flatnonzero(t.is_leaf)]
    skewed = draw(st.booleans())
    amount = st.sampled_from([1, 3, 10, 30, 100, 300, 1000]) if skewed else st.integers(1, 60)
    counts = st.sampled_from([0, 1, 1, 2, 2, 3, 4]) if draw(st.booleans()) else st.integers(1, 4)
    rid = iter(range(1000, 10**6))
    leaves = {k: [(next(rid), draw(amount)) for _ in range(draw(counts))] for k in keys}
    # Holdings: one respondent id (1, 2, 3) in two or three leaves, replacing a
    # contribution there or adding one.
    for h in range(draw(st.sampled_from([0, 1, 1, 2, 3]))):
        spread = draw(st.lists(st.sampled_from(keys), min_size=2, max_size=3, unique=True))
        for k in spread:
            lst = leaves[k]
            if lst and draw(st.booleans()):  # the largest: a holding that dominates
                j = max(range(len(lst)), key=lambda i: lst[i][1])
                lst[j] = (h + 1, lst[j][1])
            else:
                lst.append((h + 1, draw(amount)))
    kinds = draw(st.sampled_from(RULE_SETS))
    rules = tuple(draw(RULES[k]) for k in kinds)
    return WideCase(shape, dims, leaves, rules)


# -- oracles -------------------------------------------------------------------------


def oracle_intervals(case: WideCase, suppressed: np.ndarray):
    """The LP intervals of the suppressed cells and the cells among them that are a point
    (derived: the intruder computes them exactly)."""
    cells = np.flatnonzero(suppressed)
    iv = lp_intervals(case.t.relations, case.values, suppressed)
    x = case.values[cells]
    point = iv[:, 1] - iv[:, 0] <= 1e-7 * np.maximum(1.0, np.abs(x))
    return dict(zip(cells.tolist(), map(tuple, iv.tolist()))), set(cells[point].tolist())


def interval_failures(case: WideCase, suppressed, ivs, derived) -> list:
    """Sensitive cells published, derived, or with a bound nearer their value than 99% of
    the protection level (seed 000; seed 002 Operational criterion 1), by the oracle's own
    levels; a little more lenient than the service, so that round-off never fails it."""
    out: list[tuple] = []
    for i in np.flatnonzero(case.sensitive).tolist():
        if not suppressed[i]:
            out.append(("published", i))
            continue
        lo, hi = ivs[i]
        x, u = case.values[i], case.level[i]
        slack = 1e-6 * max(1.0, abs(x), u)
        if i in derived:
            out.append(("point", i, lo, hi))
        elif hi - x < 0.99 * u - slack or x - lo < 0.99 * u - slack:
            out.append(("too close", i, lo, x, hi, u))
        elif hi - lo < 0.99 * 2 * u - slack:
            out.append(("too narrow", i, lo, x, hi, u))
    return out


def _free_system(case: WideCase, suppressed, derived):
    """Free (hidden, not derived) cells, the relations touching them, and ``C``: those
    relations on the leaves (``phi = mu^T C``)."""
    free = [j for j in np.flatnonzero(suppressed).tolist() if j not in derived]
    rows = [k for k in range(len(case.a)) if case.a[k, free].any()]
    c = np.zeros((len(rows), case.t.n_cells))
    for r, k in enumerate(rows):
        for j in free:
            if case.a[k, j]:
                for leaf, g in case.atoms[j]:
                    c[r, leaf] += case.a[k, j] * g
    return free, rows, c


def _rational_witness(case: WideCase, mu, rows, free, rule):
    """``mu`` (floats) made rational and re-judged exactly: ``(lam, measure)`` of a
    sensitive aggregation, or None."""
    mu = np.asarray(mu) / max(np.abs(mu).max(), 1e-300)
    for den in (1, 2, 3, 4, 6, 12, 60, 10**3, 10**6, 10**9):
        q = [Fraction(float(v)).limit_denominator(den) for v in mu]
        lam: dict = defaultdict(Fraction)
        for k, m in zip(rows, q):
            if m:
                for j in free:
                    if case.a[k, j]:
                        lam[j] += m * int(case.a[k, j])
        lam = {j: v for j, v in lam.items() if v}
        if not lam:
            continue
        ok, s = bruteforce.is_sensitive(lam, case.per_cell, rule, atoms=case.atoms)
        if ok:
            return lam, s
    return None


def oracle_mip(case: WideCase, suppressed, derived, rule, seconds: float = MIP_SECONDS) -> tuple:
    """Seed 002 section 6 for one concentration rule, normalised to ``T = 1``: maximise
    the rule's measure ``S / T`` over every aggregation ``phi = mu^T C`` of the free
    cells, written as slots (``A_s`` the s-th largest absolute contribution ``X^r``, with
    weights ``1 + w, w, ..., w`` and ``- w T`` for p% and (p,q) with coalition ``c``;
    ``1, ..., 1`` and ``- k/100 T`` for (n,k)).

    Variables: ``mu`` (free), per leaf with contributions ``phi_a = p_a - n_a`` with a
    sign binary, per slot ``A_s`` and assignment binaries ``z_sr`` (each slot one
    respondent, each respondent one slot, ``A_s <= X^r + 1 - z_sr``). Leaves without
    contributions are unconstrained. Returns ``("sensitive", lam, measure)`` with an exact
    rational witness, ``("safe", optimum)``, ``("tie", optimum)`` (optimum within
    ``MIP_EPS`` of 0 and no exact witness), ``("unverified", optimum)`` or
    ``("limit", message)``.
    """
    kind = rule[0]
    if kind == "p_percent":
        w = 100.0 / rule[1]
        weights, tau = [1 + w] + [w] * rule[2], -w
    elif kind == "pq":
        w = rule[2] / rule[1]
        weights, tau = [1 + w] + [w] * rule[3], -w
    else:
        weights, tau = [1.0] * rule[1], -rule[2] / 100.0
    free, rows, c = _free_system(case, suppressed, derived)
    if not rows:
        return ("safe", None)
    pooled = []
    for a in range(case.t.n_cells):
        d: dict = defaultdict(float)
        for r, v in case.per_cell[a] if case.t.is_leaf[a] else ():
            d[r] += abs(float(v))
        pooled.append(d)
    # Leaves whose contributions are all 0 (a shift's bound) add to no X^r: as if empty.
    pos = [a for a in range(c.shape[1]) if c[:, a].any() and any(pooled[a].values())]
    if not pos:
        return ("safe", None)
    cat = {a: sum(pooled[a].values()) for a in pos}
    resp = sorted({r for a in pos for r in pooled[a]})
    rid = {r: i for i, r in enumerate(resp)}
    n_mu, n_pos, n_resp, n_slot = len(rows), len(pos), len(resp), len(weights)
    o_p, o_n = n_mu, n_mu + n_pos
    o_s, o_a = n_mu + 2 * n_pos, n_mu + 3 * n_pos
    o_z = o_a + n_slot
    nv = o_z + n_slot * n_resp
    mat, lo, hi = [], [], []

    def row(entries, low, high):
        v = np.zeros(nv)
        for i, coef in entries:
            v[i] += coef
        mat.append(v)
        lo.append(low)
        hi.append(high)

    for t, a in enumerate(pos):
        row([(k, c[k, a]) for k in range(n_mu) if c[k, a]] + [(o_p + t, -1), (o_n + t, 1)], 0, 0)
        row([(o_p + t, cat[a]), (o_s + t, -1)], -np.inf, 0)  # p_a > 0 only if s_a = 1
        row([(o_n + t, cat[a]), (o_s + t, 1)], -np.inf, 1)  # n_a > 0 only if s_a = 0
    row([(o + t, cat[a]) for t, a in enumerate(pos) for o in (o_p, o_n)], 1, 1)  # T = 1
    x_r: dict = defaultdict(list)  # X^r = sum_a x_a^r (p_a + n_a)
    for t, a in enumerate(pos):
        for r, v in pooled[a].items():
            x_r[r] += [(o_p + t, v), (o_n + t, v)]
    for s in range(n_slot):
        row([(o_z + s * n_resp + i, 1) for i in range(n_resp)], -np.inf, 1)
        row([(o_a + s, 1)] + [(o_z + s * n_resp + i, -1) for i in range(n_resp)], -np.inf, 0)
        for r in resp:
            z = o_z + s * n_resp + rid[r]
            row([(o_a + s, 1), (z, 1)] + [(i, -v) for i, v in x_r[r]], -np.inf, 1)
    for r in resp:
        row([(o_z + s * n_resp + rid[r], 1) for s in range(n_slot)], -np.inf, 1)
    lb, ub = np.zeros(nv), np.ones(nv)
    lb[:n_mu], ub[:n_mu] = -np.inf, np.inf
    for t, a in enumerate(pos):
        ub[o_p + t] = ub[o_n + t] = 1.0 / cat[a]
    integrality = np.zeros(nv)
    integrality[o_s : o_s + n_pos] = 1
    integrality[o_z:] = 1
    cost = np.zeros(nv)
    cost[o_a : o_a + n_slot] = -np.array(weights)
    res = milp(
        cost,
        constraints=LinearConstraint(np.array(mat), lo, hi),
        integrality=integrality,
        bounds=Bounds(lb, ub),
        options={"time_limit": seconds, "mip_rel_gap": 1e-9},
    )
    if res.status == 2:  # infeasible: no aggregation with T > 0
        return ("safe", None)
    if res.status != 0 or res.x is None:
        return ("limit", res.message)
    opt = tau - res.fun
    if opt < -MIP_EPS:
        return ("safe", opt)
    hit = _rational_witness(case, res.x[:n_mu], rows, free, rule)
    if hit is not None:
        return ("sensitive", *hit)
    return ("unverified" if opt > MIP_EPS else "tie", opt)


def _exact_null_vector(rows) -> list[Fraction]:
    """A nonzero ``y`` with ``y^T rows = 0`` (``rows``: exact, one list per ``y``
    entry), by Gaussian elimination on the transpose."""
    m = [[Fraction(rows[i][j]) for i in range(len(rows))] for j in range(len(rows[0]))]
    n = len(rows)
    pivots, r = [], 0
    for col in range(n):
        piv = next((i for i in range(r, len(m)) if m[i][col]), None)
        if piv is None:
            continue
        m[r], m[piv] = m[piv], m[r]
        inv = 1 / m[r][col]
        m[r] = [v * inv for v in m[r]]
        for i in range(len(m)):
            if i != r and m[i][col]:
                f = m[i][col]
                m[i] = [a - f * b for a, b in zip(m[i], m[r])]
        pivots.append(col)
        r += 1
    free_col = next(c for c in range(n) if c not in pivots)
    y = [Fraction(0)] * n
    y[free_col] = Fraction(1)
    for i, col in enumerate(pivots):
        y[col] = -m[i][free_col]
    return y


def _float_measure(phi: dict, case: WideCase, rule) -> float:
    """``S / T`` (or the respondent count for the frequency rule) of ``phi`` on leaves, in
    floating point: only to pick the circuits the exact judge then looks at."""
    x: dict = defaultdict(float)
    for a, v in phi.items():
        for r, amount in case.per_cell[a]:
            x[r] += abs(v) * amount
    xs = sorted((v for v in x.values() if v > 0), reverse=True)
    if rule[0] == "frequency":
        return float(len(xs))
    total = sum(xs)
    if total == 0:
        # No respondent above 0 (contributions at a shift's bound, y = 0): nothing to
        # protect, as tests.bruteforce.is_sensitive judges it.
        return -math.inf
    if rule[0] == "dominance":
        return (sum(xs[: rule[1]]) - rule[2] / 100 * total) / total
    c = rule[2] if rule[0] == "p_percent" else rule[3]
    w = 100 / rule[1] if rule[0] == "p_percent" else rule[2] / rule[1]
    return (xs[0] - w * (total - sum(xs[: c + 1]))) / total


def oracle_circuits(case: WideCase, suppressed, derived, budget: int = 100_000):
    """Every aggregation's sensitivity, decided on the elementary vectors (circuits) of
    the aggregations' space on the leaves with contributions.

    Under every rule here the measure of ``phi`` is a convex, positively homogeneous
    function of ``phi`` on each orthant (the absolute contributions ``X^r`` are linear
    there, and a weighted sum of the largest with non-increasing weights is a maximum of
    linear functions), so ``max S / T`` over the aggregations in one orthant is reached
    at an extreme ray of (aggregations) n (orthant): an elementary vector, i.e. one of
    minimal support (Rockafellar). For the minimum frequency rule, every aggregation's
    support contains an elementary vector's, whose respondents are fewer. So a table is
    safe iff every elementary vector is. Leaves without contributions do not enter ``X``
    and are projected out. The supports are found by a depth-first search over sets
    ``U`` of leaves (in increasing order) while the others still span (float ranks of a
    small integer matrix); each set where they stop spanning carries a one-dimensional
    space, whose vector is elementary. A vector that the float measure puts near or past
    the rule's threshold is recomputed exactly (Fractions) and judged by
    :func:`tests.bruteforce.is_sensitive`.

    Returns ``(("circuit", rule, lam, measure) or None, number of circuits)``, or
    ``("budget", nodes)`` past ``budget`` search nodes."""
    free, rows, c = _free_system(case, suppressed, derived)
    leaves = [a for a in range(c.shape[1]) if c[:, a].any() and case.per_cell[a]]
    if not leaves:
        return None, 0
    m = c[:, leaves]
    basis: list[int] = []  # independent relations spanning the same space
    for k in range(len(m)):
        if np.linalg.matrix_rank(m[basis + [k]]) > len(basis):
            basis.append(k)
    mb = m[basis]
    rk, n = len(basis), len(leaves)
    seen: set = set()
    circuits = []

    def found(phi):
        support = frozenset(np.flatnonzero(np.abs(phi) > 1e-9 * np.abs(phi).max()).tolist())
        if support not in seen:
            seen.add(support)
            circuits.append((support, phi))

    # Two ways to the same supports; the search takes the one with less work.
    by_hyperplanes = math.comb(n, rk - 1)
    by_search = sum(math.comb(n, i) for i in range(n - rk + 1))
    if min(by_hyperplanes, by_search) > budget:
        return "budget", min(by_hyperplanes, by_search)
    if by_hyperplanes <= by_search:
        # Each support is the complement of a hyperplane (rank rk - 1) of the leaves'
        # columns; rk - 1 independent columns of it fix the vector: y^T mb = 0 there.
        for cols in itertools.combinations(range(n), rk - 1):
            u, sv, _ = np.linalg.svd(mb[:, list(cols)])
            if rk > 1 and sv.min() < 1e-9 * sv.max():
                continue
            found(u[:, -1] @ mb)
    else:
        stack: list[tuple[int, tuple]] = [(0, ())]
        while stack:  # sets of hidden leaves whose complement still spans
            start, hidden = stack.pop()
            rest = [j for j in range(n) if j not in hidden]
            sub = mb[:, rest]
            # Hiding one more leaf stops the rest spanning iff it is a coloop of ``sub``:
            # its row of the null space basis is 0; then ``sub^T y`` = that unit vector
            # has a solution, and ``y^T mb`` is the elementary vector (its support: the
            # hidden leaves and that one, or part of them).
            _, _, vt = np.linalg.svd(sub)
            coloop = np.abs(vt[rk:]).max(axis=0, initial=0.0) < 1e-9
            inverse = np.linalg.pinv(sub.T)
            for e in range(start, n):
                i = rest.index(e)
                if coloop[i]:
                    found(inverse[:, i] @ mb)
                else:
                    stack.append((e + 1, (*hidden, e)))
    for support, phi in circuits:
        fphi = {leaves[j]: phi[j] for j in support}
        for rule in case.oracle_rules:
            f = _float_measure(fphi, case, rule)
            near = 0 < f < rule[1] if rule[0] == "frequency" else f > -1e-7
            if not near:
                continue
            rest = [j for j in range(n) if j not in support]
            y = _exact_null_vector(
                [[int(v) for v in mb[i, rest]] for i in range(rk)] if rest else [[0]] * rk
            )
            lam: dict = defaultdict(Fraction)
            for yi, k in zip(y, basis):
                for j in free:
                    if case.a[rows[k], j]:
                        lam[j] += yi * int(case.a[rows[k], j])
            lam = {j: v for j, v in lam.items() if v}
            ok, s = bruteforce.is_sensitive(lam, case.per_cell, rule, atoms=case.atoms)
            if ok:
                return ("circuit", rule, lam, s), len(circuits)
    return None, len(circuits)


def _enumerated(case: WideCase, suppressed, derived):
    """The +-1 enumeration's first sensitive aggregation under any of the case's rules
    (:func:`tests.bruteforce.first_sensitive`), or ``None``."""
    return bruteforce.first_sensitive(
        case.a,
        suppressed,
        case.per_cell,
        case.oracle_rules,
        derived=sorted(derived),
        max_relations=ENUMERATE_UP_TO,
        atoms=case.atoms,
    )


def _support_witness(case: WideCase, suppressed, derived, n: int):
    """An aggregation with fewer than ``n`` respondents over every real ``mu``
    (:func:`tests.bruteforce.frequency_witness`), or ``None``."""
    return bruteforce.frequency_witness(
        case.a, suppressed, case.per_cell, n, derived=sorted(derived), atoms=case.atoms
    )


def oracle_aggregations(case: WideCase, suppressed, derived):
    """A sensitive aggregation some oracle finds, as ``(oracle, rule, lam, measure)``, or
    None; and the oracles that ran (for ``event``): the +-1 enumeration when few
    relations touch the hidden cells, the elementary vectors (every real ``mu``), or the
    MIP where there are too many of those, and the support search for the minimum
    frequency rule."""
    free, rows, _ = _free_system(case, suppressed, derived)
    ran = []
    if len(rows) <= ENUMERATE_UP_TO:
        ran.append("enum")
        hit = _enumerated(case, suppressed, derived)
        if hit is not None:
            return ("enum", case.oracle_rules[hit[1]], hit[0], hit[2]), ran
    got, _ = oracle_circuits(case, suppressed, derived)
    if got != "budget":
        ran.append("circuits")
        if got is not None:
            return got, ran
    for rule in case.oracle_rules:
        if rule[0] == "frequency":
            ran.append("support")
            found = _support_witness(case, suppressed, derived, rule[1])
            if found is not None:
                return ("support", rule, found[0], found[1]), ran
        elif got == "budget":
            mip = oracle_mip(case, suppressed, derived, rule)
            ran.append("mip" if mip[0] in ("safe", "sensitive") else f"mip {mip[0]}")
            if mip[0] == "sensitive":
                return ("mip", rule, mip[1], mip[2]), ran
    return None, ran


def check_intervals(case: WideCase, suppressed, audit, ivs, derived) -> None:
    """The audit's feasibility intervals are the LP's, and its flags agree with the
    oracle's levels wherever the two are clearly apart (whatever the verdict)."""
    iv = audit.intervals
    for pos, i in enumerate(iv.cells.tolist()):
        if not iv.certified[pos]:
            event("an interval not certified")
            continue
        lo, hi = ivs[i]
        scale = 1e-6 * max(1.0, abs(case.values[i]), abs(lo), abs(hi) if np.isfinite(hi) else 0)
        assert abs(iv.lower[pos] - lo) <= scale, (i, iv.lower[pos], lo)
        assert iv.upper[pos] == hi or abs(iv.upper[pos] - hi) <= scale, (i, iv.upper[pos], hi)
        if not case.sensitive[i]:
            continue
        x, u = case.values[i], case.level[i]
        slack = 1e-6 * max(1.0, abs(x), u)
        gap, width = min(hi - x, x - lo), hi - lo
        if i in derived or gap < 0.99 * u - slack or width < 0.99 * 2 * u - slack:
            assert not audit.protection.protected[pos], ("protected", i, lo, x, hi, u)
        elif gap >= u + slack and width >= 2 * u + slack:
            assert audit.protection.protected[pos], ("not protected", i, lo, x, hi, u)


def _strict_interval_failures(case: WideCase, suppressed, ivs, derived) -> list:
    """Sensitive cells published, or with a bound nearer than their level plus round-off
    (the service flags at 99% of it): what an ``unsafe`` verdict by intervals needs."""
    out = []
    for i in np.flatnonzero(case.sensitive).tolist():
        if not suppressed[i]:
            out.append(i)
            continue
        lo, hi = ivs[i]
        x, u = case.values[i], case.level[i]
        tol = 1e-6 * max(1.0, abs(x), u)
        if i in derived or min(hi - x, x - lo) < u + tol or hi - lo < 2 * u + tol:
            out.append(i)
    return out


def check_audit(case: WideCase, suppressed, audit, origin: str) -> None:
    """The audit of ``suppressed`` against the oracles, whatever its verdict: its
    intervals and flags; its aggregations (a sensitive one must be in the row space and
    sensitive to the exact judge; when it calls them all safe, no oracle may find one);
    and the verdict (``safe`` only if every oracle agrees; ``unsafe`` for a reason the
    oracles confirm)."""
    event(f"{origin} {case.shape}: {audit.verdict}")
    ivs, derived = oracle_intervals(case, suppressed)
    check_intervals(case, suppressed, audit, ivs, derived)
    agg = audit.aggregations
    assert agg is not None
    if set(agg.derived.tolist()) != derived:
        event(f"{origin}: derived cells differ from the oracle's")
    if agg.status == "sensitive":
        w = agg.worst
        lam = np.zeros(case.t.n_cells)
        lam[w.cells] = w.coefficients
        assert bruteforce.in_row_space(case.a, suppressed, lam, derived=agg.derived.tolist())
        rule = case.oracle_rules[w.rule]
        ok, _ = bruteforce.is_sensitive(lam, case.per_cell, rule, atoms=case.atoms)
        assert ok, (w, rule)
        event(f"{origin}: aggregation found ({w.found_by}), confirmed")
    elif agg.status == "safe":
        hit, ran = oracle_aggregations(case, suppressed, derived)
        assert hit is None, f"aggregations safe, but the {hit[0]} oracle finds {hit[1:]}"
        event(f"{origin}: aggregations safe, confirmed by {'+'.join(sorted(set(ran))) or '-'}")
    else:
        event(f"{origin}: aggregations {agg.status}")
    if audit.verdict == "safe":
        assert agg.status == "safe", agg.message
        bad = interval_failures(case, suppressed, ivs, derived)
        assert not bad, f"safe, but the LP intervals fail: {bad}"
        event(f"{origin}: safe on {case.shape}, confirmed")
    elif audit.verdict == "unsafe" and agg.status != "sensitive":
        assert _strict_interval_failures(case, suppressed, ivs, derived), audit.reasons
        event(f"{origin}: unsafe by intervals, confirmed")


def check_primary(case: WideCase) -> None:
    assert np.array_equal(case.verdict.sensitive, case.sensitive), np.flatnonzero(
        case.verdict.sensitive != case.sensitive
    )
    assert np.allclose(case.verdict.upper_protection, case.level, rtol=1e-9, atol=1e-9)


# -- tests ---------------------------------------------------------------------------


@st.composite
def patterns(draw, case: WideCase, modes=("random", "random", "leaves", "leaves", "drop", "add")):
    """A pattern to audit: the sensitive cells and random others (``random``); the
    fast method's pattern with one secondary cell published (``drop``) or one more cell
    hidden (``add``), near the edge between safe and unsafe; or every leaf and at most two
    margins (``leaves``), where the published margins make many aggregations."""
    n = case.t.n_cells
    mode = draw(st.sampled_from(modes))
    if mode == "leaves":
        y = case.sensitive | case.t.is_leaf
        margins = np.flatnonzero(~y).tolist()
        y[draw(st.lists(st.sampled_from(margins), max_size=2)) if margins else []] = True
        return y, mode
    if mode != "random":
        r = suppress(
            case.problem(), cost=cell_costs("value", case.m.value), method="fast", time_limit=5.0
        )
        secondary = np.flatnonzero(r.secondary).tolist()
        others = np.flatnonzero(~r.suppressed).tolist()
        if mode == "drop" and secondary:
            y = r.suppressed.copy()
            y[draw(st.sampled_from(secondary))] = False
            return y, mode
        if mode == "add" and r.suppressed.any() and others:
            y = r.suppressed.copy()
            y[draw(st.sampled_from(others))] = True
            return y, mode
        mode = "random"
    extra = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=max(2, n // 2)))
    y = case.sensitive.copy()
    y[extra] = True
    return y, mode


@pytest.mark.long
@pytest.mark.parametrize("shape", SHAPES)
@settings(SETTINGS, max_examples=20)
@given(data=st.data())
def test_audit_verdicts_agree_with_the_oracles(shape, data):
    """Patterns from :func:`patterns` (random, every leaf, or one cell off the fast
    method's): the primary verdicts and levels are the oracle's; the audit's intervals
    are the LP's and its flags agree with them; its aggregation check, whatever the
    verdict, either shows a witness in the row space that the exact judge finds
    sensitive or finds none where no oracle does; a ``safe`` verdict passes every oracle
    and an ``unsafe`` one has a reason the oracles confirm."""
    case = data.draw(wide_tables((shape,)))
    note(repr(case))
    check_primary(case)
    sens = case.sensitive
    assume(sens.any())
    suppressed, mode = data.draw(patterns(case))
    note(f"pattern ({mode}) {np.flatnonzero(suppressed).tolist()}")
    audit = audit_pattern(case.problem(), suppressed, time_limit=30.0)
    event(f"audit {mode}: {audit.verdict}")
    event(f"rules: {case.rule_names}")
    check_audit(case, suppressed, audit, "audit")


@pytest.mark.long
@pytest.mark.parametrize("shape", SHAPES)
@settings(SETTINGS, max_examples=6)
@given(data=st.data(), method=st.sampled_from(["fast", "exact"]))
def test_every_returned_safe_pattern_passes_the_oracles(shape, data, method):
    """Both suppression methods on 2-D, 3-D and hierarchical tables: whatever pattern they
    return as safe passes every oracle; ``time_limit`` and ``no_safe_pattern`` are
    allowed outcomes (counted)."""
    case = data.draw(wide_tables((shape,)))
    note(repr(case))
    check_primary(case)
    assume(case.sensitive.any())
    r = suppress(
        case.problem(), cost=cell_costs("value", case.m.value), method=method, time_limit=8.0
    )
    event(f"{method} {case.shape}: status {r.status}")
    event(f"rules: {case.rule_names}")
    if r.status in ("optimal", "feasible"):
        assert r.audit is not None and r.audit.verdict == "safe", r.message
    if r.audit is None or r.audit.verdict != "safe" or not r.suppressed.any():
        return
    note(f"pattern {np.flatnonzero(r.suppressed).tolist()}")
    check_audit(case, r.suppressed, r.audit, method)


@pytest.mark.long
@settings(SETTINGS, max_examples=10)
@given(data=st.data(), shape=st.sampled_from(SHAPES))
def test_the_oracles_agree_with_each_other(data, shape):
    """The elementary-vector oracle, which the two tests above lean on past the +-1
    enumeration, against the enumeration, the support search and the seed 002 section 6
    MIP on random patterns: whatever sensitive aggregation one of them finds, the
    elementary vectors hold one too; and where they find one, the MIP's optimum is not
    below 0."""
    case = data.draw(wide_tables((shape,)))
    note(repr(case))
    assume(case.sensitive.any())
    suppressed, _ = data.draw(patterns(case, modes=("random", "leaves")))
    note(f"pattern {np.flatnonzero(suppressed).tolist()}")
    _, derived = oracle_intervals(case, suppressed)
    circuits, _ = oracle_circuits(case, suppressed, derived)
    assume(circuits != "budget")
    event(f"{shape}: {'a sensitive' if circuits else 'no sensitive'} elementary vector")
    free, rows, _ = _free_system(case, suppressed, derived)
    others: dict[str, Any] = {}
    ran: set[str] = set()
    if len(rows) <= ENUMERATE_UP_TO:
        others["enum"] = _enumerated(case, suppressed, derived)
    for rule in case.oracle_rules:
        if rule[0] == "frequency":
            ran.add("support")
            others["support"] = _support_witness(case, suppressed, derived, rule[1])
            continue
        got = oracle_mip(case, suppressed, derived, rule, seconds=2.0)
        event(f"mip: {got[0]}")
        ran.add("mip")
        if got[0] == "sensitive":
            others[f"mip {rule}"] = got
        elif circuits is not None and circuits[1] == rule and got[0] in ("safe", "unverified"):
            assert got[1] is not None and got[1] >= -MIP_EPS, (circuits, got)
    found = [k for k, v in others.items() if v is not None]
    ran |= {"enum"} if "enum" in others else set()
    event(f"{shape}: checked against {'+'.join(sorted(ran))}")
    if found:
        assert circuits is not None, (found, others)
