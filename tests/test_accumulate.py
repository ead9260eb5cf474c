"""The batch accumulators against plain numpy on random batches (empty ones, one group,
runs long and short, values near 2**62)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from magnetlib.accumulate import Index, Moments, OrderStats, _log_linear, c_loops, hdr_cell

from .conftest import both_versions

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others

batches = st.lists(st.lists(st.tuples(st.integers(0, 5), st.sampled_from([0, 1, 7, 2**62 - 3, 2**64 - 1])),
                            max_size=60), max_size=5)


many_ids = st.lists(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2**64 - 1)), max_size=200), max_size=3)
COLUMN_OF = np.array([0, 2, 1, 0, 2, 1])                # code -> column, 3 columns


@settings(max_examples=60, deadline=None)
@given(batches | many_ids, st.integers(1, 8))
def test_index_numbers_ids_by_first_appearance(parts, run):
    """Index.of and Index.cells, in C and in numpy: ids numbered as first seen (runs of
    `run` equal ids; a few ids, or hundreds, which grow the C hash table)."""
    def numbered():
        index, seen, got, want = Index(), {}, [], []
        for k, part in enumerate(parts):
            ids = np.repeat(np.array([v for _, v in part], np.uint64), run)
            codes = np.repeat(np.array([c for c, _ in part], np.uint32), run)
            if k % 2:
                got.append(index.cells(ids, codes, COLUMN_OF, 3))
                want.append([seen.setdefault(int(i), len(seen)) * 3 + COLUMN_OF[c] for i, c in zip(ids, codes)])
            else:
                got.append(index.of(ids))
                want.append([seen.setdefault(int(i), len(seen)) for i in ids])
        assert all(np.array_equal(g, np.array(w, np.int64).reshape(-1)) for g, w in zip(got, want))
        assert list(index.ids) == list(seen)
        return index.ids
    both_versions(numbered, c_loops() is not None)


def test_index_cells_refuses_a_code_beyond_the_table():
    for index in both_versions(Index, c_loops() is not None):
        with pytest.raises(IndexError):
            index.cells(np.array([5], np.uint64), np.array([6], np.uint32), COLUMN_OF, 3)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**52 - 1), max_size=50), st.sampled_from([3, 7, 10]))
def test_hdr_cell_is_the_same_with_the_callers_mask(x, m):
    x = np.array(x, np.int64)
    want = np.array([v if v < 2 << m else _log_linear(np.array([v]), m)[0] for v in x.tolist()], np.int64)
    assert np.array_equal(hdr_cell(x, m), want)
    assert np.array_equal(hdr_cell(x, m, x >= (2 << m)), want)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 3), st.one_of(st.integers(0, 3000), st.integers(2**62 - 9, 2**62))),
                         max_size=80), min_size=1, max_size=4),
       st.sampled_from([1 << 14, 300]))
def test_order_stats_are_numpy_sort(parts, cells):
    """Every rank of every group, over batches (one pass or several, as few cells allow),
    counted by the C loops and by numpy."""
    for values in both_versions(lambda: _order_stats(parts, cells), c_loops() is not None):
        assert values is True


def _order_stats(parts, cells):
    top = 2**31 - 1
    stats = OrderStats(m=4, top=top, cells=cells, collect=3)
    chunks = [(np.array([g for g, _ in p], np.int64), np.array([v for _, v in p], np.int64)) for p in parts]
    for group, x in chunks:
        stats.add(group, x)
    group = np.concatenate([g for g, _ in chunks])
    x = np.concatenate([v for _, v in chunks])
    want_group = np.repeat(np.arange(4), np.bincount(group, minlength=4))
    rank = np.concatenate([np.arange(n) for n in np.bincount(group, minlength=4)]).astype(np.int64)
    stats.want(want_group, rank)
    while not stats.resolve():
        for g, v in chunks:
            need = stats.needs(g)
            stats.add(g[need], v[need])
    want = np.concatenate([np.sort(x[group == k]) for k in range(4)])
    assert np.array_equal(stats.values, want)
    return True


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2**40)), max_size=200),
                min_size=1, max_size=4))
def test_moments_in_c_and_numpy_are_the_same_bits(parts):
    """Moments over batches: the C loop sums as np.bincount does (to the last bit), and
    both agree with numpy's mean and standard deviation of all values."""
    def run():
        m = Moments()
        for p in parts:
            group = np.array([g for g, _ in p], np.int64)
            m.add(group, np.array([v for _, v in p], np.int64), 6)
        return m.count().copy(), m.total().copy(), m.std().copy()
    got = both_versions(run, c_loops() is not None)
    for a, b in zip(got[0], got[-1]):
        assert np.array_equal(a, b, equal_nan=True)
    values = [(g, v) for p in parts for g, v in p]
    for k in range(6):
        x = np.array([v for g, v in values if g == k], np.float64)
        if len(x):
            assert got[0][0][k] == len(x) and got[0][1][k] == int(sum(v for g, v in values if g == k))
            assert np.isclose(got[0][2][k], x.std(), rtol=1e-9, atol=1e-6)
