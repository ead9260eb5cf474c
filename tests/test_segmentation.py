"""magnetlib.segmentation against a byte-by-byte reference."""
import numpy as np
from hypothesis import given
from hypothesis import strategies as st
import pytest

from magnetlib import segmentation

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others

sizes = st.lists(st.integers(0, 3000), min_size=0, max_size=60)


def reference(writes, segments, mss):
    """Label every byte with its write and its segment, then count."""
    owner_w = np.repeat(np.arange(len(writes)), writes)
    owner_s = np.repeat(np.arange(len(segments)), segments)
    n = min(len(owner_w), len(owner_s))
    owner_w, owner_s = owner_w[:n], owner_s[:n]
    split = sum(len(set(owner_s[owner_w == i])) > 1 for i in set(owner_w))
    coalesced = sum(len(set(owner_w[owner_s == j])) > 1 for j in set(owner_s))
    submss = sum(segments[j] < mss for j in set(owner_s))
    return split, coalesced, submss


@given(sizes, sizes)
def test_fate_matches_byte_by_byte_reference(writes, segments):
    mss = 1448
    f = segmentation.fate(writes, segments, mss)
    assert (f.writes_split, f.segments_coalesced, f.submss_segments) == reference(writes, segments, mss)


def test_the_papers_write_through_one_stack():
    # Two 3284 B writes leave as full segments; the third holds the end of one and the
    # start of the other; the last is what remains.
    f = segmentation.fate([3284, 3284], [1448, 1448, 1448, 1448, 776], 1448)
    assert f.writes_split == 2 and f.segments_coalesced == 1 and f.submss_segments == 1


def test_new_bytes_leaves_out_retransmissions():
    seq = np.array([1000, 2448, 1000, 3896, 2**32 - 100, 2**32 - 100], np.int64)
    size = np.array([1448, 1448, 1448, 1448, 200, 300])
    # a wrap: seq 2**32-100 restarts far below; treat the last two as a new flow position
    got = segmentation.new_bytes(seq[:4], size[:4])
    assert list(got) == [1448, 1448, 0, 1448]
    wrapped = segmentation.new_bytes(np.array([2**32 - 100, 2**32 - 100, 100]), np.array([100, 300, 50]))
    assert list(wrapped) == [100, 200, 0]
