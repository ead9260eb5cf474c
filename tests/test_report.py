"""The replay report's figures show what they claim: every event, round bins."""
import numpy as np
from hypothesis import given
from hypothesis import strategies as st
import pytest

from magnet.replay import report

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others


@given(st.lists(st.tuples(st.integers(0, 10**9), st.integers(1, 65535)), min_size=1, max_size=200),
       st.integers(1, 10**7))
def test_stacked_draws_every_event_once_without_overlap(events, width):
    ns = np.array([t for t, _ in events], np.int64)
    size = np.array([s for _, s in events], np.int64)
    x, base, rank = report.stacked(ns, size, width)
    for pos in np.unique(x):
        here = np.flatnonzero(x == pos)
        order = here[np.argsort(rank[here])]
        tops = base[order] + size[order]
        assert base[order][0] == 0 and (base[order][1:] == tops[:-1]).all()   # stacked, no gap, no overlap
        assert (ns[order] >= pos).all()
    assert len(x) == len(ns)


def test_segments_of_one_write_are_stacked_not_hidden():
    ns = np.array([0, 100, 200, 10**8])                # a 3-segment burst, then one more
    x, base, rank = report.stacked(ns, np.array([1448, 1448, 100, 500]), 1_000_000)
    assert list(base) == [0, 1448, 2896, 0] and list(rank) == [0, 1, 2, 0]
    assert len(np.unique(x)) == 2


def test_round_bins():
    assert report.round_bin(20.0) == 1
    assert report.round_bin(0.7) == 0.02
    assert report.round_bin(3600.0) == 60
