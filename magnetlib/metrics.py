"""Modulation metrics: how each layer reshapes a stream (the paper's Table II and more).

Everything is computed over whole arrays at once: records are sorted by
(group, value) and per-group statistics come from reduceat and index
arithmetic, never from a Python loop per record.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import format as fmt
from .accumulate import SLICE, Growing, Index, Moments, OrderStats, c_loops, count_and_sum, int64s
from .format import Event
from .scan import ahead
from .trace import Batch, Trace

QUANTILES = (0.05, 0.5, 0.95, 0.99)
# Layer rows in stack order, send path first.
LAYER_ROWS = [(layer, d) for d in ("send", "recv") for layer in fmt.LAYERS]


@dataclass
class Series:
    """One direction's data events (an application's writes, a wire's segments): their
    times in ns and sizes in bytes; `seq`, where known, each one's relative TCP
    sequence number (a wire's first byte)."""
    ns: np.ndarray
    size: np.ndarray
    seq: np.ndarray | None = None

    @classmethod
    def empty(cls) -> "Series":
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int64))

    @property
    def bytes(self) -> int:
        return int(self.size.sum())

    def __len__(self) -> int:
        return len(self.ns)


# A series with its label, one row of Table II (stack_table): (label, ns, size).
LabelledSeries = tuple[str, np.ndarray, np.ndarray]


def group_stats(group: np.ndarray, values: np.ndarray, ngroups: int,
                quantiles=QUANTILES) -> dict[str, np.ndarray]:
    """count, sum, mean, std, min, max and quantiles of `values` per group id (0..ngroups-1).

    Quantiles interpolate linearly, as numpy.quantile does.  Empty groups give NaN.
    """
    values = np.asarray(values, np.float64)
    order = np.lexsort((values, group))
    g, v = group[order], values[order]
    count = np.bincount(g, minlength=ngroups)
    start = np.concatenate(([0], np.cumsum(count)[:-1]))
    total = np.bincount(g, weights=v, minlength=ngroups)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / count
        sq = np.bincount(g, weights=(v - mean[g]) ** 2, minlength=ngroups)
        out = {"count": count, "sum": total, "mean": mean, "std": np.sqrt(sq / count)}
    has = count > 0
    out["min"] = _at(v, start, has)
    out["max"] = _at(v, start + count - 1, has)
    for q in quantiles:
        exact = start + q * np.maximum(count - 1, 0)
        lo = np.floor(exact).astype(np.int64)
        hi = np.minimum(lo + 1, start + count - 1)
        frac = exact - lo
        out[f"p{q * 100:g}"] = np.where(has, _at(v, lo, has) * (1 - frac) + _at(v, hi, has) * frac, np.nan)
    return out


def _at(v: np.ndarray, idx: np.ndarray, has: np.ndarray) -> np.ndarray:
    safe = np.where(has, idx, 0)
    return np.where(has, v[safe] if len(v) else np.nan, np.nan)


def series_table(group: np.ndarray, ns: np.ndarray, size: np.ndarray, ngroups: int):
    """The modulation columns for groups of (ns, size) events.

    Returns a DataFrame, one row per group id: events, bytes, size statistics,
    spacing statistics (seconds between consecutive events of the group),
    coefficients of variation, and throughput over the group's span.
    """
    import pandas as pd
    group = np.asarray(group, np.int64)
    ns = np.asarray(ns, np.int64)
    order = np.lexsort((ns, group))
    g, t = group[order], ns[order]
    same = g[1:] == g[:-1]
    gaps = (np.diff(t)[same]) / 1e9
    sizes = group_stats(group, size, ngroups)
    spacing = group_stats(g[1:][same], gaps, ngroups)
    first = np.full(ngroups, np.nan)
    last = np.full(ngroups, np.nan)
    if len(t):
        starts = np.flatnonzero(np.r_[True, ~same])
        ends = np.r_[starts[1:], len(t)] - 1
        first[g[starts]], last[g[ends]] = t[starts], t[ends]
    span = (last - first) / 1e9
    with np.errstate(invalid="ignore", divide="ignore"):
        frame = pd.DataFrame({
            "events": sizes["count"],
            "bytes": sizes["sum"].astype(np.int64),
            "mean_size": sizes["mean"],
            "p50_size": sizes["p50"],
            "p5_size": sizes["p5"],
            "p95_size": sizes["p95"],
            "cv_size": _cv(sizes),
            "mean_spacing_s": spacing["mean"],
            "p50_spacing_s": spacing["p50"],
            "p5_spacing_s": spacing["p5"],
            "p95_spacing_s": spacing["p95"],
            "p99_spacing_s": spacing["p99"],
            "cv_spacing": _cv(spacing),
            "span_s": span,
            "throughput_bps": np.where(span > 0, sizes["sum"] * 8 / span, np.nan),
            "first_ns": first,
        })
    return frame


def _cv(stats: dict) -> np.ndarray:
    """Coefficient of variation; rounding noise of a constant series reads as 0."""
    cv = stats["std"] / stats["mean"]
    return np.where(np.abs(cv) < 1e-9, 0.0, cv)


def modulation(trace: Trace, sockid: int | None = None, data_only: bool = True):
    """Per stream and layer (send path SOCK/TCP/IP/DEV, then receive path): the modulation table.

    data_only leaves out events that moved no data (pure ACKs, EOF reads, errors),
    as the paper's Table II does; TCP rows include retransmissions, also counted
    alone in `retrans`.  With data_only False every event counts, and `errors`
    counts those whose size is an error code: they add nothing to bytes or sizes.

    The trace is read in batches into per-stream accumulators (memory does not grow
    with the file); quantiles are exact, which may take a second pass.
    """
    import pandas as pd
    return pd.DataFrame(modulation_columns(trace, sockid, data_only))


def modulation_columns(trace: Trace, sockid: int | None = None, data_only: bool = True) -> dict:
    """modulation() as columns (name -> array), without pandas."""
    codes = sorted(fmt.NETWORK_EVENTS)
    return _Modulation(data_only).run(lambda: trace.time_batches(codes, sockid))


def modulation_of(ns: np.ndarray, size: np.ndarray, event: np.ndarray, sid: np.ndarray,
                  data_only: bool = True):
    """The modulation table of network events given as columns (what modulation() reads
    from a trace; the trace library computes it from Parquet with this same function)."""
    import pandas as pd
    batch = Batch(np.asarray(sid, np.uint64), np.asarray(event), np.asarray(ns, np.int64),
                  np.asarray(size, np.int64))
    return pd.DataFrame(_Modulation(data_only).run(lambda: [batch]))


ROW_OF_EVENT = np.zeros(fmt.EVENT_TABLE_SIZE, np.int64)
for _ev, _where in fmt.NETWORK_EVENTS.items():
    ROW_OF_EVENT[_ev] = LAYER_ROWS.index(_where)
NROWS = len(LAYER_ROWS)
SIZE_TOP = np.iinfo(np.int32).max
RANK_CELLS = 1 << 23          # histogram cells per quantity (zeroed lazily: resident only where used)
INT64_MIN = np.iinfo(np.int64).min


class _Spacing:
    """Gaps between consecutive events of each group, from batches in time order."""

    def __init__(self):
        self.cols = Growing(first=(np.int64, np.iinfo(np.int64).max), last=(np.int64, INT64_MIN))

    def gaps(self, group: np.ndarray, ns: np.ndarray, ordered: bool, ngroups: int):
        """(group, gap ns) of every event after its group's first, and per group the
        batch's gap count and sum; updates first and last.  Each group's gaps come in
        time order (its gap from the batch before first).  A batch in time order is
        taken a slice at a time: sorting a cache-sized slice is twice as fast."""
        self.cols.cover(ngroups)
        lib = c_loops()
        if lib is not None:
            return self._gaps_c(lib, group, ns, ordered, ngroups)
        if not ordered or len(group) <= SLICE:
            gap_group, gap, count, total = self._gaps(group, ns, ordered, ngroups)
            return gap_group, gap, count, total.astype(np.float64)
        parts = [self._gaps(group[lo:lo + SLICE], ns[lo:lo + SLICE], True, ngroups)
                 for lo in range(0, len(group), SLICE)]
        gap_group, gap, count, total = zip(*parts)
        return np.concatenate(gap_group), np.concatenate(gap), sum(count), sum(total).astype(np.float64)

    def _gaps_c(self, lib, group: np.ndarray, ns: np.ndarray, ordered: bool, ngroups: int):
        """gaps() in one C loop over the events in time order; each group's gaps come in
        the same order as from _gaps, so the sums over them are the same."""
        if not ordered:
            order = np.argsort(ns, kind="stable")
            group, ns = group[order], ns[order]
        group, ns = int64s(group), int64s(ns)
        gap_group, gap = np.empty(len(ns), np.int64), np.empty(len(ns), np.int64)
        count, total = np.empty(ngroups, np.int64), np.empty(ngroups, np.int64)
        first, last = self.cols.view("first"), self.cols.view("last")
        k = lib.magnet_gaps(group.ctypes.data, ns.ctypes.data, len(ns), ngroups, first.ctypes.data,
                            last.ctypes.data, gap_group.ctypes.data, gap.ctypes.data,
                            count.ctypes.data, total.ctypes.data)
        return gap_group[:k], gap[:k], count, total.astype(np.float64)

    def _gaps(self, group: np.ndarray, ns: np.ndarray, ordered: bool, ngroups: int):
        """gaps() of one slice, sorted by group; the sum is int64 (exact over slices)."""
        if not len(group):
            return group, ns, np.zeros(ngroups, np.int64), np.zeros(ngroups, np.int64)
        key = group.astype(np.uint16) if ngroups <= 1 << 16 else group   # 16 bits: a radix sort
        if ordered:
            order = np.argsort(key, kind="stable")
        else:
            order = np.argsort(ns, kind="stable")
            order = order[np.argsort(key[order], kind="stable")]
        per_group = np.bincount(group, minlength=ngroups)
        runs = np.flatnonzero(per_group)                    # one run per group, in order
        g, t = np.repeat(runs, per_group[runs]), ns[order]  # repeat: cheaper than group[order]
        ends = np.cumsum(per_group[runs]) - 1
        starts = ends - per_group[runs] + 1
        first, last = self.cols.view("first"), self.cols.view("last")
        before = last[runs]
        seen = before != INT64_MIN
        first[runs] = np.minimum(first[runs], t[starts])
        last[runs] = t[ends]
        count, total = np.zeros(ngroups, np.int64), np.zeros(ngroups, np.int64)
        count[runs] = ends - starts + seen                   # gaps sum to the run's span
        total[runs] = (t[ends] - t[starts]) + np.where(seen, t[starts] - np.where(seen, before, 0), 0)
        gap = np.empty_like(t)
        np.subtract(t[1:], t[:-1], out=gap[1:])
        gap[starts] = t[starts] - before                    # a run's first: from the batch before
        if seen.all():
            return g, gap, count, total
        keep = np.ones(len(t), bool)
        keep[starts[~seen]] = False                          # a group's first event has no gap
        return g[keep], gap[keep], count, total


class _Modulation:
    """Accumulators of the modulation table, fed batch by batch."""

    def __init__(self, data_only: bool):
        self.data_only = data_only
        self.streams = Index()
        self.counts = Growing(events=(np.int64, 0), retrans=(np.int64, 0), errors=(np.int64, 0),
                              bytes=(np.int64, 0))
        self.spacing = _Spacing()
        self.size_moments, self.gap_moments = Moments(), Moments()
        self.size_ranks = OrderStats(m=10, top=SIZE_TOP, cells=RANK_CELLS)
        self.gap_ranks = OrderStats(m=7, top=(1 << 52) - 1, cells=RANK_CELLS)

    def run(self, batches):
        for prepared in ahead(batches(), self._prepare):
            self._accumulate(*prepared)
        self._want()
        while True:
            sizes_open, gaps_open = not self.size_ranks.resolve(), not self.gap_ranks.resolve()
            if not (sizes_open or gaps_open):
                return self._columns()
            for batch in batches():                   # more passes: only what is still open
                self._refeed(batch, sizes_open, gaps_open)

    def _groups(self, batch: Batch):
        """The batch's kept events and their groups (stream index * rows + layer row)."""
        keep = batch.sockid != 0
        if self.data_only:
            keep &= batch.size > 0
        b = batch if keep.all() else batch.part(keep)
        group = self.streams.cells(b.sockid, b.event, ROW_OF_EVENT, NROWS)
        return b, group, len(self.streams) * NROWS

    def _prepare(self, batch: Batch):
        """Counts and size moments of a batch, its sizes and gaps: runs a batch ahead of _accumulate, on
        another thread (each accumulator is touched by one of the two only)."""
        b, group, ngroups = self._groups(batch)
        c = self.counts
        c.cover(ngroups)
        per_group, size_sum = count_and_sum(group, b.size, ngroups)
        c.view("events")[:] += per_group
        present = np.flatnonzero(per_group)
        retrans = b.event == Event.TCP_RETRANS
        if retrans.any():
            c.view("retrans")[:] += np.bincount(group[retrans], minlength=ngroups)
        g, size, sized_per_group = group, b.size, per_group
        if not self.data_only and size.min(initial=0) < 0:
            sized = size >= 0
            c.view("errors")[:] += np.bincount(group[~sized], minlength=ngroups)
            g, size = group[sized], size[sized]
            sized_per_group, size_sum = count_and_sum(g, size, ngroups)
        c.view("bytes")[:] += np.rint(size_sum).astype(np.int64)
        self.size_moments.add(g, size, ngroups, sized_per_group, size_sum)
        return ngroups, present, (g, size), self.spacing.gaps(group, b.ns, b.ordered, ngroups)

    def _accumulate(self, ngroups: int, present: np.ndarray, sizes, gaps) -> None:
        g, size = sizes
        self.size_ranks.add(g, size, present)
        gap_group, gap, gap_count, gap_sum = gaps
        self.gap_moments.add(gap_group, gap, ngroups, gap_count, gap_sum)
        self.gap_ranks.add(gap_group, gap, present)

    def _refeed(self, batch: Batch, sizes: bool, gaps: bool) -> None:
        b, group, ngroups = self._groups(batch)
        if sizes:
            sized = b.size >= 0
            need = sized & self.size_ranks.needs(group)
            self.size_ranks.add(group[need], b.size[need])
        if gaps:
            need = self.gap_ranks.needs(group)
            gap_group, gap, _, _ = self.pass_spacing.gaps(group[need], b.ns[need], b.ordered, ngroups)
            self.gap_ranks.add(gap_group, gap)

    # ------------------------------------------------------------ quantiles ---
    def _order(self) -> np.ndarray:
        """Group ids in the table's order: streams by sockid, then the layer rows."""
        by_sockid = np.argsort(self.streams.ids, kind="stable")
        return (by_sockid[:, None] * NROWS + np.arange(NROWS)).reshape(-1)

    def _want(self) -> None:
        order = self._order()
        self.size_at = _ranks(self.size_ranks, self.size_moments.count()[order], order, QUANTILES)
        self.gap_at = _ranks(self.gap_ranks, self.gap_moments.count()[order], order, QUANTILES)
        self.pass_spacing = _Spacing()

    # ---------------------------------------------------------------- table ---
    def _columns(self) -> dict:
        """The table's columns, one row per stream and layer that has events."""
        order = self._order()
        n = len(order)
        c = {name: self.counts.view(name)[order] if n else np.zeros(0, np.int64)
             for name in ("events", "retrans", "errors", "bytes")}
        sizes = _summary(self.size_moments, self.size_ranks, self.size_at, order, 1.0)
        spacing = _summary(self.gap_moments, self.gap_ranks, self.gap_at, order, 1e9)
        first = self.spacing.cols.view("first")[order].astype(np.float64) if n else np.zeros(0)
        last = self.spacing.cols.view("last")[order].astype(np.float64) if n else np.zeros(0)
        empty = c["events"] == 0
        first[empty], last[empty] = np.nan, np.nan
        span = (last - first) / 1e9
        total = c["bytes"].astype(np.float64)
        streams = len(self.streams)
        with np.errstate(invalid="ignore", divide="ignore"):
            columns = {
                "sockid": np.repeat(np.sort(self.streams.ids), NROWS),
                "layer": np.tile(np.array([layer for layer, _ in LAYER_ROWS], object), streams),
                "direction": np.tile(np.array([d for _, d in LAYER_ROWS], object), streams),
                "events": c["events"], "retrans": c["retrans"],
                **({} if self.data_only else {"errors": c["errors"]}),
                "bytes": c["bytes"],
                "mean_size": sizes["mean"], "p50_size": sizes["p50"], "p5_size": sizes["p5"],
                "p95_size": sizes["p95"], "cv_size": sizes["cv"],
                "mean_spacing_s": spacing["mean"], "p50_spacing_s": spacing["p50"],
                "p5_spacing_s": spacing["p5"], "p95_spacing_s": spacing["p95"],
                "p99_spacing_s": spacing["p99"], "cv_spacing": spacing["cv"],
                "span_s": span,
                "throughput_bps": np.where(span > 0, total * 8 / span, np.nan),
                "first_ns": first,
            }
        has = c["events"] > 0
        return {name: column[has] for name, column in columns.items()}


def _ranks(ranks: OrderStats, count: np.ndarray, order: np.ndarray, quantiles) -> dict:
    """Ask for the order statistics of each quantile, as group_stats interpolates them
    (the same float arithmetic, on the same positions of one sorted array of all groups)."""
    start = np.concatenate(([0], np.cumsum(count)[:-1])).astype(np.int64)
    has = count > 0
    plan, wants = {}, []
    for q in quantiles:
        exact = start + q * np.maximum(count - 1, 0)
        lo = np.floor(exact).astype(np.int64)
        hi = np.minimum(lo + 1, start + count - 1)
        plan[q] = (exact - lo, len(wants))
        wants += [lo - start, hi - start]
    rank = np.stack(wants)                                     # (2 * quantiles, groups)
    groups = np.broadcast_to(order, rank.shape)
    ranks.want(groups[:, has].reshape(-1), rank[:, has].reshape(-1))
    return {"plan": plan, "has": has, "shape": (len(wants), int(has.sum()))}


def _summary(moments: Moments, ranks: OrderStats, at: dict, order: np.ndarray, unit: float) -> dict:
    """mean, cv and quantiles per group (in table order), in `unit`s."""
    n = len(order)
    count = moments.count()[order] if n else np.zeros(0, np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (moments.total()[order] / unit) / count if n else np.zeros(0)
        std = moments.std()[order] / unit if n else np.zeros(0)
        out = {"mean": mean, "cv": np.where(np.abs(std / mean) < 1e-9, 0.0, std / mean)}
    values = ranks.values.reshape(at["shape"]).astype(np.float64) / unit if at["shape"][1] else None
    for q, (frac, k) in at["plan"].items():
        col = np.full(n, np.nan)
        if values is not None:
            f = frac[at["has"]]
            col[at["has"]] = values[k] * (1 - f) + values[k + 1] * f
        out[f"p{q * 100:g}"] = col
    return out


def stack_table(series: list[LabelledSeries]):
    """Table II for a sequence of stacks: one row per (label, ns, size) series.

    Adds the paper's comparison: bandwidth of each row relative to the first (the
    application), in percent.
    """
    labels = [label for label, _, _ in series]
    group = np.concatenate([np.full(len(ns), i) for i, (_, ns, _) in enumerate(series)]).astype(np.int64)
    ns = np.concatenate([np.asarray(ns, np.int64) for _, ns, _ in series])
    size = np.concatenate([np.asarray(sz, np.int64) for _, _, sz in series])
    table = series_table(group, ns, size, len(series))
    table.insert(0, "stack", labels)
    app = table["throughput_bps"].iloc[0]
    table["bandwidth_vs_app_pct"] = 100.0 * table["throughput_bps"] / app - 100.0
    return table


def ordinal_label(k: int) -> str:
    """'Application' for 0, then '1st TCP stack', '2nd TCP stack', ..."""
    if k == 0:
        return "Application"
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix} TCP stack"
