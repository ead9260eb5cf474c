"""Per-group accumulators for analyses that stream through a file in batches.

A trace or a pcap is read a batch at a time; what an analysis keeps is per
stream (or per flow), never per record:

  Index         dense indices for 64-bit ids (sockids), in order of first appearance
  Growing       per-group columns that grow as new groups appear
  Moments       count, exact integer sum and the variance (Chan's pairwise merge)
  OrderStats    exact order statistics (quantiles) per group in bounded memory

Order statistics need every value in order, which no bounded pass has.  OrderStats
counts each group's values in log-linear cells and tracks each cell's min and max;
a wanted rank is known once its cell holds a single value (or the rank is the
cell's first or last).  Ranks still inside a wider cell cost another pass over the
values, counting only those cells more finely (or collecting their few values):
the caller replays its batches until resolve() says every rank is known.

The per-record loops run in C (accumulate.c, built on first use by magnetlib.native)
with the same arithmetic, or in numpy where there is no C compiler.
"""
from __future__ import annotations

import ctypes
import mmap
import weakref

import numpy as np

from . import native
from .native import I32, I64, PTR

INT64_MAX = np.iinfo(np.int64).max


SIGNATURES = {
    "magnet_group_count_sum": ([PTR, PTR, I64, I64, PTR, PTR], None),
    "magnet_group_moments": ([PTR, PTR, I64, I64, I32, PTR, PTR, PTR], None),
    "magnet_hdr_count_first": ([PTR, PTR, I64, PTR, I32, I64, I64, PTR, PTR, PTR], None),
    "magnet_gaps": ([PTR, PTR, I64, I64, PTR, PTR, PTR, PTR, PTR, PTR], I64),
    "magnet_index_new": ([], PTR),
    "magnet_index_free": ([PTR], None),
    "magnet_index_cells": ([PTR, PTR, I64, PTR, PTR, I64, I64, PTR, PTR], I64),
}


def c_loops() -> ctypes.CDLL | None:
    """accumulate.c's loops, or None (no compiler, or MAGNET_NATIVE=0): numpy's."""
    return native.library("accumulate.c", SIGNATURES)


def count_and_sum(group: np.ndarray, values: np.ndarray, ngroups: int) -> tuple[np.ndarray, np.ndarray]:
    """Per group: how many values (int64) and their sum (float64, as np.bincount adds them)."""
    lib = c_loops()
    if lib is None:
        return np.bincount(group, minlength=ngroups), np.bincount(group, weights=values, minlength=ngroups)
    group, values = int64s(group), int64s(values)
    count, total = np.empty(ngroups, np.int64), np.empty(ngroups, np.float64)
    lib.magnet_group_count_sum(group.ctypes.data, values.ctypes.data, len(group), ngroups,
                               count.ctypes.data, total.ctypes.data)
    return count, total


def int64s(x: np.ndarray) -> np.ndarray:
    """x as a contiguous int64 array (no copy when it is one): what the C loops take."""
    return np.ascontiguousarray(x, np.int64)


class Index:
    """Dense indices 0..n-1 for uint64 ids, assigned in order of first appearance."""

    def __init__(self):
        self.ids = np.zeros(0, np.uint64)          # id of each index
        self._sorted = np.zeros(0, np.uint64)
        self._index_of_sorted = np.zeros(0, np.int64)
        self._lib = c_loops()
        self._table = self._lib and self._lib.magnet_index_new()      # accumulate.c's hash table
        if self._lib is not None and not self._table:
            raise MemoryError("the id index")
        if self._table:
            weakref.finalize(self, self._lib.magnet_index_free, self._table)

    def __len__(self) -> int:
        return len(self.ids)

    def cells(self, ids: np.ndarray, codes: np.ndarray, column_of: np.ndarray, per: int) -> np.ndarray:
        """Per record, a cell of (id, code): the id's index * per + column_of[code], for
        columns 0..per-1 (new ids are added)."""
        column_of = int64s(column_of)
        if self._table:
            return self._cells_c(np.asarray(ids, np.uint64), np.asarray(codes, np.uint32), column_of, per)
        return self.of(ids) * per + column_of[codes]

    def _cells_c(self, ids: np.ndarray, codes: np.ndarray | None, column_of: np.ndarray, per: int):
        ids = np.ascontiguousarray(ids)
        codes = None if codes is None else np.ascontiguousarray(codes)
        cell, new = np.empty(len(ids), np.int64), np.empty(len(ids), np.uint64)
        fresh = self._lib.magnet_index_cells(self._table, ids.ctypes.data, len(ids),
                                             None if codes is None else codes.ctypes.data,
                                             column_of.ctypes.data, len(column_of), per,
                                             cell.ctypes.data, new.ctypes.data)
        if fresh == -2:
            raise IndexError(f"an event code beyond the {len(column_of)} of the table")
        if fresh < 0:
            raise MemoryError("the id index")
        if fresh:
            self.ids = np.concatenate([self.ids, new[:fresh]])
        return cell

    def of(self, ids: np.ndarray) -> np.ndarray:
        """The index of each id (new ids are added); one lookup per run of equal ids."""
        ids = np.asarray(ids, np.uint64)
        if not len(ids):
            return np.zeros(0, np.int64)
        if self._table:
            return self._cells_c(ids, None, np.zeros(1, np.int64), 1)
        heads = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        if len(heads) > len(ids) // 2:        # short runs: cheaper to look every id up
            return self._lookup(ids)
        index = self._lookup(ids[heads])
        return np.repeat(index, np.diff(np.r_[heads, len(ids)]))

    def _lookup(self, ids: np.ndarray) -> np.ndarray:
        pos, found = self._find(ids)
        if not found.all():
            self._add(ids[~found])
            pos, found = self._find(ids)
        return self._index_of_sorted[pos]

    def _find(self, ids):
        if not len(self._sorted):
            return np.zeros(len(ids), np.int64), np.zeros(len(ids), bool)
        pos = np.searchsorted(self._sorted, ids)
        np.minimum(pos, len(self._sorted) - 1, out=pos)    # past the end: compares unequal
        return pos, self._sorted[pos] == ids

    def _add(self, new: np.ndarray) -> None:
        uniq, first = np.unique(new, return_index=True)
        uniq = uniq[np.argsort(first, kind="stable")]          # first appearance
        self.ids = np.concatenate([self.ids, uniq])
        order = np.argsort(self.ids, kind="stable")
        self._sorted, self._index_of_sorted = self.ids[order], order


class Growing:
    """Named per-group columns, grown (by doubling) to cover every group index seen."""

    def __init__(self, **columns: tuple[type, object]):
        self._spec = columns                        # name -> (dtype, fill value)
        self._cap = self._len = 0
        for name, (dtype, fill) in columns.items():
            setattr(self, name, np.full(0, fill, dtype))

    def __len__(self) -> int:
        return self._len

    def cover(self, n: int) -> None:
        if n > self._cap:
            cap = max(n, 2 * self._cap, 64)
            for name, (dtype, fill) in self._spec.items():
                old = getattr(self, name)
                new = np.full(cap, fill, dtype)
                new[:len(old)] = old
                setattr(self, name, new)
            self._cap = cap
        self._len = max(self._len, n)

    def view(self, name: str) -> np.ndarray:
        return getattr(self, name)[:self._len]


class Moments:
    """Per group: count, exact integer sum and sum of squared deviations, batch by batch.

    The variance merges batches with Chan et al.'s pairwise update, which keeps the
    precision of a two-pass computation without a second pass."""

    def __init__(self):
        self.cols = Growing(n=(np.int64, 0), total=(np.int64, 0), m2=(np.float64, 0.0))

    def add(self, group: np.ndarray, values: np.ndarray, ngroups: int,
            n_b: np.ndarray | None = None, sum_b: np.ndarray | None = None) -> None:
        """Add a batch; n_b and sum_b, its count and sum per group, if the caller has them."""
        self.cols.cover(ngroups)
        if not len(group):
            return
        lib = c_loops()
        if lib is not None and np.issubdtype(values.dtype, np.integer):
            n_b, sum_b, m2_b = self._batch_c(lib, group, values, ngroups, n_b, sum_b)
        else:
            n_b, sum_b, m2_b = self._batch(group, values, ngroups, n_b, sum_b)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_b = sum_b / n_b
        c = self.cols
        n_a, total_a, m2_a = c.view("n"), c.view("total"), c.view("m2")
        has = n_b > 0
        n = n_a + n_b
        with np.errstate(invalid="ignore", divide="ignore"):
            delta = mean_b - total_a / np.maximum(n_a, 1)
            cross = np.where(n_a > 0, delta ** 2 * n_a * n_b / n, 0.0)
        m2_a[has] += m2_b[has] + cross[has]
        n_a += n_b
        total_a += np.rint(sum_b).astype(np.int64)

    @staticmethod
    def _batch(group, values, ngroups, n_b, sum_b):
        """The batch's count, sum and sum of squared deviations per group."""
        if n_b is None:
            n_b = np.bincount(group, minlength=ngroups)
        if sum_b is None:
            sum_b = np.bincount(group, weights=values, minlength=ngroups)     # exact below 2**53
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_b = sum_b / n_b
        dev = values - mean_b[group]
        return n_b, sum_b, np.bincount(group, weights=np.multiply(dev, dev, out=dev), minlength=ngroups)

    @staticmethod
    def _batch_c(lib, group, values, ngroups, n_b, sum_b):
        """_batch in C: the same float64 sums in the same order."""
        has = n_b is not None and sum_b is not None
        n_b = int64s(n_b) if has else np.empty(ngroups, np.int64)
        sum_b = np.ascontiguousarray(sum_b, np.float64) if has else np.empty(ngroups, np.float64)
        m2_b = np.empty(ngroups, np.float64)
        group, values = int64s(group), int64s(values)
        lib.magnet_group_moments(group.ctypes.data, values.ctypes.data, len(group), ngroups, has,
                                 n_b.ctypes.data, sum_b.ctypes.data, m2_b.ctypes.data)
        return n_b, sum_b, m2_b

    def count(self) -> np.ndarray:
        return self.cols.view("n")

    def total(self) -> np.ndarray:
        return self.cols.view("total")

    def mean(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.total() / self.count()

    def std(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.sqrt(self.cols.view("m2") / self.count())


# ----------------------------------------------------------- order statistics ---
HDR_LIMIT_BITS = 52          # cells are computed through float64: exact below 2**53
HDR_TOP = (1 << HDR_LIMIT_BITS) - 1
# Values counted at a time: a slice's temporaries stay in the CPU cache between the
# several operations on them (a million values at once ran at half the speed).
SLICE = 1 << 17


def hdr_cell(x: np.ndarray, m: int, wide: np.ndarray | None = None) -> np.ndarray:
    """Log-linear cell of each x in [0, 2**52): x itself below 2**(m+1), then 2**m cells
    per power of two (so a cell is at most 2**-m of its values wide).  `wide`: x >= 2**(m+1),
    if the caller has it."""
    x = np.asarray(x, np.int64)
    if wide is None:
        wide = x >= (2 << m)
    n_wide = np.count_nonzero(wide)
    if n_wide == len(x):
        return _log_linear(x, m)
    if n_wide < len(x) // 4:                  # mostly exact cells: convert only the others
        cell = x.copy()
        if n_wide:
            at = np.flatnonzero(wide)
            cell[at] = _log_linear(x[at], m)
        return cell
    return np.where(wide, _log_linear(x, m), x)


def _log_linear(x: np.ndarray, m: int) -> np.ndarray:
    """hdr_cell of x >= 2**(m+1): the exponent and top m mantissa bits of its float64."""
    return (x.astype(np.float64).view(np.int64) >> (52 - m)) - ((1022 + m) << m)


def hdr_bounds(cell: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Smallest and largest x of each cell."""
    cell = np.asarray(cell, np.int64)
    j = np.maximum(cell - (2 << m), 0)
    shift = j >> m                                   # octave above 2**(m+1), minus m + 1
    lo = ((1 << m) + (j & ((1 << m) - 1))) << (shift + 1)
    hi = lo + (np.int64(1) << (shift + 1)) - 1
    exact = cell < (2 << m)
    return np.where(exact, cell, lo), np.where(exact, cell, hi)


class OrderStats:
    """Exact k-th smallest values of non-negative integers, per group, in bounded memory.

        stats = OrderStats(m=10, top=2**31 - 1)
        for group, x in batches: stats.add(group, x)       # pass 1
        stats.want(groups, ranks)
        while not stats.resolve():                          # more passes, if needed
            for group, x in batches: stats.add(group, x)
        stats.values                                        # per wanted rank

    Pass 1 gives every group (up to `cells` cells in all) log-linear cells over [0, top];
    values above top share the last cell.  Later passes count only the cells that still
    hold wanted ranks, tightened to the values they saw; one holding at most `collect`
    values has them collected and sorted instead.
    """

    def __init__(self, m: int, top: int, cells: int = 1 << 23, collect: int = 4096):
        self.m, self.top, self.budget, self.collect = m, top, cells, collect
        self.first_pass = True
        self.per_group_cells = int(hdr_cell(np.array([top]), m)[0]) + 1
        self.group_target = Growing(t=(np.int64, -1))          # pass 1: a group's target
        self._targets([], [], [], [], [], cells=cells)
        self.want_group = np.zeros(0, np.int64)

    # ----------------------------------------------------------- targets ---
    def _targets(self, group, lo, hi, below, count, cells: int | None = None) -> None:
        """This pass's targets: value ranges [lo, hi] of a group, with cells or collected."""
        self.t_group = np.asarray(group, np.int64)
        self.t_lo, self.t_hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
        self.t_below = np.asarray(below, np.int64)
        self.t_shift = _shift_for(self.t_hi - self.t_lo)
        count = np.asarray(count, np.int64)
        self.t_open = count < 0              # a whole range of unknown count: takes values above hi too
        self.t_collected = (count >= 0) & (count <= self.collect)
        ncells = np.where(self.t_collected, 0, self._ncells(self.t_hi - self.t_lo, self.t_shift))
        self.t_offset = np.r_[0, np.cumsum(ncells)].astype(np.int64)
        # Zeroed memory is mapped lazily: cells never counted cost no resident memory.
        # A cell's min is kept as INT64_MAX - min, so that 0 means "none" for both.
        size = int(self.t_offset[-1]) if cells is None else cells
        self.counts, self.rev_mins, self.maxs = (lazy_zeros(size) for _ in range(3))
        self.collected: list[tuple[np.ndarray, np.ndarray]] = []
        self._by_group()

    def _ncells(self, span: np.ndarray, shift: np.ndarray) -> np.ndarray:
        return hdr_cell(np.minimum(span >> shift, HDR_TOP), self.m) + 1

    def _by_group(self) -> None:
        """Per group: its targets (sorted by group, they are consecutive)."""
        n = int(self.t_group.max()) + 1 if len(self.t_group) else 0
        self.g_first = np.full(n, -1, np.int64)
        self.g_count = np.bincount(self.t_group, minlength=n) if n else np.zeros(0, np.int64)
        if n:
            self.g_first[self.t_group[::-1]] = np.arange(len(self.t_group))[::-1]
        self.g_max = int(self.g_count.max()) if n else 0

    def _open_groups(self, groups: np.ndarray) -> None:
        """Pass 1: give new groups cells over [0, top] while the cell budget lasts."""
        self.group_target.cover(int(groups.max()) + 1)
        t = self.group_target.view("t")
        new = groups[t[groups] == -1]
        if not len(new):
            return
        used = int(self.t_offset[-1])
        room = max((len(self.counts) - used) // self.per_group_cells, 0)
        t[new[room:]] = -2                                 # no room: a later pass
        new = new[:room]
        first = len(self.t_group)
        t[new] = np.arange(first, first + len(new))
        k = len(new)
        self.t_group = np.r_[self.t_group, new]
        self.t_lo = np.r_[self.t_lo, np.zeros(k, np.int64)]
        self.t_hi = np.r_[self.t_hi, np.full(k, self.top, np.int64)]
        self.t_below = np.r_[self.t_below, np.zeros(k, np.int64)]
        self.t_shift = np.r_[self.t_shift, np.zeros(k, np.int64)]
        self.t_collected = np.r_[self.t_collected, np.zeros(k, bool)]
        self.t_open = np.r_[self.t_open, np.ones(k, bool)]
        self.t_offset = np.r_[self.t_offset, used + self.per_group_cells * np.arange(1, k + 1)]

    # -------------------------------------------------------------- add ---
    def needs(self, group: np.ndarray) -> np.ndarray:
        """Which of these groups this pass counts (pass 1: every group)."""
        if self.first_pass:
            return np.ones(len(group), bool)
        inside = group < len(self.g_count)
        out = np.zeros(len(group), bool)
        out[inside] = self.g_count[group[inside]] > 0
        return out

    def add(self, group: np.ndarray, x: np.ndarray, present: np.ndarray | None = None) -> None:
        """Count values x (int64 >= 0) of the given groups (`present`: the distinct groups,
        sorted, or None to find them)."""
        group, x = np.asarray(group, np.int64), np.asarray(x, np.int64)
        if not len(group):
            return
        if self.first_pass:
            self._open_groups(np.unique(group) if present is None else present)
            lib = c_loops()
            if lib is not None:
                self._count_first_c(lib, int64s(group), int64s(x))
                return
        for lo in range(0, len(group), SLICE):
            self._add(group[lo:lo + SLICE], x[lo:lo + SLICE])

    def _add(self, group: np.ndarray, x: np.ndarray) -> None:
        if self.first_pass:
            self._count_first(self.group_target.view("t")[group], x)
            return
        t = self._target_of(group, x)
        keep = t >= 0
        t, x = t[keep], x[keep]
        coll = self.t_collected[t]
        if coll.any():
            self.collected.append((t[coll], x[coll]))
            t, x = t[~coll], x[~coll]
        self._count(t, x)

    def _target_of(self, group: np.ndarray, x: np.ndarray) -> np.ndarray:
        """The target whose range holds each value, -1 for none."""
        t = np.full(len(group), -1, np.int64)
        inside = group < len(self.g_count)
        g = np.where(inside, group, 0)
        first, count = self.g_first[g], np.where(inside, self.g_count[g], 0)
        for j in range(self.g_max):           # a group has a few targets: one step per target
            k = np.minimum(first + j, len(self.t_group) - 1)
            hit = (j < count) & (x >= self.t_lo[k]) & ((x <= self.t_hi[k]) | self.t_open[k])
            t[hit] = k[hit]
        return t

    def _count_first(self, t: np.ndarray, x: np.ndarray) -> None:
        """Pass 1: every target is a group's [0, top], its cells one after another."""
        if t.min() < 0:
            keep = t >= 0
            t, x = t[keep], x[keep]
        wide = x >= (2 << self.m)
        at = hdr_cell(np.minimum(x, self.top) if x.max(initial=0) > self.top else x, self.m, wide)
        at += t * self.per_group_cells
        np.add.at(self.counts, at, 1)
        self._track(at, x, wide)

    def _count_first_c(self, lib, group: np.ndarray, x: np.ndarray) -> None:
        """_count_first and _track of pass 1 in one C loop."""
        target = int64s(self.group_target.view("t"))
        lib.magnet_hdr_count_first(group.ctypes.data, x.ctypes.data, len(group), target.ctypes.data,
                                   self.m, self.top, self.per_group_cells, self.counts.ctypes.data,
                                   self.rev_mins.ctypes.data, self.maxs.ctypes.data)

    def _track(self, at: np.ndarray, x: np.ndarray, wide: np.ndarray) -> None:
        """Each cell's min and max, for the cells that can hold more than one value."""
        n_wide = np.count_nonzero(wide)
        if n_wide < len(x):                   # one-value cells need no tracking
            if not n_wide:
                return
            wide = np.flatnonzero(wide)
            at, x = at[wide], x[wide]
        np.maximum.at(self.rev_mins, at, INT64_MAX - x)
        np.maximum.at(self.maxs, at, x)

    def _count(self, t: np.ndarray, x: np.ndarray) -> None:
        shift = self.t_shift[t]
        rel = np.minimum(x - self.t_lo[t], self.t_hi[t] - self.t_lo[t]) >> shift
        cell = hdr_cell(np.minimum(rel, HDR_TOP), self.m)
        at = self.t_offset[t] + cell
        np.add.at(self.counts, at, 1)
        self._track(at, x, (rel >= (2 << self.m)) | (shift > 0) | (x > self.t_hi[t]))

    # ------------------------------------------------------------ wants ---
    def want(self, group: np.ndarray, rank: np.ndarray) -> None:
        """Ask for the rank-th smallest value (0-based) of each group."""
        n = len(group)
        self.want_group = np.asarray(group, np.int64)
        self.want_rank = np.asarray(rank, np.int64)
        self.values = np.zeros(n, np.int64)
        self.done = np.zeros(n, bool)
        self.w_lo, self.w_hi = np.zeros(n, np.int64), np.full(n, self.top, np.int64)
        self.w_below = np.zeros(n, np.int64)
        self.w_count = np.full(n, -1, np.int64)          # values in [lo, hi]; -1: unknown
        t = self.group_target.view("t")
        gt = np.full(n, -1, np.int64)
        inside = self.want_group < len(t)
        gt[inside] = t[self.want_group[inside]]
        self.w_target = gt

    def resolve(self) -> bool:
        """Settle what this pass's counts settle; set up the next pass.  True when all done."""
        todo = np.flatnonzero(~self.done & (self.w_target >= 0))
        if len(todo):
            self._settle(todo)
        self._settle_collected()
        self.first_pass = False
        left = np.flatnonzero(~self.done)
        if not len(left):
            return True
        self._next_targets(left)
        return False

    def _settle(self, todo: np.ndarray) -> None:
        t = self.w_target[todo]
        coll = self.t_collected[t]
        todo, t = todo[~coll], t[~coll]
        if not len(todo):
            return
        # Cumulative counts over the cells that hold values only: most cells are empty
        # (a sum over all of them read and wrote 3 x 64 MiB per quantity).
        cell = np.flatnonzero(self.counts[:self.t_offset[-1]])
        cum = np.cumsum(self.counts[cell])
        before_target = _count_before(cum, np.searchsorted(cell, self.t_offset[t]))
        r = self.want_rank[todo] - self.t_below[t]                 # rank inside the target
        j = np.searchsorted(cum, before_target + r, side="right")  # the cell holding it
        at = cell[j]
        in_cell = before_target + r - _count_before(cum, j)
        n_cell = self.counts[at]
        lo_cell, hi_cell = self._cell_range(t, at)
        seen_min = INT64_MAX - self.rev_mins[at]
        lo = np.where(seen_min <= hi_cell, np.maximum(seen_min, lo_cell), lo_cell)
        hi = np.where(self.maxs[at] >= lo_cell, np.minimum(self.maxs[at], hi_cell), hi_cell)
        known = (lo == hi) | (in_cell == 0) | (in_cell == n_cell - 1)
        value = np.where(lo == hi, lo, np.where(in_cell == 0, lo, hi))
        self.values[todo[known]] = value[known]
        self.done[todo[known]] = True
        rest = todo[~known]
        self.w_lo[rest], self.w_hi[rest] = lo[~known], hi[~known]
        self.w_below[rest] = self.want_rank[rest] - in_cell[~known]
        self.w_count[rest] = n_cell[~known]

    def _cell_range(self, t: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The values a cell (flat index) of target t can hold."""
        lo, hi = hdr_bounds(at - self.t_offset[t], self.m)
        shift = self.t_shift[t]
        lo = self.t_lo[t] + (lo << shift)
        hi = np.minimum(self.t_lo[t] + (((hi + 1) << shift) - 1), self.t_hi[t])
        last = at == self.t_offset[t + 1] - 1
        return lo, np.where(last & self.t_open[t], INT64_MAX, hi)

    def _settle_collected(self) -> None:
        if not self.collected:
            return
        t = np.concatenate([c[0] for c in self.collected])
        x = np.concatenate([c[1] for c in self.collected])
        order = np.lexsort((x, t))
        t, x = t[order], x[order]
        start = np.searchsorted(t, np.arange(len(self.t_group)))
        todo = np.flatnonzero(~self.done & (self.w_target >= 0))
        todo = todo[self.t_collected[self.w_target[todo]]]
        k = self.w_target[todo]
        self.values[todo] = x[start[k] + self.want_rank[todo] - self.t_below[k]]
        self.done[todo] = True

    def _next_targets(self, left: np.ndarray) -> None:
        """Targets for the open wants (one per distinct range), as many as the budget holds."""
        key = np.stack([self.want_group[left], self.w_lo[left], self.w_hi[left]], axis=1)
        uniq, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        below, count = self.w_below[left][first], self.w_count[left][first]
        span = uniq[:, 2] - uniq[:, 1]
        cells = np.where((count >= 0) & (count <= self.collect), 0, self._ncells(span, _shift_for(span)))
        fits = np.cumsum(cells) <= max(self.budget, int(cells[0]))
        self._targets(uniq[fits, 0], uniq[fits, 1], uniq[fits, 2], below[fits], count[fits])
        target = np.full(len(uniq), -1, np.int64)
        target[fits] = np.arange(int(fits.sum()))
        self.w_target[:] = -1
        self.w_target[left] = target[inverse]


def _count_before(cum: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Values in the non-empty cells before the j-th, from their cumulative counts."""
    return np.where(j > 0, cum[np.maximum(j - 1, 0)], 0)


def lazy_zeros(n: int) -> np.ndarray:
    """n int64 zeros in pages of their own, each made resident only when first written.
    (numpy asks for huge pages for large arrays: a sparse histogram would then zero
    and keep 2 MiB for each cell it counts.)"""
    if n * 8 < mmap.PAGESIZE:
        return np.zeros(n, np.int64)
    return np.frombuffer(mmap.mmap(-1, n * 8), np.int64)


def _shift_for(span: np.ndarray) -> np.ndarray:
    """Bits to drop from a value's offset in a range this wide for it to fit the cells."""
    return np.maximum(_bit_length(span) - HDR_LIMIT_BITS, 0)


def _bit_length(x: np.ndarray) -> np.ndarray:
    """Bits needed for each non-negative int64."""
    x = np.asarray(x, np.int64)
    out = np.zeros(len(x), np.int64)
    for shift in (32, 16, 8, 4, 2, 1):
        big = (x >> (out + shift)) > 0
        out = np.where(big, out + shift, out)
    return np.where(x > 0, out + 1, 0)
