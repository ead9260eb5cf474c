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
from magnetlib import metrics

Series = tuple[str, np.ndarray, np.ndarray]      # (label, absolute ns, bytes)

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


def trace_series(path: str | os.PathLike, label: str, layer: str, direction: str = "send") -> Series:
    """One layer's data events of a trace (every stream) as a series."""
    with magnetlib.open(path) as trace:
        d = demand_mod.extract(trace.check(), None, direction, layer)
    return label, d.time_ns + d.start_ns, d.size


def chain_series(demand: str | os.PathLike, traces: list[str | os.PathLike]) -> list[Series]:
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


def stack_table(series: list[Series]):
    """Table II: one row per series (metrics.stack_table)."""
    return metrics.stack_table(series)


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


def write_csv(table, path: str | os.PathLike) -> Path:
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    table.to_csv(tmp, index=False)
    os.replace(tmp, path)
    return path


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_bandwidth(series: list[Series], path: str | os.PathLike, bin_s: float | None = None) -> Path:
    """Fig. 9 style: bandwidth of each series over time, in bins (default 1 s, or 1/20 of the run)."""
    plt = _pyplot()
    start = min(int(ns[0]) for _, ns, _ in series if len(ns))
    end = max(int(ns[-1]) for _, ns, _ in series if len(ns))
    span_s = max((end - start) / 1e9, 1e-3)
    bin_s = bin_s or min(1.0, span_s / 20)
    edges = np.arange(0, span_s + bin_s, bin_s)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for label, ns, size in series:
        bytes_per_bin, _ = np.histogram((ns - start) / 1e9, bins=edges, weights=size)
        ax.step(edges[:-1], bytes_per_bin * 8 / bin_s / 1e6, where="post", label=label)
    ax.set_xlabel("time, s")
    ax.set_ylabel(f"bandwidth, Mb/s ({bin_s:g} s bins)")
    ax.set_ylim(bottom=0)
    ax.set_title("Effect of multiple TCP stacks")
    ax.legend()
    return _save(fig, plt, path)


def plot_modulation(series: list[Series], path: str | os.PathLike, at_s: float | None = None,
                    window_s: float = 1.0) -> Path:
    """Fig. 8 style: one second of application writes and of each stack's wire segments.

    The window starts `at_s` after the first write (default: one minute in, as in
    the paper, or the middle of a shorter run).
    """
    plt = _pyplot()
    start = int(series[0][1][0])
    span_s = (max(int(ns[-1]) for _, ns, _ in series) - start) / 1e9
    if at_s is None:
        at_s = 60.0 if span_s >= 60.0 + window_s else max(0.0, span_s / 2 - window_s / 2)
    lo, hi = start + int(at_s * 1e9), start + int((at_s + window_s) * 1e9)
    fig, axes = plt.subplots(len(series), 1, figsize=(8, 1.6 + 1.4 * len(series)), sharex=True,
                             squeeze=False)
    for ax, (label, ns, size) in zip(axes[:, 0], series):
        keep = (ns >= lo) & (ns < hi)
        t = (ns[keep] - lo) / 1e9 + at_s
        ax.vlines(t, 0, size[keep], linewidth=1)
        ax.plot(t, size[keep], ".", markersize=3)
        ax.set_ylabel("bytes")
        ax.set_title(f"{label}: {int(keep.sum())} events", fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("time since the first write, s")
    axes[-1, 0].set_xlim(at_s, at_s + window_s)
    return _save(fig, plt, path)


def _save(fig, plt, path) -> Path:
    path = Path(path)
    fig.tight_layout()
    tmp = path.with_name(path.stem + ".tmp" + path.suffix)
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return path


def write_report(series: list[Series], out_dir: str | os.PathLike, plots: bool = True):
    """Table II as CSV (table.csv) and the two plots; returns (table, [files written])."""
    out = Path(out_dir)
    table = stack_table(series)
    files = [write_csv(table, out / "table.csv")]
    if plots:
        files.append(plot_bandwidth(series, out / "bandwidth.png"))
        files.append(plot_modulation(series, out / "modulation.png"))
    return table, files
