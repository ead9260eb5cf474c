"""A cap on the delayed-ACK timer of a cgroup's TCP connections (--delack-timeout).

Linux has no socket option or sysctl for the delayed-ACK timeout: its timer
adapts (40 ms at first, growing towards the RTT) up to the socket's
delack_max, 200 ms.  A sockops program can set delack_max with
bpf_setsockopt(TCP_BPF_DELACK_MAX) as each connection is established
(replay/linkem/delack.bpf.c, loaded by linkem-delack, built on first use
like magnet-read: clang, bpftool, libbpf).  The kernel takes 2 ticks to 200 ms,
rounded up to its tick (4 ms at HZ=250).

    why = delack.unavailable(timeout_ns)        # None: it can be applied here
    cap = delack.Cap(cgroup_path, timeout_ns)   # attached until stop()
    cap.stop()                                  # {"applied": connections, "refused": ...}
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

from magnetlib import buildcache, knobs

SOURCE = Path(__file__).resolve().parent / "linkem"
TICK_NS = 4_000_000                      # HZ=250, this kernel's (see rounded())
MAX_NS = 200_000_000                     # TCP_DELACK_MAX
TOOLS = ("clang", "bpftool")


def tick_ns() -> int:
    """The kernel's tick, from its configuration where readable (else HZ=250's)."""
    for path in (Path(f"/boot/config-{os.uname().release}"),):
        try:
            for line in path.read_text().splitlines():
                if line.startswith("CONFIG_HZ="):
                    return 1_000_000_000 // int(line.split("=")[1])
        except (OSError, ValueError):
            pass
    return TICK_NS


def rounded(timeout_ns: int) -> int:
    """The cap the kernel applies for `timeout_ns` (usecs_to_jiffies rounds up)."""
    tick = tick_ns()
    return -(-timeout_ns // tick) * tick


def unavailable(timeout_ns: int) -> str | None:
    """Why a cap of `timeout_ns` cannot be applied here (None: it can)."""
    low = 2 * tick_ns()
    if not low <= rounded(timeout_ns) <= MAX_NS:
        return (f"Linux caps the delayed-ACK timer between {knobs.fmt_duration(low)} and "
                f"{knobs.fmt_duration(MAX_NS)} (TCP_BPF_DELACK_MAX)")
    if os.geteuid() != 0:
        return "needs root (a sockops BPF program sets it)"
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing or not Path("/usr/include/bpf/libbpf.h").exists():
        return ("needs a sockops BPF program, built with clang, bpftool and libbpf-dev "
                f"(missing: {', '.join(missing) or 'libbpf-dev'})")
    return None


def build(quiet: bool = True) -> Path:
    """linkem-delack, built once per version of its sources."""
    files = [(name, SOURCE / name) for name in ("delack.bpf.c", "delack.c")]
    arch = os.uname().machine

    def make(out: Path) -> None:
        steps = [["clang", "-g", "-O2", "-target", "bpf", f"-I/usr/include/{arch}-linux-gnu", "-c",
                  str(SOURCE / "delack.bpf.c"), "-o", str(out / "delack.bpf.o")],
                 ["sh", "-c", f"bpftool gen skeleton {out}/delack.bpf.o name delack_bpf > {out}/delack.skel.h"],
                 [os.environ.get("CC", "cc"), "-O2", "-Wall", f"-I{out}", str(SOURCE / "delack.c"),
                  "-lbpf", "-lelf", "-lz", "-o", str(out / "linkem-delack")]]
        for cmd in steps:
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode:
                lines = proc.stderr.strip().splitlines() or ["failed"]
                raise RuntimeError(f"building linkem-delack: {lines[-1]}")
    return buildcache.build("delack", buildcache.key(files, [arch]), make, quiet=quiet,
                            label="linkem-delack")[0] / "linkem-delack"


class Cap:
    """linkem-delack attached to a cgroup until stop()."""

    def __init__(self, cgroup: Path, timeout_ns: int):
        self.proc = subprocess.Popen([str(build()), str(cgroup), str(timeout_ns // 1000)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            self.proc.wait()
            err = self.proc.stderr.read().strip().splitlines()
            raise RuntimeError(err[-1] if err else f"linkem-delack exited with {self.proc.returncode}")

    def stop(self) -> dict:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=10)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        return json.loads(lines[-1]) if lines else {}
