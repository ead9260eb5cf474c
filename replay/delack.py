"""A cap on the delayed-ACK timer of a cgroup's TCP connections (--delack-timeout).

Linux has no socket option or sysctl for the delayed-ACK timeout: its timer
adapts (40 ms at first, growing towards the RTT) up to the socket's
delack_max, 200 ms.  A sockops program can set delack_max with
bpf_setsockopt(TCP_BPF_DELACK_MAX) as each connection is established
(replay.sockopts).  The kernel takes 2 ticks to 200 ms, rounded up to its tick
(4 ms at HZ=250).

    why = delack.unavailable(timeout_ns)        # None: it can be applied here
    cap = delack.Cap(cgroup_path, timeout_ns)   # attached until stop()
    cap.stop()                                  # {"applied": connections, "refused": ...}
"""
from __future__ import annotations

import os
from pathlib import Path

from magnetlib import knobs

from . import sockopts

TICK_NS = 4_000_000                      # HZ=250, this kernel's (see rounded())
MAX_NS = 200_000_000                     # TCP_DELACK_MAX


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
    return sockopts.unavailable()


class Cap(sockopts.SockOpts):
    """The cap attached to a cgroup until stop()."""

    def __init__(self, cgroup: Path, timeout_ns: int):
        super().__init__(cgroup, delack_max_ns=timeout_ns)
