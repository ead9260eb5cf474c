"""linkem's per-packet link log (`--log DIR`): read, summarise, plot, like mahimahi's link
logs and mm-graph.

    log = linklog.read("DIR")                  # both directions
    log.records("forward")                     # numpy structured array, memory-mapped
    for line in log.summary_lines(): print(line)
    log.plot("f.png")                          # throughput and queueing delay over time

DIR holds `forward.linklog` and `reverse.linklog` (one per direction, written by the
emulator: a 16-byte header, the magic b"LINKEMLG", the format's version and the record
size as native u32, then one 40-byte record per packet that entered the path, in
arrival order: RECORD below, replay/linkem/core.h's struct lk_record), `path.json` (the
path it emulated) and `summary.txt` (summary_lines(), written when the emulator stops).
The forward direction is the one from the path's left end (the client of `magnet path`,
the sender of `magnet replay tcp`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from magnetlib import knobs

from .errors import ReplayError

MAGIC = b"LINKEMLG"
VERSION = 1
HEADER = np.dtype([("magic", "S8"), ("version", "=u4"), ("record_size", "=u4")])
RECORD = np.dtype([("arrival_ns", "=i8"),       # entered the path (CLOCK_MONOTONIC)
                   ("departure_ns", "=i8"),     # leaves it, as emulated; -1: dropped
                   ("wait_ns", "=i8"),          # waited in the bottleneck's queue; -1: never joined it
                   ("bytes", "=u4"),            # IP bytes
                   ("queue_packets", "=u4"),    # the bottleneck's queue as the packet found it
                   ("queue_bytes", "=u4"),      # (the packet being serialised not counted)
                   ("reason", "u1"),            # REASONS
                   ("pad", "u1", 3)])
REASONS = ("delivered", "queue drop", "random loss", "over the MTU", "unroutable", "overflow")
DIRECTIONS = ("forward", "reverse")
SUMMARY = "summary.txt"


class LinkLogError(ReplayError):
    """A link log that cannot be read: "FILE: problem"."""


def read_file(path: str | Path) -> np.ndarray:
    """One direction's records (whole records only; a log cut short keeps what it has)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        header = np.fromfile(path, HEADER, count=1)
    except OSError as e:
        raise LinkLogError(str(path), e.strerror or str(e)) from None
    if len(header) != 1 or header["magic"][0] != MAGIC:
        raise LinkLogError(str(path), "not a linkem link log (no LINKEMLG header)")
    if header["version"][0] != VERSION or header["record_size"][0] != RECORD.itemsize:
        raise LinkLogError(str(path), f"link log version {header['version'][0]} with "
                                      f"{header['record_size'][0]}-byte records: this magnet reads "
                                      f"version {VERSION}, {RECORD.itemsize} bytes")
    count = (size - HEADER.itemsize) // RECORD.itemsize
    if count == 0:
        return np.zeros(0, RECORD)
    return np.memmap(path, RECORD, mode="r", offset=HEADER.itemsize, shape=(count,))


@dataclass
class Summary:
    """One direction's log in numbers."""
    direction: str
    packets: int
    bytes: int
    delivered: int
    delivered_bytes: int
    drops: dict[str, int]                 # reason -> packets
    queue_peak_packets: int
    queue_peak_bytes: int
    wait_mean_ms: float
    wait_p99_ms: float
    throughput_bps: float                 # delivered bytes over first arrival to last departure
    span_s: float

    def line(self) -> str:
        drops = ", ".join(f"{n} {why}" for why, n in self.drops.items() if n) or "no drops"
        return (f"{self.direction}: {self.packets} packets in ({self.bytes} B), {self.delivered} "
                f"delivered, {drops}; queue peak {self.queue_peak_packets} packets "
                f"({self.queue_peak_bytes} B); queueing delay mean {self.wait_mean_ms:.2f} ms, p99 "
                f"{self.wait_p99_ms:.2f} ms; throughput {knobs.fmt_rate(self.throughput_bps)} "
                f"over {self.span_s:.2f} s")


def summarise(direction: str, r: np.ndarray) -> Summary:
    passed = r["reason"] == 0
    waited = r["wait_ns"][passed]
    joined = r["wait_ns"] > 0
    drops = np.bincount(r["reason"], minlength=len(REASONS))
    span = (int(r["departure_ns"][passed].max()) - int(r["arrival_ns"][0])) / 1e9 if passed.any() else 0.0
    delivered_bytes = int(r["bytes"][passed].sum())
    return Summary(direction, len(r), int(r["bytes"].sum()), int(passed.sum()), delivered_bytes,
                   {why: int(n) for why, n in zip(REASONS[1:], drops[1:])},
                   int((r["queue_packets"] + joined).max(initial=0)),
                   int((r["queue_bytes"] + np.where(joined, r["bytes"], 0)).max(initial=0)),
                   float(waited.mean()) / 1e6 if len(waited) else 0.0,
                   float(np.percentile(waited, 99)) / 1e6 if len(waited) else 0.0,
                   delivered_bytes * 8 / span if span > 0 else 0.0, span)


class LinkLog:
    """A log directory: both directions' records and the path they crossed."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise LinkLogError(str(self.folder), "no such directory (a linkem --log directory)")
        files = {d: self.folder / f"{d}.linklog" for d in DIRECTIONS}
        missing = [str(f) for f in files.values() if not f.exists()]
        if missing:
            raise LinkLogError(missing[0], "missing (not a linkem --log directory?)")
        self._records = {d: read_file(f) for d, f in files.items()}
        meta = self.folder / "path.json"
        self.path: dict = json.loads(meta.read_text()) if meta.exists() else {}

    def records(self, direction: str) -> np.ndarray:
        return self._records[direction]

    def summaries(self) -> list[Summary]:
        return [summarise(d, self._records[d]) for d in DIRECTIONS]

    def summary_lines(self) -> list[str]:
        return [s.line() for s in self.summaries()]

    def plot(self, out: str | Path, bin_s: float | None = None) -> Path:
        """mm-graph's two panels per direction: throughput (offered and delivered, and the
        link's rate) and each delivered packet's queueing delay, over time."""
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        starts = [int(r["arrival_ns"][0]) for r in self._records.values() if len(r)]
        t0 = min(starts) if starts else 0
        fig, axes = plt.subplots(2, 2, figsize=(12, 6), sharex=True, squeeze=False)
        for col, direction in enumerate(DIRECTIONS):
            self._plot_direction(axes[:, col], direction, t0, bin_s)
        axes[1, 0].set_xlabel("time (s)")
        axes[1, 1].set_xlabel("time (s)")
        fig.tight_layout()
        fig.savefig(out, dpi=120)
        plt.close(fig)
        return Path(out)

    def _plot_direction(self, axes, direction: str, t0: int, bin_s: float | None) -> None:
        r = self._records[direction]
        top, bottom = axes
        top.set_title(direction)
        top.set_ylabel("Mbit/s")
        bottom.set_ylabel("queueing delay (ms)")
        if not len(r):
            return
        passed = r["reason"] == 0
        span = (int(r["arrival_ns"].max()) - t0) / 1e9
        width = bin_s or max(0.01, span / 200)
        for label, times, keep in (("offered", r["arrival_ns"], slice(None)),
                                   ("delivered", r["departure_ns"], passed)):
            t = (times[keep] - t0) / 1e9
            bins = np.floor(t / width).astype(np.int64)
            rate = np.bincount(bins, weights=r["bytes"][keep], minlength=0) * 8 / width / 1e6
            top.step(np.arange(len(rate)) * width, rate, where="post", label=label)
        capacity = self.path.get("rate_bps") if direction == "forward" or self.path.get("duplex") else None
        if capacity:
            top.axhline(capacity / 1e6, color="grey", linestyle="--", label="link rate")
        top.legend(loc="upper right", fontsize="small")
        bottom.plot((r["arrival_ns"][passed] - t0) / 1e9, r["wait_ns"][passed] / 1e6, ".", markersize=2)


def read(folder: str | Path) -> LinkLog:
    return LinkLog(folder)


def write_summary(folder: str | Path) -> list[str]:
    """summary.txt of a log directory (one line per direction); the lines."""
    lines = read(folder).summary_lines()
    (Path(folder) / SUMMARY).write_text("\n".join(lines) + "\n")
    return lines
