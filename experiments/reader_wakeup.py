"""The host's lags on a packet's way through it, measured on Linux over linkem: the values the
studies give ns-3's Linux profile (experiments/common.py HOST_ACK_LAG_NS, HOST_REPLY_LAG_NS,
HOST_READER_WAKEUP_NS; `magnet replay ns3 --ack-lag --reply-lag --reader-wakeup`).

    python -m magnet.experiments.reader_wakeup [--runs 3] [--seconds 12] [--out DIR]   # root

Each run is the agreement study's probe path with no probe: duplex 20 Mbit/s, 30 ms, a 100-packet
drop-tail queue each way, tcp:4 both ways (magnet's bulk senders and Python sinks), with tcpdump
(nanosecond stamps, headers only) on both cross namespaces' devices.  Every lag is one definition
both engines share: a packet in at the host's device -> the packet it causes out at that device.

- **ACK lag** (a segment carrying data -> the ACK TCP sends for it): for every pure ACK a host
  sends, its lag after the latest data segment of that connection it received.  Bimodal: the ACKs
  Linux sends from the softirq (__tcp_ack_snd_check; up to 15 us) and those it sends when the
  woken reader reads (tcp_cleanup_rbuf, from recvmsg; 15-100 us).  The softirq's mode's median is
  the ACK lag (ns-3's AckLag: a data segment's arrival -> its processing by TCP, where the
  softirq's ACK leaves); the reader's mode's median is the **reader lag**.
- **Reader wake-up** (ns-3's ReaderWakeup: the processing -> the reader's read): per run the
  reader's median less the softirq's, so that in ns-3 the reader's ACK leaves AckLag +
  ReaderWakeup after its segment, the reader lag; the value, their median over runs.
- **Reply lag** (a pure ACK -> the data it releases): for every pure ACK a host received on a
  connection it sends data on (10 segments or more), the lag until the first data segment that
  host sent on that connection after it, counted only when that segment left before the
  connection's next ACK arrived (a reply to this ACK, not a write the application made later);
  per run p10/p50/p90, the value their p50's median over runs (ns-3's ReplyLag: a pure ACK's
  arrival -> its processing by TCP, where the data it releases leaves).

The agreement and fidelity studies measure the three lags the same way at their start
(for_study: STUDY_RUNS runs of STUDY_SECONDS, this module's defaults) and give them to their
own ns-3 runs.

Real-time runs: take `flock /work/.realtime.lock` where others run them too.
"""
from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from . import common

SOFTIRQ_MAX_US = 15.0      # the softirq's ACKs: up to this after their segment
READER_MAX_US = 100.0      # the reader's, above that up to this (later: a host busy elsewhere)


def read_pcap(path: Path) -> np.ndarray:
    """A nanosecond pcap of IPv4 TCP headers (tcpdump --time-stamp-precision=nano, LINKTYPE_RAW
    or a TUN device's): time, addresses, ports, payload length, one row per packet."""
    raw = Path(path).read_bytes()
    if struct.unpack("<I", raw[:4])[0] != 0xa1b23c4d:
        raise ValueError(f"{path}: not a nanosecond little-endian pcap")
    rows, pos = [], 24
    while pos + 16 <= len(raw):
        sec, ns, incl, _ = struct.unpack("<IIII", raw[pos:pos + 16])
        buf = raw[pos + 16:pos + 16 + incl]
        pos += 16 + incl
        if len(buf) < 40 or buf[0] >> 4 != 4 or buf[9] != 6:
            continue
        ihl = (buf[0] & 15) * 4
        total = buf[2] << 8 | buf[3]
        sport, dport = struct.unpack(">HH", buf[ihl:ihl + 4])
        pay = total - ihl - (buf[ihl + 12] >> 4) * 4
        rows.append((sec * 10**9 + ns, bytes(buf[12:16]), bytes(buf[16:20]), sport, dport, pay))
    dt = np.dtype([("t", "i8"), ("src", "S4"), ("dst", "S4"), ("sport", "u2"), ("dport", "u2"), ("pay", "i4")])
    return np.array(rows, dtype=dt)


def ack_lags_us(packets: np.ndarray, me: bytes) -> np.ndarray:
    """For each pure ACK host `me` sent on a connection it received data on (10 segments or
    more), microseconds since the latest data segment of that connection it had received."""
    tx, rx = packets[packets["src"] == me], packets[packets["dst"] == me]
    acks, data = tx[tx["pay"] == 0], rx[rx["pay"] > 0]
    key_tx = acks["sport"].astype(np.int64) << 16 | acks["dport"]
    key_rx = data["dport"].astype(np.int64) << 16 | data["sport"]
    out = []
    for key in np.unique(key_tx):
        t_data = np.sort(data["t"][key_rx == key])
        if len(t_data) < 10:
            continue
        t_ack = acks["t"][key_tx == key]
        k = np.searchsorted(t_data, t_ack, side="right") - 1
        out.append((t_ack[k >= 0] - t_data[k[k >= 0]]) / 1e3)
    return np.concatenate(out) if out else np.zeros(0)


def reply_lags_us(packets: np.ndarray, me: bytes) -> np.ndarray:
    """For each pure ACK host `me` received on a connection it sent data on (10 segments or
    more), microseconds until the first data segment of that connection it sent after it, where
    that segment left before the connection's next ACK arrived (else no reply: left out)."""
    tx, rx = packets[packets["src"] == me], packets[packets["dst"] == me]
    acks, data = rx[rx["pay"] == 0], tx[tx["pay"] > 0]
    key_rx = acks["dport"].astype(np.int64) << 16 | acks["sport"]
    key_tx = data["sport"].astype(np.int64) << 16 | data["dport"]
    out = []
    for key in np.unique(key_tx):
        t_data = np.sort(data["t"][key_tx == key])
        t_ack = np.sort(acks["t"][key_rx == key])
        if len(t_data) < 10 or not len(t_ack):
            continue
        k = np.searchsorted(t_data, t_ack, side="right")          # the first data sent after each ACK
        nxt = np.r_[t_ack[1:], np.iinfo(np.int64).max]             # ... before the next ACK came
        ok = k < len(t_data)
        reply = t_data[np.minimum(k, len(t_data) - 1)]
        ok &= reply < nxt
        out.append((reply[ok] - t_ack[ok]) / 1e3)
    return np.concatenate(out) if out else np.zeros(0)


def replies(lags_us: np.ndarray) -> dict:
    """A run's reply lags: how many, and their p10/p50/p90."""
    row = {"replies": len(lags_us)}
    for p in (10, 50, 90):
        row[f"reply_p{p}_us"] = float(np.percentile(lags_us, p)) if len(lags_us) else np.nan
    return row


def modes(lags_us: np.ndarray) -> dict:
    """The softirq's and the reader's ACKs in a run's lags: shares, medians, and the wake-up,
    the reader's median less the softirq's."""
    soft = lags_us[lags_us <= SOFTIRQ_MAX_US]
    reader = lags_us[(lags_us > SOFTIRQ_MAX_US) & (lags_us <= READER_MAX_US)]
    n = max(len(lags_us), 1)
    row = {"acks": len(lags_us), "softirq_pct": 100 * len(soft) / n, "reader_pct": 100 * len(reader) / n,
           "later_pct": 100 * float((lags_us > READER_MAX_US).sum()) / n,
           "softirq_p50_us": float(np.median(soft)) if len(soft) else np.nan}
    for p in (10, 50, 90):
        row[f"reader_p{p}_us"] = float(np.percentile(reader, p)) if len(reader) else np.nan
    row["wakeup_us"] = row["reader_p50_us"] - row["softirq_p50_us"]
    return row


def run_linux(where: Path, seconds: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One real-time run over linkem; the ACK lags and the reply lags of both hosts, pooled."""
    from magnetlib import knobs
    from magnet.replay import wan
    from magnet.replay.scenario import Path as NetPath, Scenario, cross
    scenario = Scenario(stacks=1, path=(NetPath(rate_bps=20_000_000, delay_ns=30_000_000,
                                                queue=knobs.Queue(100, "packets"), duplex=True),),
                        cross=(cross("tcp:4"),), seed=seed)
    where.mkdir(parents=True, exist_ok=True)
    with wan.chain(f"mgw{os.getpid() % 10000}", scenario, where) as net:
        s = net.stack(1)
        dumps = [net.popen(ns, ["tcpdump", "-i", dev, "-n", "-s", "96", "-B", "16384",
                                "--time-stamp-precision=nano", "-w", str(where / f"{name}.pcap"), "tcp"],
                           stderr=open(where / f"{name}.tcpdump.log", "w"))
                 for ns, dev, name in ((s.cross_ns[0], s.cross_dev[0], "a"), (s.cross_ns[1], s.cross_dev[1], "b"))]
        time.sleep(1.0)
        with wan.crossing(net, scenario, [1], cc="cubic", warmup_s=0):
            time.sleep(seconds)
        time.sleep(0.5)
        for p in dumps:
            p.send_signal(signal.SIGINT)
        for p in dumps:
            p.wait(timeout=20)
    skip = 2e9                                    # each flow's slow start and first losses
    lags, reply = [], []
    for name, addr in (("a", s.cross_addr[0]), ("b", s.cross_addr[1])):
        packets = read_pcap(where / f"{name}.pcap")
        packets = packets[packets["t"] > packets["t"][0] + skip]
        me = bytes(int(x) for x in addr.split("/")[0].split("."))
        lags.append(ack_lags_us(packets, me))
        reply.append(reply_lags_us(packets, me))
    return np.concatenate(lags), np.concatenate(reply)


def measure(work: Path, runs: int, seconds: float, seed: int, desc: str = "runs") -> pd.DataFrame:
    """`runs` real-time runs of `seconds` (seeds from `seed`), their captures under `work`:
    a row per run (modes, replies, the load at its start)."""
    rows = []
    for run in common.progress(range(1, runs + 1), desc):
        load = common.load()
        lags, reply = run_linux(work / f"run-{run}", seconds, seed + run - 1)
        rows.append({"run": run, **modes(lags), **replies(reply), "load": load})
    return pd.DataFrame(rows)


def values_us(table: pd.DataFrame) -> dict:
    """The three lags of the runs, in us: each the median over runs of its per-run value."""
    return {name: float(np.median(table[col])) for name, col in
            (("ack_lag", "softirq_p50_us"), ("reply_lag", "reply_p50_us"), ("reader_wakeup", "wakeup_us"))}


# A study's own measurement at its start (for_study): this module's defaults, about 50 s.  Runs
# of 6 s (4 s after the 2 s left out) read the wake-up lower and wider: interleaved with 12 s
# runs at load 3-5 (2026-11-27 12:02-12:05, 3 rounds of 3 runs each), 14.3/17.5/14.2 us
# (runs 11.9-17.7) against 19.6/17.6/19.1 us (runs 17.4-20.8); the ACK lag 10.4/10.9/9.4 against
# 10.7/10.2/11.3 us, the reply lag 6.3/7.3/6.4 against 7.4/7.4/8.0 us.
STUDY_RUNS, STUDY_SECONDS = 3, 12.0


def for_study(args, work: Path) -> common.HostLags:
    """The lags a study gives its own ns-3 runs: --host-lags if given; under --quick the
    constants; else measured on this host now (STUDY_RUNS runs of STUDY_SECONDS, in `work`,
    its captures removed after), the constants where that cannot run or gave no value (the
    returned HostLags says which, and why)."""
    from magnet.replay import linkem
    from magnetlib.errors import MagnetError
    if getattr(args, "host_lags", None) is not None:
        return args.host_lags
    if args.quick:
        return common.HostLags(how="--quick does not measure them")
    why = linkem.unavailable() or (None if shutil.which("tcpdump") else "no tcpdump")
    if why:
        return common.HostLags(how=f"not measured: {why}")
    where = Path(work) / "host-lags"
    started = time.monotonic()
    try:
        table = measure(where, STUDY_RUNS, STUDY_SECONDS, args.seed, "host lags")
    except (MagnetError, OSError, ValueError, subprocess.SubprocessError) as e:
        return common.HostLags(how=f"the measurement failed: {e}")
    finally:
        shutil.rmtree(where, ignore_errors=True)
    value = values_us(table)
    runs = table.to_dict("records")
    if not all(np.isfinite(v) and v >= 0 for v in value.values()):
        return common.HostLags(how="the measurement gave no value for " + ", ".join(
            k for k, v in value.items() if not (np.isfinite(v) and v >= 0)), runs=runs)
    loads = [r["load"].split()[0] for r in runs]
    how = (f"experiments/reader_wakeup.py, {len(table)} runs of {STUDY_SECONDS:g} s, each lag the median "
           f"over the runs: ACK lag {_runs(table['softirq_p50_us'])}, reply lag {_runs(table['reply_p50_us'])}, "
           f"reader wake-up {_runs(table['wakeup_us'])} us; load average {min(loads)}-{max(loads)}; "
           f"{time.monotonic() - started:.0f} s")
    return common.HostLags(*(round(1000 * value[k]) for k in ("ack_lag", "reply_lag", "reader_wakeup")),
                           source="measured", how=how, date=time.strftime("%Y-%m-%d %H:%M"), runs=runs)


def _runs(values) -> str:
    return "/".join(f"{v:.1f}" for v in values)


def main(argv: list[str] | None = None) -> int:
    p = common.bench_parser("reader_wakeup", "reader_wakeup", __doc__)
    p.add_argument("--runs", type=int, default=3, help="real-time runs (default 3)")
    p.add_argument("--seconds", type=float, default=12.0, help="each run's length (default 12)")
    p.add_argument("--work", type=Path, default=None, help="keep the captures here")
    args = common.parse(p, argv)
    common.quick(p, args, runs=1, seconds=4.0)
    results = common.Results("reader_wakeup", args)
    with common.workspace(args, "magnet-reader-wakeup-") as work:
        table = measure(work, args.runs, args.seconds, args.seed)
    value = values_us(table)
    body = [f"The reader's wake-up over {len(table)} run(s): median **{value['reader_wakeup']:.1f} us** "
            f"(runs {', '.join(f'{v:.1f}' for v in table['wakeup_us'])}); "
            f"experiments/common.py HOST_READER_WAKEUP_NS is {common.HOST_READER_WAKEUP_NS / 1000:g} us.",
            "",
            f"The ACK lag (the softirq's ACKs, p50) over {len(table)} run(s): median "
            f"**{value['ack_lag']:.1f} us** "
            f"(runs {', '.join(f'{v:.1f}' for v in table['softirq_p50_us'])}); "
            f"experiments/common.py HOST_ACK_LAG_NS is {common.HOST_ACK_LAG_NS / 1000:g} us.",
            "",
            f"The reply lag (a pure ACK in -> the data it releases out, p50) over {len(table)} run(s): "
            f"median **{value['reply_lag']:.1f} us** "
            f"(runs {', '.join(f'{v:.1f}' for v in table['reply_p50_us'])}); "
            f"experiments/common.py HOST_REPLY_LAG_NS is {common.HOST_REPLY_LAG_NS / 1000:g} us.",
            "", results.table("modes", table), "", args.note]
    print(results.write("The host's ACK lag, reply lag and reader wake-up (Linux over linkem)", "\n".join(body)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
