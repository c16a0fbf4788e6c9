"""Inter-rater agreement, written from the formulas so every number can be checked by hand.

Percent agreement, Cohen's kappa (two raters) and Krippendorff's alpha (nominal, ordinal, interval)
with missing ratings allowed, following Krippendorff (2011), "Computing Krippendorff's
alpha-reliability". Ratings are {item: {rater: value}}; a missing rater simply has no entry.
"""

from collections import Counter
from itertools import permutations

LEVELS = ("nominal", "ordinal", "interval")


def pairable(ratings: dict, raters: list[str]) -> dict:
    """Items with values from at least two of `raters` (None counts as missing), limited to those raters."""
    out = {}
    for item, by_rater in ratings.items():
        values = {r: by_rater[r] for r in raters if by_rater.get(r) is not None}
        if len(values) >= 2:
            out[item] = values
    return out


def percent_agreement(units: dict) -> float | None:
    """Mean over items of the share of rater pairs that gave the same value."""
    if not units:
        return None
    shares = []
    for values in units.values():
        vals = list(values.values())
        pairs = [(a, b) for i, a in enumerate(vals) for b in vals[i + 1:]]
        shares.append(sum(a == b for a, b in pairs) / len(pairs))
    return sum(shares) / len(shares)


def cohen_kappa(units: dict, rater_a: str, rater_b: str) -> float | None:
    """(p_o - p_e) / (1 - p_e) over the items both raters labelled; None when p_e is 1."""
    both = [(v[rater_a], v[rater_b]) for v in units.values() if rater_a in v and rater_b in v]
    if not both:
        return None
    n = len(both)
    observed = sum(a == b for a, b in both) / n
    count_a = Counter(a for a, _ in both)
    count_b = Counter(b for _, b in both)
    expected = sum(count_a[c] * count_b[c] for c in count_a) / (n * n)
    if expected == 1:
        return None
    return (observed - expected) / (1 - expected)


def _delta_squared(level: str, totals: dict):
    """The difference function δ² of a metric, given the value totals n_c (needed for ordinal)."""
    if level == "nominal":
        return lambda c, k: 0.0 if c == k else 1.0
    if level == "interval":
        return lambda c, k: float(c - k) ** 2
    ranks = sorted(totals)
    position = {value: i for i, value in enumerate(ranks)}

    def ordinal(c, k):
        lo, hi = sorted((position[c], position[k]))
        between = sum(totals[ranks[g]] for g in range(lo, hi + 1))
        return (between - (totals[c] + totals[k]) / 2) ** 2

    return ordinal


def krippendorff_alpha(units: dict, level: str = "nominal") -> float | None:
    """1 - (n - 1) Σ o_ck δ²_ck / Σ n_c n_k δ²_ck, from the coincidence matrix of pairable values."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}")
    coincidences: Counter = Counter()
    for values in units.values():
        vals = list(values.values())
        m = len(vals)
        for i, j in permutations(range(m), 2):
            coincidences[(vals[i], vals[j])] += 1 / (m - 1)
    totals: Counter = Counter()
    for (c, _), o in coincidences.items():
        totals[c] += o
    n = sum(totals.values())
    if n <= 1:
        return None
    delta = _delta_squared(level, totals)
    observed = sum(o * delta(c, k) for (c, k), o in coincidences.items())
    expected = sum(totals[c] * totals[k] * delta(c, k) for c in totals for k in totals)
    if expected == 0:
        return None
    return 1 - (n - 1) * observed / expected


def agreement(ratings: dict, raters: list[str], level: str = "nominal") -> dict:
    """The agreement report the API returns for one field and a set of raters."""
    units = pairable(ratings, raters)
    return {
        "n_items": len(units),
        "percent_agreement": percent_agreement(units),
        "cohen_kappa": cohen_kappa(units, raters[0], raters[1]) if len(raters) == 2 else None,
        "krippendorff_alpha": krippendorff_alpha(units, level),
        "level": level,
    }
