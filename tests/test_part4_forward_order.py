"""The graph's forward edges sorted by their dst's place as a stable sort leaves them (issue 30 part 4)."""

import numpy as np
import pytest

from app.domain.metrics import _stable_argsort


@pytest.mark.parametrize("seed", range(5))
def test_ties_keep_their_order(seed):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 50, 5_000)  # many equal places: the edges into one event
    assert np.array_equal(_stable_argsort(values), np.argsort(values, kind="stable"))


def test_keys_that_would_overflow_are_sorted_stably():
    values = np.array([2**62, 3, 2**62, 3, 0], np.int64)
    assert _stable_argsort(values).tolist() == [4, 1, 3, 0, 2]


def test_no_values():
    assert _stable_argsort(np.zeros(0, np.int64)).tolist() == []
