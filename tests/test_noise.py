"""Keyed noise multipliers of seed 003 B.4 (service.sdc.noise)."""

import hashlib

import numpy as np
import pytest

from service.sdc import noise
from service.sdc.errors import InputError

SECRET = b"agency-secret-for-tests"
D, W = 0.10, 0.03


def _reference(enterprise: str, establishment: str, secret: bytes, d: float, w: float) -> float:
    """The documented formula, computed independently for one respondent."""

    def uniform(person: bytes, msg: bytes) -> float:
        key = secret if len(secret) <= 64 else hashlib.blake2b(secret).digest()
        word = int.from_bytes(
            hashlib.blake2b(msg, key=key, digest_size=8, person=person).digest(), "big"
        )
        return (word >> 11) / 2**53

    s = 1.0 if uniform(b"direction", enterprise.encode()) < 0.5 else -1.0
    u = uniform(b"jitter", establishment.encode())
    return 1.0 + s * (d + w * (2 * u - 1))


def test_matches_documented_formula():
    ent = ["A", "A", "B", "C"]
    est = ["A1", "A2", "B1", "C1"]
    m = noise.multipliers(ent, est, SECRET, D, W)
    expected = [_reference(e, s, SECRET, D, W) for e, s in zip(ent, est)]
    np.testing.assert_allclose(m, expected, rtol=0, atol=1e-15)


def test_long_secret_is_hashed_to_a_key():
    long = bytes(range(100))
    m = noise.multipliers(["A"], ["A1"], long, D, W)
    assert m[0] == pytest.approx(_reference("A", "A1", long, D, W), abs=1e-15)
    assert m[0] != noise.multipliers(["A"], ["A1"], long[:64], D, W)[0]


def test_same_ids_same_multipliers_across_calls():
    ent = [f"E{i // 3}" for i in range(30)]
    est = [f"S{i}" for i in range(30)]
    a = noise.multipliers(ent, est, SECRET, D, W)
    # another query: a subset, in another order, with other respondents around it
    order = [29, 3, 17, 0, 8]
    b = noise.multipliers(
        [ent[i] for i in order] + ["X"], [est[i] for i in order] + ["X1"], SECRET, D, W
    )
    np.testing.assert_array_equal(b[:-1], a[order])
    np.testing.assert_array_equal(noise.multipliers(ent, est, SECRET, D, W), a)
    # bytearray secret and integer ids hash like bytes and their decimal strings
    np.testing.assert_array_equal(
        noise.multipliers([7, 7], [70, 71], bytearray(SECRET), D, W),
        noise.multipliers(["7", "7"], ["70", "71"], SECRET, D, W),
    )


def test_different_secret_different_multipliers():
    ent = [f"E{i}" for i in range(200)]
    est = [f"S{i}" for i in range(200)]
    a = noise.multipliers(ent, est, SECRET, D, W)
    b = noise.multipliers(ent, est, SECRET + b"!", D, W)
    assert not np.any(a == b)
    # directions differ for about half of the enterprises
    flips = np.mean(np.sign(a - 1) != np.sign(b - 1))
    assert 0.35 < flips < 0.65


def test_enterprise_on_one_side_and_bounds():
    n_ent, per = 500, 6
    ent = np.repeat([f"E{i}" for i in range(n_ent)], per)
    est = [f"S{i}" for i in range(n_ent * per)]
    m = noise.multipliers(ent, est, SECRET, D, W).reshape(n_ent, per)
    side = np.sign(m - 1)
    assert np.all(side == side[:, :1])
    up = m > 1
    assert np.all(m[up] >= 1 + D - W) and np.all(m[up] <= 1 + D + W)
    assert np.all(m[~up] >= 1 - D - W) and np.all(m[~up] <= 1 - D + W)
    np.testing.assert_array_equal(
        side[:, 0], noise.directions([f"E{i}" for i in range(n_ent)], SECRET)
    )
    # jitter 0: exactly 1 +- d
    m0 = noise.multipliers(ent, est, SECRET, D, 0.0)
    np.testing.assert_allclose(np.abs(m0 - 1), D, rtol=1e-12)


def test_symmetry_about_one():
    """20,000 respondents, fixed secret: E[m - 1] = 0 and P(m > 1) = 1/2 within 3 SE."""
    n = 20_000
    ent = [f"enterprise-{i}" for i in range(n)]
    est = [f"establishment-{i}" for i in range(n)]
    m = noise.multipliers(ent, est, SECRET, D, W)
    x = m - 1
    se_mean = x.std(ddof=1) / np.sqrt(n)
    assert abs(x.mean()) < 3 * se_mean
    frac = np.mean(m > 1)
    assert abs(frac - 0.5) < 3 * np.sqrt(0.25 / n)
    # the jitter is uniform within each side: mean |m - 1| = d, var = w^2 / 3
    assert abs(np.abs(x).mean() - D) < 3 * W / np.sqrt(3 * n)


def test_clustered_symmetry():
    """Enterprises of 4 establishments: the means per enterprise are symmetric too."""
    n_ent = 5_000
    ent = np.repeat([f"E{i}" for i in range(n_ent)], 4)
    est = [f"S{i}" for i in range(4 * n_ent)]
    per_enterprise = (noise.multipliers(ent, est, SECRET, D, W) - 1).reshape(n_ent, 4).mean(1)
    assert abs(per_enterprise.mean()) < 3 * per_enterprise.std(ddof=1) / np.sqrt(n_ent)


def test_apply_noise():
    m = noise.multipliers(["A", "A", "B"], ["A1", "A2", "B1"], SECRET, D, W)
    values = np.array([100.0, 0.0, -20.0])
    np.testing.assert_allclose(noise.apply_noise(values, m), values * m)
    np.testing.assert_allclose(noise.apply_noise([[1, 2]], [[1.1, 0.9]]), [[1.1, 1.8]])


@pytest.mark.parametrize(
    "d, jitter, field",
    [
        (0.0, 0.0, "d"),
        (0.5, 0.1, "d"),
        (-0.1, 0.0, "d"),
        (float("nan"), 0.0, "d"),
        (0.1, 0.1, "jitter"),
        (0.1, -0.01, "jitter"),
        (0.1, 0.2, "jitter"),
        (0.1, "0", "jitter"),
    ],
)
def test_bad_parameters(d, jitter, field):
    with pytest.raises(InputError) as e:
        noise.multipliers(["A"], ["A1"], SECRET, d, jitter)
    assert e.value.field == field


def test_bad_ids_and_secret():
    with pytest.raises(InputError) as e:
        noise.multipliers(["A"], ["A1"], "text secret", D, W)
    assert e.value.field == "secret"
    with pytest.raises(InputError) as e:
        noise.multipliers(["A"], ["A1"], b"", D, W)
    assert e.value.field == "secret"
    with pytest.raises(InputError) as e:
        noise.multipliers(["A", "B"], ["A1"], SECRET, D, W)
    assert e.value.field == "establishment_ids"
    with pytest.raises(InputError) as e:
        noise.multipliers(["A", "B", "A"], ["A1", "B1", "B1"], SECRET, D, W)
    assert (e.value.field, e.value.cell) == ("enterprise_ids", 2)
    with pytest.raises(InputError) as e:
        noise.multipliers(["A", None], ["A1", "A2"], SECRET, D, W)
    assert (e.value.field, e.value.cell) == ("enterprise_ids", 1)
    with pytest.raises(InputError) as e:
        noise.multipliers("AB", ["A1", "A2"], SECRET, D, W)
    assert e.value.field == "enterprise_ids"


def test_bad_apply_noise():
    with pytest.raises(InputError) as e:
        noise.apply_noise([1.0, 2.0], [1.1])
    assert e.value.field == "multipliers"
    with pytest.raises(InputError) as e:
        noise.apply_noise([1.0, float("inf")], [1.1, 0.9])
    assert (e.value.field, e.value.cell) == ("values", 1)
    with pytest.raises(InputError) as e:
        noise.apply_noise([1.0, 2.0], [1.1, 0.0])
    assert (e.value.field, e.value.cell) == ("multipliers", 1)
    with pytest.raises(InputError) as e:
        noise.apply_noise(["a"], [1.0])
    assert e.value.field == "values"
