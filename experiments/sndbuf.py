"""Study 5, PAM 2002 Fig. 11: the sender's TCP buffer over time while streaming.

Each workload (an MP3-like stream, the FTP-like 10 KB every 20 ms, a bulk
transfer) runs for real between two network namespaces through a rate-limited
hop, once with the kernel's autotuned send buffer and once with SO_SNDBUF set
to 64 KB (the fixed buffer of 2001), captured live by the BPF capture with
extended data.  The buffer's occupancy is `write_seq - snd_una` (bytes the
application has written that the peer has not acknowledged: what the kernel
must keep) at every event of the sending socket; `write_seq - snd_nxt` (not
yet sent, the paper's words for its figure) is shown beside it.  The kernel's
send buffer size itself (sk_sndbuf, `tb` of `ss -m`) is sampled every 0.1 s.

    python -m magnet.experiments.sndbuf [--quick] [--rate 5mbit] [--duration 30]
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

import magnetlib
from magnetlib import knobs, synth
from magnetlib.format import Event, ExtValid
from magnet.replay import netns

from . import common, live

TCP_ACK = 0x10
CASES = {
    "mp3": "MP3 stream, 418-byte frames ~21 ms apart",
    "ftp": "FTP-like, 10 KB writes every 20 ms (4.1 Mb/s)",
    "bulk": "bulk transfer, 64 KB writes as fast as the buffer takes them",
}
PAPER = pd.DataFrame([("MPEG movie stream, Linux 2.4, WAN (PAM 2002 Fig. 11)", "fixed (64 KB era)",
                       6.5 * 1024, 30 * 1024)],
                     columns=["workload", "buffer", "mean_occupancy_B", "max_occupancy_B"])


def build_parser():
    p = common.parser("sndbuf", __doc__)
    p.add_argument("--rate", default="5mbit", help="bottleneck on the sender's end (default 5mbit)")
    p.add_argument("--delay", default=None, help="one-way delay of the emulated path (default none)")
    p.add_argument("--duration", type=float, default=None, help="seconds per run (default 30; --quick: 3)")
    p.add_argument("--buffers", default="auto,65536",
                   help="send buffers to compare: auto (autotuning) or SO_SNDBUF bytes (default auto,65536)")
    p.add_argument("--cases", default=",".join(CASES), help=f"which of {', '.join(CASES)}")
    p.add_argument("--work", type=Path, default=None, help="keep the traces here (default: removed)")
    return p


def demand_of(case: str, duration: float, rate: str, seed: int):
    if case == "mp3":
        return synth.mp3(duration, seed=seed)
    if case == "ftp":
        return synth.ftp(duration, seed=seed)
    return synth.bulk(total_bytes=int(knobs.rate(rate) / 8 * duration))


# ----------------------------------------------------------- the kernel's view ---
class SndbufSampler(threading.Thread):
    """sk_sndbuf (`tb`) and queued bytes (`w`) of the sender's socket from `ss -m`, every 0.1 s.

    The sender's namespace is replay's first one (prefix mgxl<pid>); it exists
    only while a run is on, so the sampler waits for it.
    """

    PATTERN = re.compile(r"skmem:\(r\d+,rb\d+,t\d+,tb(\d+),f\d+,w(\d+)")

    def __init__(self, period_s: float = 0.1):
        super().__init__(daemon=True)
        self.ns = netns.names(f"{live.FAMILY}{os.getpid()}", 1)[0][0]
        self.period, self.samples, self.stopping = period_s, [], threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(self.period):
            if not Path("/run/netns", self.ns).exists():
                continue
            # No state filter: the sender is in CLOSE-WAIT once its peer, which
            # sends nothing, has shut down its side.
            out = subprocess.run(["ss", "-N", self.ns, "-Htmn"],
                                 capture_output=True, text=True).stdout
            now = time.monotonic_ns()
            self.samples += [(now, int(tb), int(w)) for tb, w in self.PATTERN.findall(out)[:1]]

    def stop(self) -> np.ndarray:
        self.stopping.set()
        self.join()
        return np.array(self.samples, np.int64).reshape(-1, 3)


# ---------------------------------------------------------------- occupancy ---
@dataclass
class Occupancy:
    """The send buffer at every event of the sending socket that carries TCP state."""
    ns: np.ndarray          # when
    event: np.ndarray
    unacked: np.ndarray     # write_seq - snd_una (after an incoming ACK: its ack_seq)
    unsent: np.ndarray      # write_seq - snd_nxt
    checks: dict

    def time_mean(self, values: np.ndarray) -> float:
        """Mean over time of a step function sampled at self.ns."""
        if len(values) < 2:
            return float(values.mean()) if len(values) else float("nan")
        dt = np.diff(self.ns)
        return float((values[:-1] * dt).sum() / dt.sum())


def _mod32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a - b on the kernel's 32-bit sequence space, as a signed difference."""
    return ((a.astype(np.int64) - b.astype(np.int64) + 2**31) % 2**32) - 2**31


def occupancy(trace_path: Path, sender: int) -> Occupancy:
    """write_seq - snd_una from the extended data of the sender's events.

    TCP_RECV of an incoming ACK is recorded where TCP starts processing it
    (tracepoint tcp_probe), so its snd_una is the one before the ACK: there the
    ACK's own ack_seq is the new snd_una (when it acknowledges new data).
    """
    with magnetlib.open(trace_path) as trace:
        pos = trace.select(None, sender)
        pos = pos[(trace.column_at("valid", pos) & (ExtValid.TCP_STATE | ExtValid.TCP_INFO)) > 0]
        ns = trace.ns_at(pos)
        col = {name: trace.column_at(name, pos) for name in
               ("event", "size", "valid", "tcp_flags", "write_seq", "snd_una", "snd_nxt", "ack_seq")}
    una = col["snd_una"].astype(np.int64)
    ack = (col["event"] == Event.TCP_RECV) & ((col["valid"] & ExtValid.SEGMENT) > 0) \
        & ((col["tcp_flags"] & TCP_ACK) > 0)
    ack &= (_mod32(col["ack_seq"], una) > 0) & (_mod32(col["write_seq"], col["ack_seq"]) >= 0)
    una = np.where(ack, col["ack_seq"], una)
    checks = consistency(col, una, ack)
    return Occupancy(ns, col["event"], _mod32(col["write_seq"], una), _mod32(col["write_seq"], col["snd_nxt"]),
                     checks)


def consistency(col: dict, una: np.ndarray, ack: np.ndarray) -> dict:
    """Does the extended data hold up? write_seq moves by each write's size, snd_una never
    back, and after an ACK taken as the new snd_una the next event's own snd_una agrees."""
    writes = (col["event"] == Event.SOCK_SEND) & (col["size"] > 0)
    ws = col["write_seq"][writes]
    steps = _mod32(ws[1:], ws[:-1])
    back = _mod32(una[1:], una[:-1]) < 0
    applied = np.flatnonzero(ack[:-1])
    confirmed = _mod32(col["snd_una"][applied + 1], col["ack_seq"][applied]) >= 0
    return {"sock_send": int(writes.sum()), "write_seq_steps_match": int((steps == col["size"][writes][1:]).sum()),
            "write_seq_steps": len(steps), "snd_una_steps_back": int(back.sum()), "acks_applied": int(ack.sum()),
            "acks_confirmed_next": int(confirmed.sum())}


# --------------------------------------------------------------------- runs ---
@dataclass
class Run:
    case: str
    buffer: str
    occ: Occupancy
    kernel: np.ndarray        # (ns, sk_sndbuf, wmem_queued) samples from ss
    run: live.LiveRun

    def row(self, wmem_max: int) -> dict:
        o, info = self.occ, self.run.replay.stacks[0].sender.get("tcp_info", {})
        limit = wmem_max if self.buffer == "auto" else 2 * int(self.buffer)
        timing = self.run.replay.stacks[0].timing
        return {"case": self.case, "buffer": self.buffer if self.buffer == "auto" else f"SO_SNDBUF {self.buffer}",
                "samples": len(o.ns), "mean_unacked_B": o.time_mean(o.unacked),
                "p95_unacked_B": float(np.percentile(o.unacked, 95)) if len(o.ns) else np.nan,
                "max_unacked_B": int(o.unacked.max()) if len(o.ns) else 0,
                "mean_unsent_B": o.time_mean(o.unsent), "max_unsent_B": int(o.unsent.max()) if len(o.ns) else 0,
                "max_sk_sndbuf_B": int(self.kernel[:, 1].max()) if len(self.kernel) else np.nan,
                "limit_B": limit, "max_vs_limit_pct": 100.0 * o.unacked.max() / limit if len(o.ns) else np.nan,
                "writes_blocked": timing.blocked if timing else np.nan,
                "retrans": info.get("total_retrans", 0)}


def run_one(case: str, buffer: str, args, work: Path) -> Run:
    demand = demand_of(case, args.duration, args.rate, args.seed)
    sampler = SndbufSampler()
    sampler.start()
    try:
        run = live.run(f"{case}-{buffer}", demand, work, args.rate, args.delay,
                       None if buffer == "auto" else int(buffer))
    finally:
        kernel = sampler.stop()
    return Run(case, buffer, occupancy(run.trace, run.sender), kernel, run)


def figure(runs: list[Run], cases: list[str], xlim: tuple[float, float] | None = None):
    """Fig. 11: occupancy over time, one panel per workload, one line per buffer setting
    (xlim: only that stretch, in seconds from the connection's first event)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(cases), 1, figsize=(11, 2.4 * len(cases)), squeeze=False, layout="constrained")
    for ax, case in zip(axes[:, 0], cases):
        mine = [x for x in runs if x.case == case]
        for k, r in enumerate(mine):
            t0 = r.occ.ns[0] if len(r.occ.ns) else 0
            color = f"C{k}"
            label = "autotuned" if r.buffer == "auto" else f"SO_SNDBUF {int(r.buffer) // 1024} KB"
            ax.step((r.occ.ns - t0) / 1e9, r.occ.unacked / 1024, where="post", color=color, linewidth=0.8,
                    label=f"{label}: write_seq - snd_una")
            if len(r.kernel):
                ax.plot((r.kernel[:, 0] - t0) / 1e9, r.kernel[:, 1] / 1024, "--", color=color, linewidth=0.8,
                        label=f"{label}: sk_sndbuf (ss), up to {r.kernel[:, 1].max() / 1024:.0f} KB")
        ax.set_title(f"{case}: {CASES[case]}", fontsize=9, loc="left")
        ax.set_ylabel("KB")
        # Scaled to the occupancy: a 418-byte stream under a 64 KB line would not show.
        top = max((int(r.occ.unacked.max()) for r in mine if len(r.occ.ns)), default=1)
        ax.set_ylim(0, 1.3 * top / 1024)
        # Beside the panel: inside, it hid the peaks it describes.
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
        if xlim:
            ax.set_xlim(*xlim)
    axes[-1, 0].set_xlabel("time since the connection's first event, s")
    return fig


def wmem_max() -> int:
    return int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])


def main(argv=None) -> int:
    args = common.parse(build_parser(), argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    buffers = [b.strip() for b in args.buffers.split(",") if b.strip()]
    common.gate(cases and all(c in CASES for c in cases), f"sndbuf: --cases: use {', '.join(CASES)}")
    common.gate(buffers and all(b == "auto" or b.isdigit() for b in buffers),
                "sndbuf: --buffers: auto or a number of bytes, comma-separated")
    live.gate(args.rate)
    args.duration = args.duration or (3.0 if args.quick else 30.0)
    results = common.Results("sndbuf", args)
    runs: list[Run] = []
    plan = [(c, b) for c in cases for b in buffers]
    with tempfile.TemporaryDirectory(prefix="mgxl-sndbuf-") as tmp:
        for case, buffer in common.progress(plan, "sndbuf"):
            runs.append(run_one(case, buffer, args, args.work or Path(tmp)))
    table = pd.DataFrame([r.row(wmem_max()) for r in runs])
    results.figure(figure(runs, cases), "fig11")
    middle = args.duration / 2
    results.figure(figure(runs, cases, (middle, middle + 1.0)), "fig11-second")
    results.write("Send-buffer occupancy while streaming (Fig. 11)", body(results, args, cases, runs, table))
    print(f"results in {results.dir}")
    return 0


def body(results: common.Results, args, cases: list[str], runs: list[Run], table: pd.DataFrame) -> str:
    checks = pd.DataFrame([{"case": r.case, "buffer": r.buffer, **r.occ.checks,
                            "events_with_tcp_state": len(r.occ.ns)} for r in runs])
    notes = [f"{r.case} {r.buffer}: {n}" for r in runs for n in r.run.notes]
    parts = [live.describe_setup(args), "",
             "Workloads: " + "; ".join(f"`{c}`: {CASES[c]}" for c in cases) + f"; {args.duration:g} s each.",
             "", "![Fig. 11](fig11.png)", "", "One second of it, from the middle of the runs:", "",
             "![Fig. 11, one second](fig11-second.png)", "", "## Occupancy", "",
             results.table("occupancy", table, floats="{:.4g}"), "",
             "`unacked` = write_seq - snd_una (what the kernel keeps for the connection), `unsent` = "
             "write_seq - snd_nxt; means are over time (a step function between events). `limit`: "
             "tcp_wmem's maximum for the autotuned buffer, twice SO_SNDBUF (the kernel doubles it) for a "
             "fixed one; sk_sndbuf is the kernel's buffer size as `ss -m` reports it (`tb`), sampled every "
             "0.1 s (it counts skb overhead as well as data). A fixed buffer can be overshot by about one "
             "skb: the kernel checks for room before it starts a new skb, not per byte, and with GSO "
             "an skb holds up to 64 KB (the tail skb may still take some too).", "",
             "## The paper", "", results.table("paper", PAPER), "",
             "## Is the extended data sound?", "",
             results.table("checks", checks), "",
             "write_seq between consecutive writes must move by exactly the write's size; snd_una must "
             "never move back. `acks_applied`: incoming ACKs whose ack_seq was taken as the new snd_una "
             "(tcp_probe fires before TCP processes the ACK, so the record's own snd_una is the old one); "
             "`acks_confirmed_next`: of those, how many the next event's own snd_una confirms (the "
             "connection's last ACK has no next event)."]
    if notes:
        parts += ["", "## Notes", ""] + [f"* {n}" for n in notes]
    return "\n".join(parts)


if __name__ == "__main__":
    raise SystemExit(main())
