"""Noise multipliers for microdata before tabulation (seed 003 B.4), deterministic per
respondent so that repeated queries see the same noise (seed 003 C).

Seed 003 B.4: every establishment gets a multiplier close to ``1 + d`` or ``1 - d`` (the
seed's example: ``d = 10 %``, multipliers near 1.1 or 0.9); the direction is drawn at
random per company (enterprise), so all establishments of one company are perturbed the
same way; within a company each establishment draws its multiplier from the half of the
distribution on the company's side; the half near ``1 - d`` is the "mirror image" of the
half near ``1 + d``, so the joint distribution is symmetric about 1 and every multiplier has
expectation 1 (the noise in a cell is the sum of its establishments' noise, expectation 0).

Readings chosen:

* Distribution: ``m = 1 + s (d + w (2 u - 1))`` with ``s = +1`` or ``-1`` (probability 1/2
  each) per enterprise and ``u`` uniform on ``[0, 1)`` per establishment, so ``m`` is
  uniform on ``[1 + d - w, 1 + d + w)`` or on the mirror interval ``(1 - d - w, 1 - d + w]``
  (``w`` = ``jitter``). The seed allows "any type of distribution"; the uniform is the
  simplest with the required mirror symmetry and bounded support. With ``0 <= w < d`` the
  two halves do not overlap, so every multiplier of an enterprise lies on its side of 1,
  and with ``d < 0.5`` every multiplier lies in ``(0, 2)``.
* "The overall distribution of the multipliers across all establishments within a company
  average the specified percent": met in expectation (the jitter has mean 0), not forced
  exactly per company. Centring the jitter within each company would make an
  establishment's multiplier depend on which other establishments a query includes, and
  the multiplier must depend on nothing but the respondent.
* Randomness is keyed, not drawn: ``s`` comes from ``F_direction(secret, enterprise_id)``
  and ``u`` from ``F_jitter(secret, establishment_id)``, where ``F_p`` is keyed BLAKE2b
  with an 8-byte digest and personalisation ``p`` (RFC 7693 keyed mode, a pseudo-random
  function like HMAC-SHA256 at a fifth of its cost, which matters on the online filter's
  path; the personalisation keeps the two uses apart; a secret longer than BLAKE2b's
  64-byte key is first hashed to 64 bytes); the digest is read big-endian, its top 53
  bits divided by ``2**53``
  (uniform on ``[0, 1)`` for a pseudo-random function); ``s = +1`` when that uniform is
  below 1/2. A respondent therefore gets the same multiplier in every query and every
  process, so averaging repeated or overlapping queries of an online query system (seed
  003 C, where the noise is likewise added to the microdata before any cell is computed)
  does not wash the noise out; another secret gives unrelated multipliers. Ids are
  hashed as the UTF-8 bytes of ``str(id)``.
* The uniforms of up to :data:`CACHE_SIZE` ids per key and personalisation are kept in
  process memory (a dict per key and personalisation, emptied when full): an online query
  system asks about the same respondents again and again, and the hash is most of the
  filter's per-request work. A request whose ids are all known reads them in one pass at
  C speed. The cache holds nothing the process does not already hold (the secret itself),
  and a different secret misses it.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Hashable, Sequence
from typing import TypeVar

import numpy as np

from .errors import InputError

# BLAKE2b personalisations (at most 16 bytes): the two uses of the key never share an input.
_DIRECTION = b"direction"
_JITTER = b"jitter"
#: An id :func:`factorize` numbers (text, or a tuple that tells namespaces apart).
_Id = TypeVar("_Id", bound=Hashable)


def checked_ids(ids, name: str) -> list[str]:
    """Ids as a list of str; ``InputError`` naming ``name`` otherwise."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (Sequence, np.ndarray)):
        raise InputError(f"{name} must be a list of ids", field=name)
    if isinstance(ids, list) and set(map(type, ids)) <= {str}:
        return ids  # the API's case: already text
    a = np.asarray(ids, dtype=object)
    if a.ndim != 1:
        raise InputError(f"{name} must be a flat list of ids", field=name)
    ok = np.fromiter(
        (isinstance(x, (str, int, np.integer)) and not isinstance(x, bool) for x in a),
        dtype=bool,
        count=a.size,
    )
    if not ok.all():
        raise InputError(
            f"an id in {name} is neither a string nor an integer",
            field=name,
            cell=int(np.flatnonzero(~ok)[0]),
        )
    return [str(x) for x in a.tolist()]


def factorize(ids: list[_Id]) -> tuple[list[_Id], np.ndarray]:
    """Distinct ids in order of first appearance, and each id's position among them (a
    dict does this in C; sorting strings with ``np.unique`` cost more than the hashing)."""
    distinct = list(dict.fromkeys(ids))
    position = dict(zip(distinct, range(len(distinct))))
    return distinct, np.fromiter(map(position.__getitem__, ids), np.int64, len(ids))


def prf_key(secret: bytes) -> bytes:
    """The BLAKE2b key for ``secret``: itself, or its 64-byte BLAKE2b hash when longer
    than the 64 bytes BLAKE2b takes as a key."""
    return secret if len(secret) <= 64 else hashlib.blake2b(secret).digest()


#: Ids whose uniforms stay cached per key and personalisation (about 100 bytes each).
CACHE_SIZE = 1 << 18
#: Keys and personalisations with a cache; more (a test's many secrets) start over.
_CACHED_KEYS = 8
_cache: dict[tuple[bytes, bytes], dict[str, float]] = {}


def _uniform(key: bytes, person: bytes, rid: str) -> float:
    """``F_person(key, rid)`` (keyed BLAKE2b, 8 bytes) read big-endian, its top 53 bits
    times ``2**-53``: a uniform on ``[0, 1)``."""
    digest = hashlib.blake2b(rid.encode("utf-8"), key=key, digest_size=8, person=person).digest()
    return (int.from_bytes(digest, "big") >> 11) * 2.0**-53


def _uniforms(secret: bytes, person: bytes, ids: list[str]) -> np.ndarray:
    """:func:`_uniform` of each id, from the cache when every id is in it."""
    key = prf_key(secret)
    cache = _cache.get((key, person))
    if cache is None:
        if len(_cache) >= _CACHED_KEYS:
            _cache.clear()
        cache = _cache[key, person] = {}
    try:
        return np.fromiter(map(cache.__getitem__, ids), np.float64, len(ids))
    except KeyError:
        pass
    uniform = functools.partial(_uniform, key, person)
    missing = [rid for rid in dict.fromkeys(ids) if rid not in cache]
    if len(cache) + len(missing) > CACHE_SIZE:
        cache.clear()  # (dict operations are atomic: pool threads may share it)
    cache.update(zip(missing, map(uniform, missing)))
    return np.fromiter(
        (cache[rid] if rid in cache else uniform(rid) for rid in ids), np.float64, len(ids)
    )


def checked_params(secret, d, jitter) -> tuple[bytes, float, float]:
    """``secret``, ``d`` and ``jitter`` as :func:`multipliers` uses them; ``InputError``
    naming the one out of range."""
    if not isinstance(secret, (bytes, bytearray)) or len(secret) == 0:
        raise InputError("secret must be non-empty bytes", field="secret")
    for name, v in (("d", d), ("jitter", jitter)):
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, float, np.integer, np.floating))
            or not np.isfinite(v)
        ):
            raise InputError(f"{name} must be a finite number", field=name)
    d, jitter = float(d), float(jitter)
    if not 0 < d < 0.5:
        raise InputError("d must be in (0, 0.5)", field="d")
    if not 0 <= jitter < d:
        raise InputError("jitter must be in [0, d)", field="jitter")
    return bytes(secret), d, jitter


def directions(enterprise_ids, secret: bytes) -> np.ndarray:
    """Direction of the noise of each enterprise, ``+1`` or ``-1`` (seed 003 B.4: "the
    direction of adding the noise to each responding company is randomly assigned").

    ``+1`` when the uniform from ``F_direction(secret, id)`` is below 1/2,
    so each direction has probability 1/2.

    Parameters
    ----------
    enterprise_ids : sequence of str or int
    secret : bytes

    Returns
    -------
    ndarray of float, shape (n,)
    """
    ent = checked_ids(enterprise_ids, "enterprise_ids")
    if not isinstance(secret, (bytes, bytearray)) or len(secret) == 0:
        raise InputError("secret must be non-empty bytes", field="secret")
    uniq, inverse = factorize(ent)
    u = _uniforms(bytes(secret), _DIRECTION, uniq)
    return np.where(u < 0.5, 1.0, -1.0)[inverse]


def multipliers(
    enterprise_ids, establishment_ids, secret: bytes, d: float, jitter: float
) -> np.ndarray:
    """Noise multiplier of each establishment (seed 003 B.4).

    ``m = 1 + s (d + jitter (2 u - 1))`` with ``s`` the enterprise's direction
    (:func:`directions`) and ``u`` the uniform from ``F_jitter(secret,
    establishment_id)``; see the module docstring for the distribution and why it is
    keyed. Each distinct id is hashed once.

    Parameters
    ----------
    enterprise_ids : sequence of str or int, length n
        Enterprise (company) of each establishment.
    establishment_ids : sequence of str or int, length n
        Establishment; an establishment listed twice gets the same multiplier twice.
    secret : bytes
        Key of the keyed hash; kept by the agency ("the exact percent to remain confidential").
    d : float
        Noise level, ``0 < d < 0.5`` (seed 003 B.4's example: 0.1).
    jitter : float
        Half-width of the uniform spread around ``1 +- d``, ``0 <= jitter < d``.

    Returns
    -------
    ndarray of float, shape (n,)
        Each in ``[1 + d - jitter, 1 + d + jitter]`` or ``[1 - d - jitter, 1 - d + jitter]``.

    Raises
    ------
    InputError
        ``field`` ``"enterprise_ids"`` / ``"establishment_ids"`` for ids that are not
        strings or integers, lists of different lengths, or an establishment listed under
        two enterprises (``cell`` is its position); ``"secret"``, ``"d"``, ``"jitter"`` for
        parameters out of range.
    """
    ent = checked_ids(enterprise_ids, "enterprise_ids")
    est = checked_ids(establishment_ids, "establishment_ids")
    if len(ent) != len(est):
        raise InputError(
            f"{len(est)} establishment ids for {len(ent)} enterprise ids", field="establishment_ids"
        )
    secret, d, jitter = checked_params(secret, d, jitter)
    est_uniq, est_inv = factorize(est)
    ent_uniq, ent_inv = (est_uniq, est_inv) if ent is est else factorize(ent)
    return factorized_multipliers(ent_uniq, ent_inv, est_uniq, est_inv, secret, d, jitter)


def factorized_multipliers(
    ent_uniq: list[str],
    ent_inv: np.ndarray,
    est_uniq: list[str],
    est_inv: np.ndarray,
    secret: bytes,
    d: float,
    jitter: float,
) -> np.ndarray:
    """:func:`multipliers` of ids already factorized (:func:`factorize`: distinct ids as
    text and each row's position among them), for callers that factorize them anyway
    (the online filter); parameters as :func:`checked_params` returns them. When the
    enterprises are the establishments themselves (``ent_inv is est_inv``) there is no
    clash to look for."""
    if ent_inv is not est_inv:
        _check_one_enterprise(ent_inv, est_inv, len(est_uniq))
    s = np.where(_uniforms(secret, _DIRECTION, ent_uniq) < 0.5, 1.0, -1.0)[ent_inv]
    u = _uniforms(secret, _JITTER, est_uniq)[est_inv]
    return 1.0 + s * (d + jitter * (2.0 * u - 1.0))


def _check_one_enterprise(ent_inv: np.ndarray, est_inv: np.ndarray, n_est: int) -> None:
    """One enterprise per establishment: the first enterprise seen for each establishment
    must be the enterprise of every row of it."""
    first_row = np.full(n_est, len(ent_inv), dtype=np.int64)
    np.minimum.at(first_row, est_inv, np.arange(len(ent_inv)))
    clash = ent_inv != ent_inv[first_row[est_inv]]
    if clash.any():
        row = int(np.flatnonzero(clash)[0])
        raise InputError(
            "an establishment is listed under two enterprises", field="enterprise_ids", cell=row
        )


def checked_numbers(x, name: str) -> np.ndarray:
    """``x`` as an array of finite floats; ``InputError`` naming ``name`` (and the flat
    index of the first value that is not finite) otherwise."""
    try:
        a = np.asarray(x)
    except (ValueError, TypeError):
        raise InputError(f"{name} must be an array of numbers", field=name) from None
    if a.dtype == bool or a.dtype.kind not in "iuf":
        raise InputError(f"{name} must be numbers", field=name)
    a = a.astype(np.float64)
    bad = ~np.isfinite(a.reshape(-1))
    if bad.any():
        raise InputError(f"{name} must be finite", field=name, cell=int(np.flatnonzero(bad)[0]))
    return a


def apply_noise(values, multipliers) -> np.ndarray:
    """Noisy values ``x m`` of the microdata, to be tabulated afterwards (seed 003 B.4:
    "noise addition adjusts the reported values prior to any tabulations"; the noise in a
    cell is the sum of its establishments' noise).

    Parameters
    ----------
    values : array_like of float
        Reported values, finite.
    multipliers : array_like of float
        Same shape, finite and ``> 0`` (as from :func:`multipliers`).

    Returns
    -------
    ndarray of float

    Raises
    ------
    InputError
        ``field="values"`` or ``"multipliers"``: not numbers, not finite (``cell`` is the
        flat index), multipliers ``<= 0``, or shapes that differ.
    """
    v, m = checked_numbers(values, "values"), checked_numbers(multipliers, "multipliers")
    if v.shape != m.shape:
        raise InputError(
            f"values have shape {v.shape} but multipliers {m.shape}", field="multipliers"
        )
    bad = m.reshape(-1) <= 0
    if bad.any():
        raise InputError(
            "multiplier must be > 0", field="multipliers", cell=int(np.flatnonzero(bad)[0])
        )
    return v * m


def noise_left_to_largest(
    cell_of_row: np.ndarray,
    unit_value: np.ndarray,
    unit_noise: np.ndarray,
    total_noise: np.ndarray,
    n_cells: int,
    c: int = 1,
) -> np.ndarray:
    """The noise that still hides each cell's other units from its largest unit (with up
    to ``c - 1`` others in its coalition), which knows its own noise; ``inf`` for a cell
    of fewer than two units. :func:`noise_left` bounds what the others are left to hide
    the largest; this is the other side (a helper's campaign, 2026-11-27).

    Why: without noise, protecting the largest unit protects the others, since the
    p%-rule's level is largest for it. With a fixed multiplier per respondent each
    intruder is left a different noise: 1000, 900, 20 and 20 under p = 15 leave the
    largest 72.2 to hide the second, whose level with the largest as intruder is
    ``0.15 * 900 - 40 = 95``, while the noise left to every other intruder hid the
    largest; the filter published the cell. Its target is the second largest unit (the
    largest not in the coalition), so its level is the rule's with ``x_2`` as target.

    ``c = 1``: ``|D - D_1|``; ``c > 1``: ``max(|D - D_1| - sum of the c - 1 largest |D_r|
    of the others, 0)`` (triangle inequality: conservative). Arguments as
    :func:`noise_left`."""
    left = np.full(n_cells, np.inf)
    if not len(cell_of_row):
        return left
    total = np.asarray(total_noise, np.float64)
    cell, own, _, size, start, rank = _by_value(cell_of_row, unit_value, unit_noise, n_cells)
    several = np.flatnonzero(size > 1)
    left[several] = np.abs(total[several] - own[start[several]])
    if c > 1 and several.size:
        rest = (rank > 0) & (size[cell] > 1)
        helpers = _largest_sum(cell[rest], np.abs(own[rest]), c - 1, n_cells)
        left[several] = np.maximum(left[several] - helpers[several], 0.0)
    return left


def _by_value(cell_of_row, unit_value, unit_noise, n_cells: int):
    """The (cell, unit) rows by cell, then value descending (the first row of a cell is
    its largest unit): (cell, noise, value, rows per cell, first row of each cell, rank
    of each row in its cell)."""
    cell_of_row = np.asarray(cell_of_row, np.int64)
    order = np.lexsort((-np.asarray(unit_value, np.float64), cell_of_row))
    cell = cell_of_row[order]
    size = np.bincount(cell, minlength=n_cells)
    start = np.concatenate(([0], np.cumsum(size)[:-1]))
    own = np.asarray(unit_noise, np.float64)[order]
    value = np.asarray(unit_value, np.float64)[order]
    return cell, own, value, size, start, np.arange(cell.size) - start[cell]


def _largest_sum(cell: np.ndarray, amount: np.ndarray, k: int, n_cells: int) -> np.ndarray:
    """Per cell, the sum of the ``k`` largest ``amount`` of its rows (vectorised)."""
    by_size = np.lexsort((-amount, cell))
    cell, amount = cell[by_size], amount[by_size]
    first = np.concatenate(([0], np.cumsum(np.bincount(cell, minlength=n_cells))[:-1]))
    top = (np.arange(cell.size) - first[cell]) < k
    return np.bincount(cell[top], amount[top], minlength=n_cells)


def noise_left(
    cell_of_row: np.ndarray,
    unit_value: np.ndarray,
    unit_noise: np.ndarray,
    total_noise: np.ndarray,
    n_cells: int,
    c: int = 1,
) -> np.ndarray:
    """The noise that still hides each cell's largest unit from an intruder who knows its
    own noise (seed 003 B.4 multipliers, used by the noisy tables and the online filter of
    seed 003 C).

    Why: the multipliers are keyed on the respondent alone (the direction on the
    enterprise, the jitter on the establishment), so a respondent has one multiplier in
    every cell, table and query. A cell it makes up alone publishes ``m x``; it knows
    ``x``, so it learns ``m``, and in any other cell it subtracts its noisy contribution
    exactly: its own noise no longer hides the largest contributor. Reading chosen (seed
    003 B.4 and C fix the noise per respondent; neither says what a respondent knows of
    it): every unit is assumed to know its own noise in every cell; a cell's noise is the
    sum of its units' noise, ``D = sum_r D_r``.

    The bound: the largest unit (by value) is protected against a coalition of up to
    ``c`` other units (seed 003 B.1.a); when several units share the largest value each
    is a target, so none of them is left out of the intruders (the cautious reading). For
    ``c = 1`` the noise left is ``min(|D|, min_r |D - D_r|)`` over the other units ``r``;
    for ``c > 1`` also at most ``max(|D| - sum of the c largest |D_r|, 0)`` (a lower bound on
    what any coalition of ``c`` leaves, by the triangle inequality: conservative). A cell of
    one unit (or none) is hidden by ``|D|``: the intruder is an outsider.

    Parameters
    ----------
    cell_of_row : ndarray of int, shape (k,)
        Cell of each (cell, unit) row; one row per unit present in a cell.
    unit_value, unit_noise : ndarray of float, shape (k,)
        The unit's value (to find the largest) and its noise ``D_r`` in the cell.
    total_noise : ndarray of float, shape (n_cells,)
        ``D`` per cell.
    n_cells : int
    c : int
        Largest intruder coalition (the p%-rule's ``c``), ``>= 1``.

    Returns
    -------
    ndarray of float, shape (n_cells,)
        The noise left per cell (``>= 0``), vectorised over the rows (no loop over cells).
    """
    total = np.abs(np.asarray(total_noise, np.float64))
    left = total.copy()
    if not len(cell_of_row):
        return left
    cell, own, value, size, start, rank = _by_value(cell_of_row, unit_value, unit_noise, n_cells)
    # A largest value shared by two units: either is the target, the other an intruder,
    # so the first row counts among the intruders as well.
    tied = np.zeros(n_cells, bool)
    several = np.flatnonzero(size > 1)
    tied[several] = value[start[several] + 1] == value[start[several]]
    other = ((rank > 0) | tied[cell]) & (size[cell] > 1)
    cell, own = cell[other], own[other]
    if not cell.size:
        return left
    gap = np.full(n_cells, np.inf)
    np.minimum.at(gap, cell, np.abs(np.asarray(total_noise, np.float64)[cell] - own))
    left = np.minimum(left, gap)
    if c > 1:
        largest = _largest_sum(cell, np.abs(own), c, n_cells)
        left = np.minimum(left, np.maximum(total - largest, 0.0))
    return left
