"""What each replayed stack put on its wire: the BPF capture, tcpdump, or the receiver's reads.

    session = wire.BpfSession(path, cgroup_name)           # magnet-read on a cgroup
    session = wire.PcapSession({k: (ns, dev, path)})  # tcpdump per hop, read with magnetlib.pcap
    session.preexec()        # for the stack's processes: join what is captured
    session.stop()
    series = wire.from_trace(path, cookie)        # (send, recv) Series of one socket's device events
    series = wire.from_pcap(path, addr, port, clock_offset_ns)

Every series is on CLOCK_MONOTONIC (the replayer's and the BPF capture's clock):
tcpdump's Unix times are moved there by the offset between the two clocks.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np

import magnetlib
from magnet import capture
from magnetlib import pcap, segmentation
from magnetlib import demand as demand_mod
from magnetlib.errors import MagnetError
from magnetlib.format import Clock, Event, ExtValid
from magnetlib.metrics import Series

from . import netns, workers

# Sockets still closing when the replay ends (FIN, last ACKs) get this long.
LINGER_S = 0.2
PCAP_SNAPLEN = 128


def clock_offset_ns(samples: int = 20) -> int:
    """CLOCK_REALTIME - CLOCK_MONOTONIC, from the tightest of a few back-to-back readings."""
    best = None
    for _ in range(samples):
        a = time.monotonic_ns()
        real = time.time_ns()
        b = time.monotonic_ns()
        if best is None or b - a < best[0]:
            best = (b - a, real - (a + b) // 2)
    return best[1]


# -------------------------------------------------------------------- BPF ---
def bpf_unavailable() -> str | None:
    """Why the BPF capture cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (it loads BPF programs)"
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        return "the kernel has no BTF (/sys/kernel/btf/vmlinux)"
    try:
        capture.find_magnet_read()
        capture.cgroup2_root()
    except MagnetError as e:                   # the capture's, or magnet-read's build
        return str(e)
    return None


class BpfSession:
    """magnet-read recording the processes of one cgroup into one trace."""
    method = "bpf"

    def __init__(self, path: Path, cgroup_name: str, side: str | None = None):
        """`side` (client, server): the trace of one side of a whole application, in the
        form of `magnet path --capture` (its HOSTNAME the side's name)."""
        self.path = path
        self.cgroup = capture.make_cgroup(cgroup_name)
        if side is None:
            self.cap = capture.Capture(path, cgroup=self.cgroup, settings=capture.Settings(ext=True))
        else:
            from .path import SideCapture
            self.cap = SideCapture(path, self.cgroup, side)
        try:
            self.cap.start()
        except BaseException as e:             # an interrupt too: the cgroup must not outlive us
            capture.remove_cgroup(self.cgroup)
            if isinstance(e, (capture.CaptureError, OSError)):
                raise capture.CaptureError(f"magnet-read could not start: {e}") from None
            raise

    def preexec(self) -> None:
        capture.join_cgroup(self.cgroup)

    def stop(self, complete: bool = True) -> None:
        if complete:
            time.sleep(LINGER_S)
        status = self.cap.stop()
        capture.remove_cgroup(self.cgroup)
        if status != 0 and complete:
            raise capture.CaptureError(f"magnet-read failed: {self.cap.error() or f'exit status {status}'}")


def from_trace(path: Path, cookie: int) -> tuple[Series, Series]:
    """A socket's data segments on its device: sent (DEV_SEND) and received (DEV_RECV)."""
    with magnetlib.open(path) as trace:
        trace.check()
        out = []
        for direction in ("send", "recv"):
            d = demand_mod.extract(trace, cookie, direction, "dev")
            out.append(Series(d.time_ns + d.start_ns, d.size))
    return out[0], out[1]


def trace_new_bytes(path: Path, cookie: int) -> np.ndarray:
    """Per data segment the socket sent (in from_trace's order), its bytes never sent
    before, from the segments' sequence numbers (magnetlib.segmentation.new_bytes)."""
    with magnetlib.open(path) as trace:
        pos = trace.select([Event.DEV_SEND], cookie)
        ns, size = trace.series(pos)
        seq = trace.column_at("seq", pos).astype(np.int64)
    data = size > 0
    order = np.argsort(ns[data], kind="stable")
    return segmentation.new_bytes(seq[data][order], size[data][order])


def srtt_mean_ns(path: Path | None, cookie: int) -> float | None:
    """The socket's smoothed RTT averaged over its updates, from the srtt its TCP_RECV
    records carry (each value once, as it changes): ns-3's measure (MagnetStackRecorder's
    mean over the "RTT" trace's changes). None without TCP state in the trace (pcap, reads)."""
    if path is None:
        return None
    with magnetlib.open(path) as trace:
        if not trace.has_ext:
            return None
        pos = trace.select([Event.TCP_RECV], cookie)
        pos = pos[(trace.column_at("valid", pos) & ExtValid.TCP_STATE) != 0]
        srtt = trace.column_at("srtt_us", pos).astype(np.int64)
    srtt = srtt[srtt > 0]
    if not len(srtt):
        return None
    changed = np.r_[True, srtt[1:] != srtt[:-1]]
    return float(srtt[changed].mean()) * 1e3


def sock_sends(path: Path, cookie: int) -> tuple[np.ndarray, np.ndarray]:
    """Every SOCK_SEND record of a socket, errors included: (ns, returned)."""
    with magnetlib.open(path) as trace:
        pos = trace.select([Event.SOCK_SEND], cookie)
        return trace.series(pos)


def split(path: Path, parts: dict[Path, list[int]]) -> None:
    """Per part, the records of its sockets (and every LOST record) as a trace of its own."""
    with magnetlib.open(path) as trace:
        data = trace.data
        lost = data["event"] == Event.LOST
        for out, cookies in parts.items():
            keep = np.isin(data["sockid"], np.array(cookies, np.uint64)) | lost
            magnetlib.write(out, data[keep], trace.meta.replace(segment_index=None))


# ---------------------------------------------------------------- tcpdump ---
class PcapSession:
    """tcpdump on the sending end of each hop, from before the connection to its FIN."""
    method = "pcap"

    def __init__(self, hops: dict[int, tuple[str | None, str, Path]]):
        self.procs: dict[int, subprocess.Popen] = {}
        self.paths = {k: path for k, (_, _, path) in hops.items()}
        self.offset = clock_offset_ns()
        self.drops: dict[int, int] = {}
        try:
            for k, (ns, dev, path) in hops.items():
                self.procs[k] = self._start(ns, dev, path)
        except BaseException:
            self.stop(complete=False)
            raise

    @staticmethod
    def _start(ns: str | None, dev: str, path: Path) -> subprocess.Popen:
        cmd = ["tcpdump", "-i", dev, "-s", PCAP_SNAPLEN, "-U", "-n", "--time-stamp-precision=nano",
               "-w", path, "tcp"]
        proc = netns.popen(ns, cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           preexec_fn=lambda: _die_with_parent(signal.SIGINT))
        try:
            line = workers.first_line(proc, proc.stderr)
        except workers.WorkerError as e:
            raise OSError(f"tcpdump on {dev}: {e}") from None
        if "listening on" not in line:
            proc.kill()
            proc.wait()
            raise OSError(f"tcpdump on {dev}: {line.strip() or 'did not start'}")
        return proc

    def preexec(self) -> None:
        pass

    def stop(self, complete: bool = True) -> None:
        for k, proc in self.procs.items():
            if complete:
                _wait_for_fin(self.paths[k])
            proc.send_signal(signal.SIGINT)
            err = proc.communicate(timeout=30)[1]
            for line in err.splitlines():
                if "dropped by kernel" in line:
                    self.drops[k] = int(line.split()[0])


def _wait_for_fin(path: Path, timeout_s: float = 10.0) -> None:
    """tcpdump may lag behind: stop it only once both ends' FINs are in its file."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            p = pcap.read(path).packets
            if np.count_nonzero(p["tcp_flags"] & pcap.columns.TCP_FIN) >= 2:
                time.sleep(LINGER_S)
                return
        except magnetlib.TraceError:
            pass
        time.sleep(0.05)


def from_pcap(path: Path, addr: str, port: int, offset_ns: int) -> tuple[Series, Series]:
    """The data packets `addr`:`port` sent and received, on CLOCK_MONOTONIC."""
    p = pcap.read(path).packets
    me = np.frombuffer(pcap.convert.parse_address(addr), np.uint8)
    data = p["payload"] > 0
    sent = data & (p["saddr"] == me).all(axis=1) & (p["sport"] == port)
    got = data & (p["daddr"] == me).all(axis=1) & (p["dport"] == port)
    return tuple(Series(p["time_ns"][m].astype(np.int64) - offset_ns, p["payload"][m].astype(np.int64))
                 for m in (sent, got))


def pcap_new_bytes(path: Path, addr: str, port: int) -> np.ndarray:
    """Per data packet `addr`:`port` sent (in from_pcap's order), its bytes never sent before."""
    p = pcap.read(path).packets
    me = np.frombuffer(pcap.convert.parse_address(addr), np.uint8)
    sent = (p["payload"] > 0) & (p["saddr"] == me).all(axis=1) & (p["sport"] == port)
    return segmentation.new_bytes(p["seq"][sent].astype(np.int64), p["payload"][sent].astype(np.int64))


def pcap_to_trace(pcap_path: Path, trace_path: Path, local: str, offset_ns: int) -> None:
    """A hop's pcap as a trace of DEV_SEND/DEV_RECV (magnet from-pcap), on CLOCK_MONOTONIC."""
    out = pcap.convert.from_pcap(pcap.read(pcap_path), local=pcap.convert.parse_address(local))
    rec = out.records
    first_real = int(rec["timestamp"][0])
    rec["timestamp"] -= offset_ns
    meta = out.meta.replace(anchor_ticks=int(rec["timestamp"][0]), wall_anchor_ns=first_real,
                            clock_source=Clock.MONOTONIC)
    magnetlib.write(trace_path, rec, meta)


# ------------------------------------------------------------------ reads ---
class ReadsSession:
    """No capture: a stack's series are what its receiving application read."""
    method = "reads"

    def preexec(self) -> None:
        pass

    def stop(self, complete: bool = True) -> None:
        pass


def from_reads(reads: np.ndarray) -> Series:
    data = reads[reads[:, 1] > 0] if len(reads) else np.zeros((0, 2), np.int64)
    return Series(data[:, 0].astype(np.int64), data[:, 1].astype(np.int64))


def _die_with_parent(sig: int) -> None:
    """In a child before exec: receive `sig` when the process that started it dies."""
    import ctypes
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
