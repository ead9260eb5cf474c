"""Modulation metrics: how each layer reshapes a stream (the paper's Table II and more).

Everything is computed over whole arrays at once: records are sorted by
(group, value) and per-group statistics come from reduceat and index
arithmetic, never from a Python loop per record.
"""
from __future__ import annotations

import numpy as np

from . import format as fmt
from .trace import Trace

QUANTILES = (0.05, 0.5, 0.95, 0.99)
# Layer rows in stack order, send path first.
LAYER_ROWS = [(layer, d) for d in ("send", "recv") for layer in fmt.LAYERS]


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
    alone in `retrans`.
    """
    codes = sorted(fmt.NETWORK_EVENTS)
    pos = trace.select(codes, sockid)
    ns, size = trace.series(pos)
    return modulation_of(ns, size, trace.column_at("event", pos), trace.column_at("sockid", pos),
                         data_only)


def modulation_of(ns: np.ndarray, size: np.ndarray, event: np.ndarray, sid: np.ndarray,
                  data_only: bool = True):
    """The modulation table of network events given as columns (what modulation() reads
    from a trace; the trace library computes it from Parquet with this same function)."""
    keep = (size > 0) if data_only else np.ones(len(size), bool)
    keep &= sid != 0
    ns, size, event, sid = ns[keep], size[keep], event[keep], sid[keep]
    row_of = np.zeros(fmt.EVENT_TABLE_SIZE, np.int64)
    for ev, where in fmt.NETWORK_EVENTS.items():
        row_of[ev] = LAYER_ROWS.index(where)
    streams, sidx = np.unique(sid, return_inverse=True)
    group = sidx.astype(np.int64) * len(LAYER_ROWS) + row_of[event]
    ngroups = len(streams) * len(LAYER_ROWS)
    table = series_table(group, ns, size, ngroups)
    table.insert(0, "sockid", np.repeat(streams, len(LAYER_ROWS)))
    table.insert(1, "layer", [layer for _ in streams for layer, _ in LAYER_ROWS])
    table.insert(2, "direction", [d for _ in streams for _, d in LAYER_ROWS])
    retrans = np.bincount(group[event == fmt.Event.TCP_RETRANS], minlength=ngroups)
    table.insert(4, "retrans", retrans)
    return table[table["events"] > 0].reset_index(drop=True)


def stack_table(series: list[tuple[str, np.ndarray, np.ndarray]]):
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
