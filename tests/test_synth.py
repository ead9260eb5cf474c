"""Synthetic workloads and the FIFO wire model."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
import pytest

from magnetlib import synth
from magnetlib.demand import Demand

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others


def test_workloads_have_the_papers_shapes():
    ftp = synth.ftp(duration_s=10)
    assert set(ftp.size) == {10240} and np.all(np.diff(ftp.time_ns) == 20_000_000)
    slow = synth.ftp_slow(duration_s=10)
    assert np.all(np.diff(slow.time_ns) == 200_000_000)
    paper = synth.ftp_paper(duration_s=10)
    assert set(paper.size) == {3284} and np.all(np.diff(paper.time_ns) == 124_000_000)
    mp3 = synth.mp3(duration_s=60)
    assert set(mp3.size) == {418}
    assert abs(np.diff(mp3.time_ns).mean() / 1e6 - 21) < 1.0
    assert 0.3 < np.diff(mp3.time_ns).std() / np.diff(mp3.time_ns).mean() < 0.7
    assert synth.bulk(1 << 20).total_bytes == 1 << 20


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**8), st.integers(1, 50_000)), min_size=1, max_size=40),
       st.integers(500, 9000), st.sampled_from([1e6, 1e7, 1e9]))
def test_wire_model_matches_the_fifo_recurrence(writes, mss, rate):
    writes.sort()
    d = Demand.from_arrays([t for t, _ in writes], [s for _, s in writes])
    idx, seg, start = synth.model_wire(d, mss, rate)
    assert np.array_equal(np.bincount(idx, weights=seg, minlength=len(d)).astype(int), d.size)
    assert seg.max() <= mss
    free = -np.inf
    for i in range(len(seg)):          # the recurrence, one segment at a time
        service = (seg[i] + synth.HEADER_BYTES) * 8 / rate * 1e9
        begin = max(d.time_ns[idx[i]], free)
        free = begin + service
        assert abs(start[i] - begin) <= 1, i
