"""The successive-stack report, shared by every replayer (`magnet replay ns3`, `magnet replay tcp`).

A chain is a list of series (label, ns, size): the application's writes, then
what each TCP stack put on its wire.  From it come the paper's Table II
(magnetlib.metrics.stack_table, so simulated and real stacks print alike),
its CSV, a Fig. 9 style plot of bandwidth per stack over time and a Fig. 8
style plot of one second of application writes against wire segments.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

import magnetlib
from magnetlib import demand as demand_mod
from magnetlib import private
from magnetlib import metrics
from magnetlib.metrics import LabelledSeries

# Table II columns as printed: metric name -> heading.
TABLE_COLUMNS = {
    "stack": "Trial",
    "events": "events",
    "mean_size": "data size B",
    "p50_size": "p50 B",
    "p5_size": "p5 B",
    "p95_size": "p95 B",
    "cv_size": "CV size",
    "mean_spacing_s": "spacing s",
    "p50_spacing_s": "p50 s",
    "p95_spacing_s": "p95 s",
    "cv_spacing": "CV spacing",
    "throughput_bps": "Mb/s",
    "bandwidth_vs_app_pct": "vs app %",
}


def trace_series(path: str | os.PathLike, label: str, layer: str, direction: str = "send") -> LabelledSeries:
    """One layer's data events of a trace (every stream) as a series."""
    with magnetlib.open(path) as trace:
        d = demand_mod.extract(trace.check(), None, direction, layer)
    return label, d.time_ns + d.start_ns, d.size


def chain_series(demand: str | os.PathLike, traces: list[str | os.PathLike]) -> list[LabelledSeries]:
    """The application's writes (the demand file), then each stack's DEV_SEND.

    The demand, not the first stack's SOCK_SEND records: a write the send buffer
    could not take whole reaches the socket in pieces, but it is one write of
    the application.  Its times are moved to the first stack's clock: its first
    write at the first stack's first SOCK_SEND.
    """
    label, ns, size = trace_series(demand, metrics.ordinal_label(0), "sock")
    first_write = trace_series(traces[0], label, "sock")[1][0]
    rows = [(label, ns - ns[0] + first_write, size)]
    rows += [trace_series(path, metrics.ordinal_label(k), "dev") for k, path in enumerate(traces, 1)]
    return rows


def format_table(table) -> str:
    """Table II as aligned text: sizes in bytes, spacing in seconds, bandwidth in Mb/s."""
    shown = table[list(TABLE_COLUMNS)].rename(columns=TABLE_COLUMNS)
    shown["Mb/s"] = shown["Mb/s"] / 1e6
    shown["vs app %"] = shown["vs app %"].round(1) + 0.0       # no "-0.0" for rounding noise
    formats = {name: "{:.0f}".format for name in ("data size B", "p50 B", "p5 B", "p95 B")}
    formats.update({name: "{:.6f}".format for name in ("spacing s", "p50 s", "p95 s")})
    formats.update({"CV size": "{:.3f}".format, "CV spacing": "{:.3f}".format,
                    "Mb/s": "{:.4f}".format, "vs app %": "{:+.1f}".format})
    return shown.to_string(index=False, formatters=formats, na_rep="-")


# CSV headings with their units; the rest are counts, ratios or already say their unit.
CSV_UNITS = {"bytes": "bytes", "mean_size": "mean_size_bytes", "p50_size": "p50_size_bytes",
             "p5_size": "p5_size_bytes", "p95_size": "p95_size_bytes"}


def csv_frame(table):
    """Table II for a CSV: the stack's number first (0: the application), every other
    column numeric with its unit in the heading."""
    out = table.rename(columns=CSV_UNITS)
    if "k" not in out:
        out.insert(0, "k", range(len(out)))
    return out.rename(columns={"stack": "label"})


def write_csv(table, path: str | os.PathLike) -> Path:
    path = Path(path)
    with private.replacing(path) as tmp:
        table.to_csv(tmp, index=False)
    return path


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


ROUND_BINS_S = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 300)


def round_bin(span_s: float, bins: int = 20) -> float:
    """The largest round bin width that still cuts `span_s` into at least `bins` bins."""
    fitting = [b for b in ROUND_BINS_S if span_s / b >= bins]
    return fitting[-1] if fitting else ROUND_BINS_S[0]


def bandwidth_panel(ax, label: str, ns: np.ndarray, size: np.ndarray, start: int, edges: np.ndarray,
                    colour: str) -> None:
    """One series' bandwidth in bins of `edges` (seconds from `start`), with its mean
    over its own span as a dashed line."""
    bin_s = edges[1] - edges[0]
    per_bin, _ = np.histogram((ns - start) / 1e9, bins=edges, weights=size)
    mbps = per_bin * 8 / bin_s / 1e6
    ax.fill_between(edges[:-1], mbps, step="post", alpha=0.35, color=colour)
    ax.step(edges[:-1], mbps, where="post", color=colour, linewidth=1)
    mean = size.sum() * 8 / max((ns[-1] - ns[0]) / 1e9, bin_s) / 1e6 if len(ns) > 1 else 0.0
    ax.axhline(mean, color="k", linestyle="--", linewidth=0.8)
    ax.set_title(f"{label}: {mean:.3g} Mb/s over its span (dashed)", fontsize=8, loc="left")
    ax.set_ylim(bottom=0)


def time_bins(series: list[LabelledSeries], bin_s: float | None = None) -> tuple[int, np.ndarray]:
    """The common start (ns) and round bin edges (s) of a set of series."""
    start = min(int(ns[0]) for _, ns, _ in series if len(ns))
    end = max(int(ns[-1]) for _, ns, _ in series if len(ns))
    span_s = max((end - start) / 1e9, 1e-3)
    bin_s = bin_s or round_bin(span_s)
    return start, np.arange(0, span_s + bin_s, bin_s)


def plot_bandwidth(series: list[LabelledSeries], path: str | os.PathLike, bin_s: float | None = None) -> Path:
    """Fig. 9 style: bandwidth of each series over time, one panel per series on a
    shared scale (identical stacks would hide each other on one axes), in round bins."""
    plt = _pyplot()
    start, edges = time_bins(series, bin_s)
    fig, axes = plt.subplots(len(series), 1, figsize=(8, 1.2 + 1.3 * len(series)), sharex=True,
                             sharey=True, squeeze=False)
    for i, (ax, (label, ns, size)) in enumerate(zip(axes[:, 0], series)):
        bandwidth_panel(ax, label, ns, size, start, edges, f"C{i}")
        ax.set_ylabel("Mb/s")
    axes[-1, 0].set_xlabel(f"time, s (bins of {edges[1] - edges[0]:g} s)")
    axes[-1, 0].set_xlim(0, edges[-1])
    fig.suptitle("Effect of multiple TCP stacks: bandwidth of each (Fig. 9 style)", fontsize=11)
    return _save(fig, plt, path)


def stacked(ns: np.ndarray, size: np.ndarray, width_ns: float):
    """(x, base, rank) to draw events as bars: an event less than `width_ns` (one
    pixel) after the previous one shares its x and is stacked on it; rank is its
    place in its stack (0: the bottom one)."""
    order = np.argsort(ns, kind="stable")
    ns, size = ns[order], size[order]
    first = np.r_[True, np.diff(ns) >= width_ns][:len(ns)]
    ends = np.cumsum(size)
    base = ends - size - np.maximum.accumulate(np.where(first, ends - size, 0))
    x = np.maximum.accumulate(np.where(first, ns, 0))
    index = np.arange(len(ns))
    rank = index - np.maximum.accumulate(np.where(first, index, 0))
    inverse = np.empty_like(order)
    inverse[order] = index
    return x[inverse], base[inverse], rank[inverse]


def plot_modulation(series: list[LabelledSeries], path: str | os.PathLike, at_s: float | None = None,
                    window_s: float = 1.0) -> Path:
    """Fig. 8 style: one second of application writes and of each stack's wire segments.

    Every event is drawn: events within one pixel of each other (a write's
    segments leave in a burst) are stacked, in alternating shades.  The window
    starts `at_s` after the first write (default: one minute in, as in the paper,
    or the middle of a shorter run).
    """
    plt = _pyplot()
    start = int(series[0][1][0])
    span_s = (max(int(ns[-1]) for _, ns, _ in series) - start) / 1e9
    if at_s is None:
        at_s = 60.0 if span_s >= 60.0 + window_s else max(0.0, span_s / 2 - window_s / 2)
    lo, hi = start + int(at_s * 1e9), start + int((at_s + window_s) * 1e9)
    fig, axes = plt.subplots(len(series), 1, figsize=(8, 1.6 + 1.4 * len(series)), sharex=True,
                             squeeze=False)
    pixel_ns = window_s * 1e9 / 800
    for ax, (label, ns, size) in zip(axes[:, 0], series):
        keep = (ns >= lo) & (ns < hi)
        x, base, rank = stacked(ns[keep], size[keep], pixel_ns)
        t = (x - lo) / 1e9 + at_s
        shade = rank % 2
        for parity, colour in ((0, "C0"), (1, "C1")):
            pick = shade == parity
            ax.vlines(t[pick], base[pick], base[pick] + size[keep][pick], colors=colour, linewidth=1.5)
        instants = len(np.unique(x))
        ax.set_ylabel("bytes")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{label}: {int(keep.sum())} events at {instants} instants "
                     "(simultaneous ones stacked)", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("time since the first write, s")
    axes[-1, 0].set_xlim(at_s, at_s + window_s)
    return _save(fig, plt, path)


def _save(fig, plt, path) -> Path:
    path = Path(path)
    fig.tight_layout()
    with private.replacing(path) as tmp:
        fig.savefig(tmp, dpi=110, format=path.suffix.lstrip("."))
    plt.close(fig)
    return path


def write_report(series: list[LabelledSeries], out_dir: str | os.PathLike, plots: bool = True):
    """Table II as CSV (table.csv) and the two plots; returns (table, [files written])."""
    out = Path(out_dir)
    table = metrics.stack_table(series)
    files = [write_csv(csv_frame(table), out / "table.csv")]
    if plots:
        files.append(plot_bandwidth(series, out / "bandwidth.png"))
        files.append(plot_modulation(series, out / "modulation.png"))
    return table, files
