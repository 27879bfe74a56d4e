"""Every case of golden/primary.json and golden/conversions.json, through the core."""

import numpy as np
import pytest

from service.sdc import conversions, magnitudes, primary, rules
from tests.golden import cases


def _rule(spec: dict):
    params = {k: v for k, v in spec.items() if k not in ("type", "weights")}
    return rules.RULES[spec["type"]](**params)


def _magnitudes(case: dict, depth: int) -> magnitudes.Magnitudes:
    if "weighted_contributions" in case:
        values, weights = np.array(case["weighted_contributions"], float).T
        return magnitudes.from_contributions(
            1,
            np.zeros(values.size, int),
            values,
            weight=weights,
            weights_mode=case["rule"]["weights"],
            depth=depth,
        )
    values = np.array(case["contributions"], float)
    return magnitudes.from_contributions(1, np.zeros(values.size, int), values, depth=depth)


@pytest.mark.parametrize("case", cases("primary.json"))
def test_primary_case(case):
    rule = _rule(case["rule"])
    ruleset = primary.RuleSet(rules=(rule,))
    m = _magnitudes(case, ruleset.depth)
    result = primary.assess(m, ruleset)
    expect = case["expect"]
    if "sensitive" in expect:
        assert bool(result.sensitive[0]) is expect["sensitive"]
    if "sensitivity_value" in expect:
        assert result.sensitivity[0, 0] == pytest.approx(
            expect["sensitivity_value"], abs=expect["tolerance"]
        )
    if "upper_protection_level" in expect:
        assert result.upper_protection[0] == pytest.approx(expect["upper_protection_level"])
        assert result.lower_protection[0] == pytest.approx(expect["upper_protection_level"])
    if "cell_value" in expect:
        assert m.value[0] == pytest.approx(expect["cell_value"])
    if "largest_two" in expect:
        np.testing.assert_allclose(m.largest[0, :2], expect["largest_two"])


@pytest.mark.parametrize("case", cases("conversions.json"))
def test_conversion_case(case):
    source = dict(case["from"])
    factor = source.pop("negative_factor_f", None)
    ((kind, params),) = source.items()
    found = conversions.equivalents(kind, params, factor)
    expect = dict(case["expect"])
    tol = expect.pop("tolerance", 1e-9)
    seed = case["seed"][:3]
    for name, value in expect.items():
        if name in ("k1", "k2"):
            n = int(name[1])
            hits = [
                e
                for e in found
                if e.kind == "dominance"
                and e.params["n"] == n
                and e.source.startswith(f"seed {seed}")
            ]
            got = [e.params["k"] for e in hits]
        else:
            want_kind = "p_percent" if name == "p" else kind
            got = [
                e.params[name] for e in found if e.kind == want_kind and f"seed {seed}" in e.source
            ]
        assert got, f"no {name} from seed {seed} among {found}"
        assert got[0] == pytest.approx(value, abs=tol)
