"""Synthetic workloads shaped like the paper's cases, and a simple model of the wire.

The workloads are application demand (what a program would write):
  ftp        10 KB writes every 20 ms (the PAM 2002 FTP trace, Fig. 9 there)
  ftp-slow   10 KB writes every 200 ms (the ALS 2001 FTP trace, Fig. 8 there)
  ftp-paper  3284-byte writes every 0.124 s (Table II's application row)
  ftp-variable  writes of varying size (log-normal, median 3284 B), exponential gaps (mean 0.124 s)
  mp3        418-byte frames about 21 ms apart in irregular bursts (Fig. 10)
  bulk       back-to-back 64 KB writes

Note that the paper's MP3 figures disagree with each other: 418 bytes every 21 ms
is 159 kb/s, not the 128 kb/s of the stream (which means a frame every 26.1 ms);
`mp3` follows the observed 21 ms unless given `interval_s`.

`model_wire` turns demand into TCP/IP/device send events with a first-order
model (MSS segmentation, FIFO serialisation at a link rate).  It is a model,
labelled as such in the trace's PRODUCER, for demos and tests of the analysis;
real modulation comes from the capture and the replayers.
"""
from __future__ import annotations

import numpy as np

from .demand import Demand
from .format import Clock, Event
from .meta import TraceMeta
from .writer import empty_records, write

NS = 1_000_000_000
# Time zero of synthetic traces (timestamps must not be 0).
EPOCH_NS = NS
HEADER_BYTES = 52          # Ethernet-free IPv4 + TCP with timestamps, per segment


def _times(duration_s: float, interval_s: float) -> np.ndarray:
    return np.arange(0, int(duration_s * NS), int(interval_s * NS), dtype=np.int64)


def ftp(duration_s: float = 30.0, write_bytes: int = 10240, interval_s: float = 0.02,
        jitter: float = 0.0, seed: int = 0) -> Demand:
    """Fixed-size writes at a fixed period; `jitter` (0..1) moves each by up to that share of a period."""
    t = _times(duration_s, interval_s)
    if jitter:
        rng = np.random.default_rng(seed)
        t = np.sort(np.maximum(t + rng.uniform(-jitter, jitter, len(t)) * interval_s * NS, 0)).astype(np.int64)
    return Demand.from_arrays(t, np.full(len(t), write_bytes))


def ftp_slow(duration_s: float = 30.0, **kw) -> Demand:
    return ftp(duration_s, interval_s=0.2, **kw)


def ftp_paper(duration_s: float = 30.0, **kw) -> Demand:
    return ftp(duration_s, write_bytes=3284, interval_s=0.124, **kw)


def ftp_variable(duration_s: float = 30.0, median_bytes: int = 3284, mean_gap_s: float = 0.124,
                 seed: int = 0) -> Demand:
    """An FTP-like demand whose writes vary: sizes log-normal around `median_bytes`
    (sigma 0.8, 64 B to 64 KiB), gaps exponential with mean `mean_gap_s`."""
    rng = np.random.default_rng(seed)
    n = max(1, int(duration_s / mean_gap_s))
    t = np.cumsum(np.r_[0.0, rng.exponential(mean_gap_s, n - 1)])
    size = np.clip(np.round(median_bytes * rng.lognormal(0.0, 0.8, n)), 64, 65536).astype(np.int64)
    keep = t < duration_s
    return Demand.from_arrays((t[keep] * NS).astype(np.int64), size[keep])


def mp3(duration_s: float = 30.0, frame_bytes: int = 418, interval_s: float = 0.021,
        seed: int = 0) -> Demand:
    """Frames whose gaps vary (gamma, coefficient of variation 0.5) around `interval_s`."""
    rng = np.random.default_rng(seed)
    n = int(duration_s / interval_s)
    gaps = rng.gamma(4.0, interval_s / 4.0, n)          # shape 4: CV = 1/sqrt(4)
    t = np.concatenate(([0.0], np.cumsum(gaps[:-1])))
    return Demand.from_arrays((t * NS).astype(np.int64), np.full(n, frame_bytes))


def bulk(total_bytes: int = 64 << 20, write_bytes: int = 65536, duration_s: float | None = None) -> Demand:
    """As fast as the stack takes it: every write is due at time 0."""
    n = max(1, total_bytes // write_bytes)
    return Demand.from_arrays(np.zeros(n, np.int64), np.full(n, write_bytes))


def app_requests(connections: int = 1000, duration_s: float = 600.0, ramp_s: float = 10.0,
                 request_bytes: int = 300, response_bytes: int = 8000, period_s: float = 1.0,
                 server_think_s: float = 0.001, one_way_s: float = 0.001, seed: int = 0):
    """A whole-application demand (magnetlib.app_demand) of request/response clients:
    `connections` persistent connections opened over the first `ramp_s`, each sending a
    request, after an exponential think time of mean `period_s` from reading the previous
    response, until `duration_s`; the server answers each after `server_think_s`
    (responses log-normal around `response_bytes`); the client closes 10 ms after its
    last response, the server by default.  time_ns places each row as over a path of
    `one_way_s` each way.  The benchmark's demand, for both engines."""
    from .app_demand import CLIENT, CLOSE, OPEN, SEND, SERVER, AppDemand
    rng = np.random.default_rng(seed)
    most = int(duration_s / period_s * 1.5) + 10
    opens = np.sort(rng.uniform(0, ramp_s, connections)) * NS
    gaps = rng.exponential(period_s, (connections, most)) * NS
    answer = int(server_think_s * NS)
    size = np.clip(rng.lognormal(np.log(response_bytes), 0.5, (connections, most)), 64, 1 << 20).astype(np.int64)
    turn = 2 * int(one_way_s * NS) + answer                 # request written to its response read
    start = opens[:, None] + np.cumsum(gaps, axis=1) + np.arange(most) * turn
    keep = start < duration_s * NS
    conn = np.broadcast_to(np.arange(connections)[:, None], keep.shape)[keep]
    j = np.broadcast_to(np.arange(most), keep.shape)[keep]
    t_req = start[keep].astype(np.int64)
    t_resp = t_req + int(one_way_s * NS) + answer
    resp = size[keep]
    before = np.cumsum(size * keep, axis=1) - size * keep            # responses before request j
    n_req = keep.sum(axis=1)
    last = np.flatnonzero(n_req)
    close_t = t_resp[np.cumsum(n_req)[last] - 1] + int(one_way_s * NS) + 10_000_000
    rows = {
        "connection": np.r_[np.arange(connections), conn, conn, last] + 1,
        "event": np.r_[np.full(connections, OPEN), np.full(2 * len(conn), SEND), np.full(len(last), CLOSE)],
        "side": np.r_[np.full(connections + len(conn), CLIENT), np.full(len(conn), SERVER),
                      np.full(len(last), CLIENT)],
        "time_ns": np.r_[opens.astype(np.int64), t_req, t_resp, close_t],
        "size": np.r_[np.zeros(connections, np.int64), np.full(len(conn), request_bytes), resp,
                      np.zeros(len(last), np.int64)],
        "adu": np.r_[np.full(connections, -1), 2 * j, 2 * j + 1, np.full(len(last), -1)],
        "wait_bytes": np.r_[np.zeros(connections, np.int64), before[keep], (j + 1) * request_bytes,
                            (np.cumsum(size * keep, axis=1)[:, -1])[last]],
        "think_ns": np.r_[np.zeros(connections, np.int64),
                          np.where(j == 0, t_req - opens[conn].astype(np.int64), gaps[keep].astype(np.int64)),
                          np.full(len(conn), answer), np.full(len(last), 10_000_000)],
        "after": np.zeros(connections + 2 * len(conn) + len(last), np.int64),
    }
    order = np.lexsort((rows["event"] == CLOSE, rows["connection"], rows["time_ns"]))
    return AppDemand.from_columns(**{name: values[order] for name, values in rows.items()})


WORKLOADS = {"ftp": ftp, "ftp-slow": ftp_slow, "ftp-paper": ftp_paper, "ftp-variable": ftp_variable,
             "mp3": mp3, "bulk": bulk}


def segments(size: np.ndarray, mss: int) -> tuple[np.ndarray, np.ndarray]:
    """Split each write into MSS-sized segments: (index of the write, segment size)."""
    per = -(-size // mss)
    write_idx = np.repeat(np.arange(len(size)), per)
    first = np.repeat(np.cumsum(per) - per, per)
    k = np.arange(len(write_idx)) - first
    return write_idx, np.minimum(mss, size[write_idx] - k * mss)


def model_wire(demand: Demand, mss: int = 1448, rate_bps: float = 100e6):
    """Segments through a FIFO link at `rate_bps`: (write index, size, ns transmission starts).

    d_i = max(a_i, d_{i-1}) + s_i, solved for all i at once:
    d_i = C_i + max_{j<=i}(a_j - C_{j-1}) with C the cumulative service time.
    """
    write_idx, seg = segments(demand.size, mss)
    arrival = demand.time_ns[write_idx].astype(np.float64)
    service = (seg + HEADER_BYTES) * 8 / rate_bps * NS
    done = np.cumsum(service)
    depart = done + np.maximum.accumulate(arrival - (done - service))
    return write_idx, seg, np.rint(depart - service).astype(np.int64)


def synthetic_records(demand: Demand, mss: int = 1448, rate_bps: float = 100e6,
                      sockid: int = 1) -> np.ndarray:
    """SOCK_SEND per write, then TCP_SEND, IP_SEND and DEV_SEND per modelled segment."""
    _, seg, start = model_wire(demand, mss, rate_bps)
    layers = [(Event.TCP_SEND, 0), (Event.IP_SEND, 1_000), (Event.DEV_SEND, 2_000)]
    n_app, n_seg = len(demand), len(seg)
    rec = empty_records(n_app + len(layers) * n_seg)
    rec["timestamp"][:n_app] = demand.time_ns
    rec["size"][:n_app] = demand.size
    rec["event"][:n_app] = Event.SOCK_SEND
    for k, (event, offset) in enumerate(layers):
        part = slice(n_app + k * n_seg, n_app + (k + 1) * n_seg)
        rec["timestamp"][part] = start + offset
        rec["size"][part] = seg
        rec["event"][part] = event
    rec["timestamp"] += EPOCH_NS
    rec["sockid"] = sockid
    return rec[np.argsort(rec["timestamp"], kind="stable")]


def write_synthetic(path: str, workload: str = "ftp", *, mss: int = 1448, rate_bps: float = 100e6,
                    byteorder: str = "=", seed: int = 0, **params) -> str:
    """Generate a workload, model its wire, and write both as a trace."""
    if workload == "bulk":
        params.pop("duration_s", None)
    if workload in ("ftp", "ftp-slow", "ftp-paper", "mp3"):
        params["seed"] = seed
    demand = WORKLOADS[workload](**params)
    meta = TraceMeta(anchor_ticks=EPOCH_NS, clock_source=Clock.SYNTHETIC,
                     producer=f"magnet synth {workload} (model: mss {mss}, {rate_bps / 1e6:g} Mb/s FIFO)")
    return write(path, synthetic_records(demand, mss, rate_bps), meta, byteorder=byteorder)
