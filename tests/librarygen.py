"""Traces for the library tests: several streams, both directions, loss, extended data, any clock."""
from __future__ import annotations

import numpy as np

import magnetlib
from magnetlib import synth
from magnetlib.format import Clock, Event, ExtValid

MIDNIGHT_NS = 1_700_006_400 * 10**9          # 2023-11-15 00:00:00 UTC


def make_trace(path, *, host: str | None = "alpha", wall_ns: int | None = MIDNIGHT_NS - 1_500_000_000,
               streams=((0x11, "ftp"), (0x12, "mp3")), duration_s: float = 3.0, lost=(), ext: bool = False,
               byteorder: str = "=", seed: int = 0, responses: bool = True) -> str:
    """A trace of synthetic streams (send path modelled by magnetlib.synth), with responses
    (SOCK_RECV/DEV_RECV) on the first stream and LOST records at the given (seconds, count)."""
    parts = []
    for i, (sid, workload) in enumerate(streams):
        params = {} if workload == "bulk" else {"duration_s": duration_s, "seed": seed + i}
        rec = synth.synthetic_records(synth.WORKLOADS[workload](**params), sockid=sid)
        rec["timestamp"] += i * 1_000_003
        parts.append(rec)
    if responses and streams:
        parts.append(_responses(streams[0][0], duration_s, seed))
    if lost:
        rec = magnetlib.empty_records(len(lost))
        rec["event"] = Event.LOST
        rec["timestamp"] = [synth.EPOCH_NS + int(t * 1e9) for t, _ in lost]
        rec["size"] = [n for _, n in lost]
        parts.append(rec)
    rec = np.concatenate(parts)
    rec = rec[np.argsort(rec["timestamp"], kind="stable")]
    if ext:
        rec = _with_ext(rec)
    meta = magnetlib.TraceMeta(anchor_ticks=synth.EPOCH_NS, hostname=host, wall_anchor_ns=wall_ns,
                               clock_source=Clock.REALTIME if wall_ns else Clock.SYNTHETIC,
                               producer="tests/librarygen")
    return magnetlib.write(path, rec, meta, byteorder=byteorder)


def _responses(sid: int, duration_s: float, seed: int) -> np.ndarray:
    """Reads of a reply every 0.1 s: a DEV_RECV per 1448 bytes, then the application's read."""
    rng = np.random.default_rng(seed + 99)
    n = int(duration_s / 0.1)
    at = synth.EPOCH_NS + 5_000_000 + np.arange(n, dtype=np.int64) * 100_000_000
    size = rng.integers(100, 4000, n)
    rec = magnetlib.empty_records(2 * n)
    rec["sockid"] = sid
    rec["timestamp"][:n], rec["event"][:n], rec["size"][:n] = at, Event.DEV_RECV, np.minimum(size, 1448)
    rec["timestamp"][n:], rec["event"][n:], rec["size"][n:] = at + 50_000, Event.SOCK_RECV, size
    return rec


def _with_ext(rec: np.ndarray) -> np.ndarray:
    """Extended records: pid, ports, addresses and TCP state per stream."""
    out = magnetlib.empty_records(len(rec), ext=True)
    for name in ("sockid", "timestamp", "event", "size"):
        out[name] = rec[name]
    sid = rec["sockid"].astype(np.int64)
    has = sid != 0
    out["valid"] = np.where(has, ExtValid.TASK | ExtValid.ADDR | ExtValid.TCP_STATE, 0)
    out["pid"] = np.where(has, 4000 + sid, 0)
    out["sport"] = np.where(has, 40000 + sid, 0)
    out["dport"] = np.where(has, 5001, 0)
    out["mss"] = np.where(has, 1448, 0)
    out["srtt_us"] = np.where(has, 200 + (np.arange(len(rec)) % 50), 0)
    out["snd_wnd"] = np.where(has, 65536, 0)
    out["rcv_wnd"] = np.where(has, 131072, 0)
    out["ip_version"] = np.where(has, 4, 0)
    v4 = bytes(10) + b"\xff\xff"
    out["saddr"][has] = np.frombuffer(v4 + bytes([10, 0, 0, 1]), np.uint8)
    out["daddr"][has] = np.frombuffer(v4 + bytes([10, 0, 0, 2]), np.uint8)
    return out


def big_trace(path, records: int, host: str = "big") -> str:
    """A large single-stream-family trace written in chunks (for the interrupted-import test)."""
    meta = magnetlib.TraceMeta(anchor_ticks=1_000, hostname=host, wall_anchor_ns=MIDNIGHT_NS,
                               clock_source=Clock.REALTIME, producer="tests/librarygen")
    pattern = np.array([Event.SOCK_SEND, Event.TCP_SEND, Event.IP_SEND, Event.DEV_SEND], np.uint32)
    step = 1 << 22
    with magnetlib.TraceWriter(path, meta) as w:
        for lo in range(0, records, step):
            i = np.arange(lo, min(lo + step, records))
            rec = magnetlib.empty_records(len(i))
            rec["timestamp"] = 1_000 + i * 100
            rec["event"] = pattern[i % 4]
            rec["sockid"] = 1 + (i // 4) % 16
            rec["size"] = 1 + i % 1448
            w.append(rec)
    return path
