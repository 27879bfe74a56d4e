"""Brute-force oracle for the audit of aggregations of suppressed cells.

Independent of ``service``: exact rational arithmetic (``fractions.Fraction``), plain
Python lists, no numpy in the logic (numpy arrays are accepted as input and converted).
It implements seed 002 (002_788aa7300c10c9e0.txt):

* section 3, eq. (3.6)-(3.7): an *aggregation* is ``v = sum_k mu_k a[k, :]`` for
  relations ``a x = 0``; its coefficients on the suppressed cells are
  ``lam_i = v_i`` and its value is fixed by the published cells;
* section 4, Operational criterion 2: a table is safe iff every aggregation is safe under
  the rule applied to single cells;
* section 5: the rule is applied to the *absolute contributions*
  ``X^r = sum_i |lam_i x_i^r|`` (holdings: one respondent id in several cells is one
  respondent), e.g. eq. (5.4) ``q sum_{r>=3} X^[r] <= p X^[1]``.

Cells in ``derived`` (suppressed cells the intruder can compute exactly) count as
published: their coefficient is dropped from ``lam``.

Rules are tuples: ``("p_percent", p)``, ``("pq", p, q)``, ``("frequency", n)``,
``("threshold", t)``; and, for coalitions of ``c`` respondents (seed 003 B.1.a-b),
``("p_percent", p, c)`` and ``("pq", p, q, c)`` (``c = 1`` is the plain rule), and the
(n,k)-dominance rule ``("dominance", n, k)`` (seed 003 B.1.c, seed 000
eq-dominance-formula). Several rules at once (seed 003 B.1.d, an aggregation is sensitive
when any rule fires): :func:`first_sensitive`; the minimum frequency rule over every real
``mu``, not only +-1: :func:`frequency_witness`. Under the replicate sampling weights of
seed 000, every rule over every real ``mu``: :func:`replicate_witness`.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections import defaultdict
from decimal import Decimal
from fractions import Fraction

__all__ = [
    "grid_relations",
    "grid_cell",
    "enumerate_sensitive",
    "in_row_space",
    "is_sensitive",
    "any_sensitive",
    "first_sensitive",
    "frequency_witness",
    "circuits",
    "replicate_judge",
    "replicate_witness",
]

LIMIT = 10**6


def _exact(x, *, limit: bool = False) -> int | Fraction:
    """Exact value of ``x``: ``int`` if integral (faster, still exact), else ``Fraction``.
    Floats are taken as exact binary rationals, or with ``limit`` as
    ``Fraction(x).limit_denominator(10**6)``."""
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Rational):
        f = Fraction(x.numerator, x.denominator)
    elif isinstance(x, (str, Decimal)):
        f = Fraction(x)
    else:
        f = Fraction(float(x))
        f = f.limit_denominator(LIMIT) if limit else f
    return f.numerator if f.denominator == 1 else f


def _matrix(a) -> list[list[int | Fraction]]:
    if hasattr(a, "toarray"):  # scipy.sparse
        a = a.toarray()
    return [[_exact(v) for v in row] for row in a]


def _absolute(contributions) -> list[list[tuple[object, int | Fraction]]]:
    """``contributions`` with exact absolute amounts."""
    return [[(r, abs(_exact(v))) for r, v in cell] for cell in contributions or ()]


def _free_cells(suppressed, derived) -> list[int]:
    """Indices of suppressed cells that are not derived (the set S of seed 002 sec. 3)."""
    if (
        getattr(derived, "dtype", None) is not None
        and derived.dtype.kind == "b"
        or (len(derived) and all(isinstance(d, bool) for d in derived))
    ):  # a mask
        derived = [i for i, d in enumerate(derived) if d]
    derived = {int(i) for i in derived}
    return [j for j, s in enumerate(suppressed) if s and j not in derived]


def _lam_dict(lam) -> dict[int, int | Fraction]:
    """Nonzero coefficients of ``lam`` (a dict cell->coef or a sequence over all cells)."""
    items = lam.items() if isinstance(lam, dict) else enumerate(lam)
    out = {int(i): _exact(c, limit=True) for i, c in items}
    return {i: c for i, c in out.items() if c}


def _direction(lam) -> frozenset:
    """``|lam|`` up to a positive factor, hashable (aggregations are defined up to a
    constant factor, seed 002 sec. 3)."""
    values = list(lam.values())
    if all(isinstance(v, int) for v in values):
        g = math.gcd(*values)
        return frozenset((j, abs(v) // g) for j, v in lam.items())
    top = max(abs(v) for v in values)
    return frozenset((j, Fraction(abs(v)) / top) for j, v in lam.items())


def _rank(rows) -> int:
    """Rank by exact Gaussian elimination."""
    return len(_reduced(rows))


def grid_cell(i: int, j: int, c: int) -> int:
    """Index of cell (row ``i``, column ``j``) in the (r+1) x (c+1) grid of
    :func:`grid_relations` (row-major; row ``r`` / column ``c`` are the totals)."""
    return i * (c + 1) + j


def grid_relations(r: int, c: int) -> list[list[int]]:
    """Relations ``a x = 0`` of an r x c table with margins (seed 002 sec. 3, Tables 1-7).

    Cells form an (r+1) x (c+1) grid numbered row-major, total row and total column last.
    One relation per grid row (``sum_j x[i, j] - x[i, c] = 0``, i = 0..r), then one per
    grid column (``sum_i x[i, j] - x[r, j] = 0``, j = 0..c).
    """
    n = (r + 1) * (c + 1)

    def relation(parts, total):
        row = [0] * n
        for k in parts:
            row[k] = 1
        row[total] = -1
        return row

    return [
        relation([grid_cell(i, j, c) for j in range(c)], grid_cell(i, c, c)) for i in range(r + 1)
    ] + [relation([grid_cell(i, j, c) for i in range(r)], grid_cell(r, j, c)) for j in range(c + 1)]


def _to_atoms(lam, atoms):
    """``phi = G^T lam`` with ``atoms[i]`` the ``(atom, coefficient)`` pairs of cell ``i``
    (a margin is the sum of its leaves); ``None`` keeps every cell an atom of its own."""
    if atoms is None:
        return lam
    phi = defaultdict(int)
    for i, coef in lam.items():
        for atom, g in atoms[i]:
            phi[atom] += coef * _exact(g)
    return {a: v for a, v in phi.items() if v}


def is_sensitive(lam, contributions, rule, counts=None, atoms=None) -> tuple[bool, object]:
    """Judge one aggregation exactly (seed 002 sections 3 and 5).

    ``lam``: coefficients on the suppressed cells (dict cell->coef or a sequence over all
    cells; floats become ``Fraction(x).limit_denominator(10**6)``). ``contributions[i]``:
    list of ``(respondent_id, amount)`` of cell ``i``; the
    same id in several cells is one respondent (a holding, seed 002 sec. 5). Absolute
    contribution ``X^r = sum_i |lam_i| |x_i^r|``; ``X^[1] >= X^[2] >= ...`` are the
    nonzero ones sorted, ``T = sum_r X^r`` (missing ``X^[2]`` counts as 0).

    Returns ``(sensitive, measure)``:

    * ``("p_percent", p)``: measure ``X^[1] - 100/p (T - X^[1] - X^[2])`` (Fraction),
      sensitive iff ``> 0`` (so ``T = 0`` is never sensitive);
    * ``("pq", p, q)``: measure ``X^[1] - q/p (T - X^[1] - X^[2])``, sensitive iff
      ``>= 0`` (seed 002 eq. 5.4) *and* ``T > 0``: an aggregation without any respondent
      contribution is not judged (seed 002 sec. 2 would call it unsafe);
    * ``("p_percent", p, c)``, ``("pq", p, q, c)``: coalitions of ``c`` respondents
      (seed 003 B.1.a-b): ``X^[2] + ... + X^[c+1]`` subtracted instead of ``X^[2]``;
    * ``("dominance", n, k)``: measure ``X^[1] + ... + X^[n] - k/(100-k) (T - X^[1] - ...
      - X^[n])`` (seed 003 B.1.c), sensitive iff ``> 0``, i.e. the ``n`` largest hold
      more than ``k`` percent of ``T`` (seed 000 eq-dominance-formula);
    * ``("frequency", n)``: measure = number of respondents with ``X^r > 0``, sensitive
      iff ``0 < measure < n``;
    * ``("threshold", t)``: measure = ``sum counts[i]`` over cells with ``lam_i != 0``
      (respondents distinct across cells), sensitive iff ``0 < measure < t``.

    With ``atoms`` (see :func:`_to_atoms`) the aggregation is judged on its atoms: ``lam``
    becomes ``phi = G^T lam`` and ``contributions`` / ``counts`` are indexed by atom.
    """
    return _judge(_to_atoms(_lam_dict(lam), atoms), _absolute(contributions), rule, counts)


def _judge(lam, absolute, rule, counts):
    """:func:`is_sensitive` on exact ``lam`` and :func:`_absolute` contributions."""
    kind = rule[0]
    if kind == "threshold":
        if counts is None:
            raise ValueError("the threshold rule needs counts")
        count = sum(int(counts[i]) for i in lam if lam[i])
        return 0 < count < rule[1], count
    x = defaultdict(int)
    for i, coef in lam.items():
        for r, amount in absolute[i]:
            x[r] += abs(coef) * amount
    xs = sorted((v for v in x.values() if v > 0), reverse=True)
    if kind == "frequency":
        return 0 < len(xs) < rule[1], len(xs)
    total = sum(xs)
    if kind == "dominance":
        n, k = rule[1], Fraction(_exact(rule[2]))
        top = sum(xs[:n])
        measure = top - k / (100 - k) * (total - top)
        return measure > 0, measure
    if kind not in ("p_percent", "pq"):
        raise ValueError(f"unknown rule {rule!r}")
    # A coalition of c respondents subtracts X^[2] .. X^[c+1] (c = 1: the plain rule).
    extra = rule[2:] if kind == "p_percent" else rule[3:]
    c = int(extra[0]) if extra else 1
    x1, x2 = (xs + [0, 0])[:2]
    p = Fraction(_exact(rule[1]))
    ratio = 100 / p if kind == "p_percent" else _exact(rule[2]) / p
    subtracted = x1 + x2 if c == 1 else sum(xs[: c + 1])
    measure = x1 - ratio * (total - subtracted)  # a Fraction
    if kind == "p_percent":
        return measure > 0, measure
    return total > 0 and measure >= 0, measure


def enumerate_sensitive(
    a,
    suppressed,
    contributions,
    rule,
    *,
    derived=(),
    counts=None,
    max_relations: int = 10,
    atoms=None,
) -> list[tuple[dict[int, Fraction], object]]:
    """All sensitive aggregations with ``mu`` in ``{-1, 0, 1}^K`` (seed 002 secs. 3, 5).

    ``a``: relations (rows) x cells, ``a x = 0``; ``suppressed``: boolean mask over cells;
    ``derived``: indices (or a boolean mask) of suppressed cells counted as published.
    ``contributions``: as in :func:`is_sensitive` (may be None for the threshold rule).
    The K relations are those touching a suppressed non-derived cell; ``K >
    max_relations`` raises ValueError. For each ``mu`` (one of ``mu``, ``-mu`` tried),
    ``lam_i = sum_k mu_k a[k, i]`` on suppressed non-derived cells ``i``; all-zero ``lam``
    is skipped, and so is ``lam`` whose ``|lam|`` is a multiple of one already seen (the
    measures depend on ``|lam|`` only and scale with it; aggregations are defined up to a
    constant factor, seed 002 sec. 3). Returns ``[(lam as {cell: Fraction}, measure)]``
    for the sensitive ones, judged by :func:`is_sensitive` (on atoms when ``atoms`` is
    given; an aggregation whose atoms all cancel is no aggregation). Only +-1 combinations of
    relations are covered: a bounded brute force, not the general MIP of seed 002 sec. 6.
    """
    absolute = _absolute(contributions)
    out = []
    for lam, phi in _pm1_aggregations(a, suppressed, derived, max_relations, atoms):
        sensitive, measure = _judge(phi, absolute, rule, counts)
        if sensitive:
            out.append(({j: Fraction(v) for j, v in lam.items()}, measure))
    return out


def _pm1_aggregations(a, suppressed, derived, max_relations: int, atoms):
    """``(lam, phi)`` of every aggregation with ``mu`` in ``{-1, 0, 1}^K`` over the K
    relations touching a suppressed non-derived cell, one per direction of ``|phi|``
    (:func:`enumerate_sensitive`); ``K > max_relations`` raises ValueError."""
    free = _free_cells(suppressed, derived)
    # each relation touching S, as its nonzero (cell, coefficient) pairs on S
    touching = [pairs for row in _matrix(a) if (pairs := [(j, row[j]) for j in free if row[j]])]
    if len(touching) > max_relations:
        raise ValueError(f"{len(touching)} relations > max_relations={max_relations}")
    seen = set()
    for mu in itertools.product((0, 1, -1), repeat=len(touching)):
        if next((m for m in mu if m), 1) < 0:  # -mu gives the same |lam|
            continue
        sums: dict = defaultdict(int)
        for m, pairs in zip(mu, touching):
            for j, coef in pairs if m else ():
                sums[j] += m * coef
        lam = {j: v for j, v in sums.items() if v}
        phi = _to_atoms(lam, atoms)
        if not phi:
            continue
        key = _direction(phi)
        if key in seen:
            continue
        seen.add(key)
        yield lam, phi


def any_sensitive(
    a, suppressed, contributions, rule, *, derived=(), counts=None, max_relations: int = 10
) -> bool:
    """``bool(enumerate_sensitive(...))``: is the table unsafe by Operational criterion 2
    (seed 002 sec. 4) among the +-1 aggregations (seed 002 secs. 3 and 5)?"""
    return bool(
        enumerate_sensitive(
            a,
            suppressed,
            contributions,
            rule,
            derived=derived,
            counts=counts,
            max_relations=max_relations,
        )
    )


def in_row_space(a, suppressed, lam, *, derived=()) -> bool:
    """Is ``lam`` an aggregation, i.e. ``lam = (mu^T a)[S]`` for some rational ``mu``?

    Seed 002 sec. 3: aggregations are combinations ``sum_k mu_k a[k, :]`` of relations
    with coefficients ``lam_i`` on suppressed cells (any real ``mu``, eq. 3.7 and the
    scaling remark); sec. 5 judges them. ``S`` = suppressed and not derived cells.
    ``lam``: dict cell->coef or sequence over all cells; floats are converted with
    ``Fraction(x).limit_denominator(10**6)``. A nonzero coefficient off ``S`` gives
    False. Decided exactly: ``rank(a[:, S]) == rank(a[:, S] with lam[S] appended)``.
    """
    rows = _matrix(a)
    free = _free_cells(suppressed, derived)
    lam = _lam_dict(lam)
    if not set(lam) <= set(free):
        return False
    sub = [[row[j] for j in free] for row in rows]
    target = [lam.get(j, Fraction(0)) for j in free]
    return _rank(sub) == _rank(sub + [target])


def first_sensitive(
    a,
    suppressed,
    contributions,
    rules,
    *,
    derived=(),
    counts=None,
    max_relations: int = 10,
    atoms=None,
) -> tuple[dict[int, Fraction], int, object] | None:
    """The first sensitive +-1 aggregation under any of several ``rules`` (seed 003
    B.1.d: a cell or aggregation is sensitive when any rule fires), as
    ``(lam as {cell: Fraction}, index of the rule, measure)``; ``None`` when every one is
    safe under every rule. The same enumeration as :func:`enumerate_sensitive` (same
    arguments, ``rules`` a sequence of rule tuples), stopping at the first hit.
    """
    absolute = _absolute(contributions)
    for lam, phi in _pm1_aggregations(a, suppressed, derived, max_relations, atoms):
        for k, rule in enumerate(rules):
            sensitive, measure = _judge(phi, absolute, rule, counts)
            if sensitive:
                return {j: Fraction(v) for j, v in lam.items()}, k, measure
    return None


def frequency_witness(
    a, suppressed, contributions, n, *, derived=(), atoms=None, budget: int = 20000
) -> tuple[list, list] | None:
    """An aggregation with ``0 < N < n`` respondents (the minimum frequency rule ``n``),
    over *every* real ``mu`` (not only +-1), or ``None`` when there is none.

    The respondents of ``phi = G^T lam`` are those of the atoms with ``phi_a != 0``
    (absolute contributions do not cancel), so it suffices to know which atom sets ``U``
    (each with respondents, all together fewer than ``n``) are the nonzero atoms of some
    aggregation, up to atoms without any contribution (``Z``), which may be anything:
    there is one iff ``rank(C[:, N \\ U]) < rank(C[:, N])``, ``C`` the relations on the
    atoms of the free cells and ``N`` the atoms with contributions. Exact ranks
    (Fractions). Returns ``(U, respondents)``; raises ValueError past ``budget`` sets.
    Arguments as for :func:`enumerate_sensitive`.
    """
    rows = _matrix(a)
    columns = _atom_columns(rows, _free_cells(suppressed, derived), atoms)
    absolute = _absolute(contributions)
    respondents = {atom: frozenset(r for r, v in absolute[atom] if v) for atom in columns}
    with_contributions = [atom for atom in columns if respondents[atom]]
    small = sorted(atom for atom in with_contributions if len(respondents[atom]) < n)

    def rank(cols):
        return _rank([[columns[c][k] for c in cols] for k in range(len(rows))]) if cols else 0

    full = rank(with_contributions)
    tried = 0
    stack: list[tuple[int, tuple, frozenset]] = [(0, (), frozenset())]
    while stack:
        start, chosen, resp = stack.pop()
        if chosen:
            tried += 1
            if tried > budget:
                raise ValueError(f"more than {budget} atom sets")
            rest = [c for c in with_contributions if c not in chosen]
            if rank(rest) < full:
                return list(chosen), sorted(resp, key=str)
        for i in range(start, len(small)):
            more = resp | respondents[small[i]]
            if len(more) < n:
                stack.append((i + 1, (*chosen, small[i]), more))
    return None


def _atom_columns(rows, free, atoms) -> dict:
    """The relations on the atoms of the free cells: ``{atom: C[:, atom]}`` with
    ``C[k][atom] = sum_j a[k, j] G[j, atom]`` over the free cells ``j``, nonzero columns
    only (``phi = mu^T C`` is an aggregation's atom vector, seed 002 sec. 3)."""
    if atoms is None:
        atoms = [[(i, 1)] for i in range(len(rows[0]) if rows else 0)]
    columns: dict = defaultdict(lambda: [0] * len(rows))
    for j in free:
        for atom, g in atoms[j]:
            for k, row in enumerate(rows):
                if row[j]:
                    columns[atom][k] += row[j] * _exact(g)
    return {atom: col for atom, col in columns.items() if any(col)}


def _reduced(rows) -> list[list[Fraction]]:
    """The nonzero rows of the reduced row echelon form (exact)."""
    m = [[Fraction(v) for v in r] for r in rows]
    rank = 0
    for col in range(len(m[0]) if m else 0):
        piv = next((i for i in range(rank, len(m)) if m[i][col]), None)
        if piv is None:
            continue
        m[rank], m[piv] = m[piv], m[rank]
        m[rank] = [x / m[rank][col] for x in m[rank]]
        for i in range(len(m)):
            if i != rank and m[i][col]:
                f = m[i][col]
                m[i] = [x - f * y for x, y in zip(m[i], m[rank])]
        rank += 1
    return m[:rank]


def _nullspace(rows, d: int) -> list[list[Fraction]]:
    """A basis of ``{c in Q^d : r . c = 0 for every row r}`` (exact)."""
    red = _reduced(rows) if rows else []
    pivots = [next(j for j, v in enumerate(r) if v) for r in red]
    out = []
    for free in (j for j in range(d) if j not in pivots):
        c = [Fraction(0)] * d
        c[free] = Fraction(1)
        for r, p in zip(red, pivots):
            c[p] = -r[free]
        out.append(c)
    return out


def circuits(a, suppressed, *, derived=(), atoms=None, max_atoms: int = 12) -> list[dict]:
    """The elementary vectors (circuits) of the aggregations' space on the atoms, one per
    minimal support, as ``{atom: Fraction}`` scaled to ``max |phi| = 1``.

    Aggregations are ``phi = mu^T C`` (:func:`_atom_columns`), a linear space ``V``; its
    circuits are the nonzero vectors of minimal support. Supports ``U`` are tried by
    increasing size: the vectors of ``V`` vanishing off ``U`` are ``c^T R`` with ``R`` a
    basis of ``V`` and ``c`` in the null space of ``R``'s columns off ``U``; ``U`` is a
    circuit's support when that space is not 0 and ``U`` holds no smaller circuit's (then
    it is one-dimensional and the vector's support is all of ``U``, checked). Every
    vector of ``V`` is a sum of circuits *conformal* to it (signs agree, supports within
    its support; Rockafellar, "The elementary vectors of a subspace of R^N", 1969).
    Raises ValueError with more than ``max_atoms`` atoms."""
    rows = _matrix(a)
    columns = _atom_columns(rows, _free_cells(suppressed, derived), atoms)
    names = sorted(columns)
    if len(names) > max_atoms:
        raise ValueError(f"{len(names)} atoms > max_atoms={max_atoms}")
    basis = _reduced([[columns[c][k] for c in names] for k in range(len(rows))])
    d, n = len(basis), len(names)
    found: list[frozenset] = []
    out = []
    for size in range(1, n + 1):
        for support in itertools.combinations(range(n), size):
            inside = frozenset(support)
            if any(f <= inside for f in found):
                continue
            off = [j for j in range(n) if j not in inside]
            null = _nullspace([[basis[i][j] for i in range(d)] for j in off], d)
            if not null:
                continue
            assert len(null) == 1, "a smaller circuit lies within"
            phi = [sum((null[0][i] * basis[i][j] for i in range(d)), Fraction(0)) for j in range(n)]
            assert {j for j in range(n) if phi[j]} == inside
            top = max(abs(v) for v in phi)
            found.append(inside)
            out.append({names[j]: phi[j] / top for j in support})
    return out


def replicate_judge(phi, observations, rule) -> tuple[bool, object]:
    """Judge the aggregation ``phi`` (``{atom: coefficient}``) under the replicate
    sampling weights of seed 000 ("Sampling weights"): an observation ``x`` of weight
    ``w`` stands for ``w`` contributions of ``x``, and the ``s``-th largest contribution
    is the mass of the sorted, replicated sequence in ``[s-1, s)`` (for fractional
    weights, a weight-proportional share of each observation there). The aggregation is
    judged as a cell (seed 002 secs. 4-5) whose observations are ``|phi_a| |x|``, weight
    ``w`` unchanged, over its atoms ``a``; ``N`` is the sum of their weights.

    ``observations[a]``: ``(value, weight)`` pairs of atom ``a`` (exact: pass decimal
    weights as strings). Rules as in :func:`is_sensitive` (``"frequency"``, ``"p_percent"``,
    ``"pq"`` with optional coalition ``c``, ``"dominance"``), on the slots ``X^[s]`` and
    ``T``; returns ``(sensitive, measure)``, the measure ``N`` for the frequency rule."""
    pooled = [
        (abs(_exact(coef)) * abs(_exact(x)), _exact(w))
        for atom, coef in phi.items()
        for x, w in observations[atom]
        if coef
    ]
    count = sum((w for _, w in pooled), Fraction(0))
    if count <= 0:
        return False, count  # no contributor: nothing to protect
    kind = rule[0]
    if kind == "frequency":
        return count < rule[1], count
    pooled.sort(key=lambda o: -o[0])
    total = sum((x * w for x, w in pooled), Fraction(0))
    slots, start = [Fraction(0)] * 4, Fraction(0)
    for x, w in pooled:
        for s in range(len(slots)):
            share = min(start + w, s + 1) - max(start, s)
            if share > 0:
                slots[s] += share * x
        start += w
    if kind == "dominance":
        n, k = rule[1], Fraction(_exact(rule[2]))
        top = sum(slots[:n])
        measure = top - k / (100 - k) * (total - top)
        return measure > 0, measure
    extra = rule[2:] if kind == "p_percent" else rule[3:]
    c = int(extra[0]) if extra else 1
    p = Fraction(_exact(rule[1]))
    ratio = 100 / p if kind == "p_percent" else _exact(rule[2]) / p
    measure = slots[0] - ratio * (total - sum(slots[: c + 1]))
    if kind == "p_percent":
        return measure > 0, measure
    return total > 0 and measure >= 0, measure


def replicate_witness(
    a, suppressed, observations, rules, *, derived=(), atoms=None, max_atoms: int = 12
) -> tuple[dict, int, object] | None:
    """A sensitive aggregation under replicate sampling weights, over every real ``mu``,
    as ``(phi on the atoms, index of the rule, measure)``, or ``None`` when there is none
    (seed 002 sec. 4, Operational criterion 2; :func:`replicate_judge`).

    Only the circuits (:func:`circuits`) are judged, which decides every aggregation:
    take ``phi`` and a conformal decomposition ``phi = sum_k c_k`` into circuits, so
    ``|phi| = sum_k |c_k|``. ``N`` is a sum over the atoms of the support, so some
    ``c_k`` nonzero on an atom with observations has ``0 < N(c_k) <= N(phi)``. The slot
    measures are ``tau T + sum_s (b_s - b_{s+1}) top_s`` with ``tau < 0``, ``b`` non-
    increasing and ``top_s`` the largest mass-``s`` part of the pooled sequence, a
    maximum of functions linear in ``|phi|``: convex and positively homogeneous in
    ``|phi|``, so ``S(phi) <= sum_k S(c_k)``, and ``S(phi) > 0`` (``>= 0``) needs some
    ``S(c_k) > 0`` (``>= 0``)."""
    for phi in circuits(a, suppressed, derived=derived, atoms=atoms, max_atoms=max_atoms):
        for k, rule in enumerate(rules):
            sensitive, measure = replicate_judge(phi, observations, rule)
            if sensitive:
                return phi, k, measure
    return None
