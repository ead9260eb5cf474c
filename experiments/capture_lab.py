"""The lab of the capture studies and benchmarks (overhead, loss, capture-cost): two
network namespaces joined by a veth pair (replay.netns.pair), a cgroup for the
processes of each role (what a capture records, whose CPU is counted) below one
cgroup of the lab (a capture of all of the lab's traffic and nothing else), and a work
directory on a tmpfs; all of it removed when the block is left, however it is
left.  Everything is named FAMILY<pid>, so that runs of different processes never
meet.

    with open_lab("mgcc", ("sender", "receiver"), workdir="/dev/shm", duration=10) as lab:
        server = lab.start("receiver", lab.net.server, ["iperf3", "-s", "-1"])
        lab.wait_listening(lab.net.server, 5201)
        lab.cgroups["sender"], lab.work, lab.cpu_us()
"""
from __future__ import annotations

import os
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from magnet import capture
from magnet.replay import netns


@dataclass
class CaptureLab:
    net: netns.Net
    cgroup: Path                     # the lab's: every role's cgroup is below it
    cgroups: dict[str, Path]         # by role
    work: Path
    duration: float                  # seconds of each transfer
    binary: Path | None = None       # magnet-read
    rate: str | None = None          # iperf3 -b (e.g. "1G"); None: as fast as it goes

    def start(self, role: str, ns: str, cmd: list[str], **popen) -> subprocess.Popen:
        """`cmd` run in namespace `ns`, its processes in `role`'s cgroup."""
        cgroup = self.cgroups[role]
        return subprocess.Popen(["ip", "netns", "exec", ns, *cmd],
                                preexec_fn=lambda: capture.join_cgroup(cgroup), **popen)

    def wait_listening(self, ns: str, port: int, timeout: float = 5.0) -> None:
        """Until a TCP socket listens on `port` in namespace `ns` (RuntimeError after `timeout` s)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if f":{port} " in netns.sh("ss", "-Hltn", ns=ns).stdout:
                return
            time.sleep(0.02)
        raise RuntimeError(f"nothing listened on port {port} in {ns} within {timeout:g} s")

    def cpu_us(self) -> int:
        """CPU time (us) of the cgroups' processes so far, including the kernel work done in
        their context (the stack, the capture's programs): unlike the machine's CPU it
        does not count other work on the host."""
        return sum(_usage_us(cgroup) for cgroup in self.cgroups.values())


def _usage_us(cgroup: Path) -> int:
    for line in (cgroup / "cpu.stat").read_text().splitlines():
        if line.startswith("usage_usec "):
            return int(line.split()[1])
    return 0


@contextmanager
def open_lab(family: str, roles: tuple[str, ...], *, workdir: str | None, duration: float,
             binary: Path | None = None, rate: str | None = None) -> Iterator[CaptureLab]:
    """A CaptureLab named FAMILY<pid> with a cgroup for each of `roles`, its work directory
    in `workdir` (None: the system's temporary directory)."""
    prefix = f"{family}{os.getpid()}"
    lab_cgroup = capture.make_cgroup(prefix)
    cgroups: dict[str, Path] = {}
    try:
        for role in roles:
            cgroups[role] = capture.make_cgroup(f"{prefix}/{role}")
        with netns.pair(prefix) as net, tempfile.TemporaryDirectory(prefix=f"{prefix}-", dir=workdir) as work:
            yield CaptureLab(net, lab_cgroup, cgroups, Path(work), duration, binary, rate)
    finally:
        for cgroup in (*cgroups.values(), lab_cgroup):
            capture.remove_cgroup(cgroup)
