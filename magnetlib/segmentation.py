"""How a TCP stack cut a byte stream: its input writes against its output segments.

Both are sizes in stream order.  Write i holds the stream's bytes
[W_i, W_i + w_i), segment j the bytes [S_j, S_j + s_j); so

* a write is *split* when its bytes leave in more than one segment,
* a segment *coalesces* when its bytes come from more than one write,
* a segment is *sub-MSS* when it carries less than the MSS.

    fate = segmentation.fate(write_sizes, segment_sizes, mss=1448)
    fate.writes_split, fate.segments_coalesced, fate.submss_segments

Segments must be the stack's new data only (retransmissions carry bytes already
counted): `new_bytes()` finds it from sequence numbers where a capture has them.
Bytes beyond the shorter of the two streams are left out (a run cut short).
Vectorised: two cumulative sums and two binary searches, whatever the sizes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Fate:
    writes: int                  # writes compared (those with bytes inside the common stream)
    segments: int                # segments compared
    writes_split: int            # writes whose bytes left in two or more segments
    segments_coalesced: int      # segments carrying bytes of two or more writes
    submss_segments: int         # segments below the MSS
    mss: int

    def as_dict(self) -> dict:
        return {"writes_split": self.writes_split, "writes_coalesced": self.segments_coalesced,
                "submss_segments": self.submss_segments}


def _positive(sizes) -> np.ndarray:
    sizes = np.asarray(sizes, np.int64)
    return sizes[sizes > 0]


def fate(write_sizes, segment_sizes, mss: int | None = None) -> Fate:
    """Split writes, coalescing segments and sub-MSS segments of one stack (see the module)."""
    writes, segments = _positive(write_sizes), _positive(segment_sizes)
    mss = int(mss or (segments.max() if len(segments) else 0))
    if not len(writes) or not len(segments):
        return Fate(0, 0, 0, 0, 0, mss)
    w_end, s_end = np.cumsum(writes), np.cumsum(segments)
    total = min(int(w_end[-1]), int(s_end[-1]))
    w_start, s_start = w_end - writes, s_end - segments
    w_keep, s_keep = w_start < total, s_start < total
    w_last = np.minimum(w_end, total) - 1                     # last byte of each write in range
    s_last = np.minimum(s_end, total) - 1
    # The segment (write) that holds a given byte: the first whose end lies beyond it.
    split = (np.searchsorted(s_end, w_start[w_keep], "right")
             != np.searchsorted(s_end, w_last[w_keep], "right"))
    coalesced = (np.searchsorted(w_end, s_start[s_keep], "right")
                 != np.searchsorted(w_end, s_last[s_keep], "right"))
    return Fate(int(w_keep.sum()), int(s_keep.sum()), int(split.sum()), int(coalesced.sum()),
                int((segments[s_keep] < mss).sum()), mss)


def new_bytes(seq, size) -> np.ndarray:
    """Each segment's bytes not sent before (sequence numbers, unwrapped from 32 bits):
    0 for a retransmission, the new part of one that reaches further."""
    seq = np.asarray(seq, np.int64)
    size = np.asarray(size, np.int64)
    if not len(seq):
        return np.zeros(0, np.int64)
    start = np.concatenate([[0], np.cumsum(((np.diff(seq) + 2**31) % 2**32) - 2**31)]) + seq[0]
    end = start + size
    sent = np.maximum.accumulate(np.concatenate([[np.iinfo(np.int64).min], end[:-1]]))
    return np.clip(end - np.maximum(start, sent), 0, size)
