"""Agreement functions against published worked examples."""

import pytest

from app.domain.agreement import agreement, cohen_kappa, krippendorff_alpha, pairable, percent_agreement

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", four observers, 12 units, missing values.
KRIPPENDORFF_2011 = {
    "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    "C": [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
}


def by_item(table: dict) -> dict:
    items = {}
    for rater, values in table.items():
        for unit, value in enumerate(values, start=1):
            items.setdefault(unit, {})[rater] = value
    return items


@pytest.mark.parametrize("level, expected", [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)])
def test_krippendorff_worked_example(level, expected):
    units = pairable(by_item(KRIPPENDORFF_2011), list("ABCD"))
    assert len(units) == 11  # unit 12 has a single value and is not pairable
    assert krippendorff_alpha(units, level) == pytest.approx(expected, abs=0.0005)


def test_cohen_kappa_worked_example():
    # 2x2 table: yes/yes 20, yes/no 5, no/yes 10, no/no 15 -> kappa 0.40
    pairs = [("yes", "yes")] * 20 + [("yes", "no")] * 5 + [("no", "yes")] * 10 + [("no", "no")] * 15
    units = {i: {"a": a, "b": b} for i, (a, b) in enumerate(pairs)}
    assert cohen_kappa(units, "a", "b") == pytest.approx(0.40)
    assert percent_agreement(units) == pytest.approx(0.70)
    report = agreement(units, ["a", "b"])
    assert report["n_items"] == 50 and report["cohen_kappa"] == pytest.approx(0.40)


def test_perfect_and_degenerate_agreement():
    units = {1: {"a": "x", "b": "x"}, 2: {"a": "y", "b": "y"}}
    assert krippendorff_alpha(units) == pytest.approx(1.0)
    assert cohen_kappa(units, "a", "b") == pytest.approx(1.0)
    same = {1: {"a": "x", "b": "x"}, 2: {"a": "x", "b": "x"}}
    assert krippendorff_alpha(same) is None  # no variation: alpha is undefined
    assert agreement({}, ["a", "b"])["n_items"] == 0
    assert agreement({1: {"a": 1, "b": None}}, ["a", "b"])["percent_agreement"] is None


def test_three_raters_have_no_kappa():
    units = {1: {"a": 1, "b": 1, "c": 2}, 2: {"a": 2, "b": 2, "c": 2}}
    report = agreement(units, ["a", "b", "c"], "interval")
    assert report["cohen_kappa"] is None
    assert report["percent_agreement"] == pytest.approx((1 / 3 + 1) / 2)
