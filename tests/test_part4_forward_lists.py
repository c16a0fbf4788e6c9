"""A large graph's forward edges stay arrays through its analysis, made lists only when a rule reads them
(issue 30 part 4: two lists of 1.7 million at a million events)."""

from unittest.mock import patch

from app.domain import metrics
from app.domain.analysis import analyse
from app.domain.generate import generate_swarm


def test_forward_lists_are_made_only_when_read_and_equal_the_loops():
    trace = generate_swarm(20, 3_000, seed=3)
    with patch.object(metrics, "ARRAYS_FROM", 0):
        g = metrics.analyse_graph(trace)
        analysed = analyse(trace, g)
    assert g.ends is not None and g.forward_ends.cache_info().currsize == 0
    small = metrics.analyse_graph(trace)  # the loops' way
    assert (g.forward_src, g.forward_dst) == (small.forward_src, small.forward_dst)
    assert analysed == analyse(trace, small)
