"""A real FTP server nobody here wrote, captured live: Debian's vsftpd sends a file
to curl across an emulated path (linkem) between two network namespaces, and `magnet capture`
records the server (its sendfile() calls are its writes).  The data
connection's SOCK_SEND records are the demand a study replays.

    python -m magnet.experiments.ftp_server --size 20MB --rate 20Mbps --delay 30ms -o ftp.magnet

Needs root, the BPF capture, vsftpd and curl (Debian: vsftpd curl).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import magnetlib
from magnet.replay.scenario import Path as NetPath
from magnet.replay.scenario import Scenario
from magnetlib import demand as demand_mod
from magnetlib import knobs
from magnetlib.demand import Demand
from magnetlib.errors import MagnetError

from .common import StudyError, largest_sender

VSFTPD = "/usr/sbin/vsftpd"
CONFIG = """listen=YES
listen_address={address}
background=NO
anonymous_enable=YES
no_anon_password=YES
anon_root={root}
local_enable=NO
write_enable=NO
seccomp_sandbox=NO
secure_chroot_dir={empty}
pasv_enable=YES
use_sendfile=YES
xferlog_enable=NO
"""


def unavailable() -> str | None:
    """Why the live FTP capture cannot run here (None: it can)."""
    from magnet.replay import wire
    if os.geteuid() != 0:
        return "needs root (network namespaces, the BPF capture)"
    missing = [name for name, path in (("vsftpd", VSFTPD), ("curl", shutil.which("curl")))
               if not path or not os.path.exists(path)]
    if missing:
        return f"needs {' and '.join(missing)} (Debian: apt-get install {' '.join(missing)})"
    return wire.bpf_unavailable()


def _magnet() -> list[str]:
    beside = Path(sys.executable).parent / "magnet"
    return [str(beside)] if beside.exists() else ["magnet"]


def capture(trace: Path, size: int, path=None, timeout: float = 600) -> dict:
    """Serve `size` random bytes to curl across one emulated path (a
    magnet.replay.scenario.Path through linkem; default: the scenario's default
    path) with the server under `magnet capture`; what curl reports."""
    from magnet.replay import wan
    prefix = f"mgft{os.getpid()}"
    one = Scenario(stacks=1, path=(path or NetPath(),))
    with tempfile.TemporaryDirectory(prefix="magnet-ftp-") as scratch, \
            wan.chain(prefix, one, Path(scratch), subnet="10.205") as net:
        hop = net.stack(1)                      # the server on the left: the path's data direction
        root, empty = Path(scratch) / "root", Path(scratch) / "empty"
        root.mkdir(mode=0o755)
        empty.mkdir(mode=0o755)
        os.chmod(scratch, 0o755)
        with open(root / "file.bin", "wb") as f:
            f.write(np.random.default_rng(1).integers(0, 256, size, np.uint8).tobytes())
        config = Path(scratch) / f"vsftpd-{prefix}.conf"
        config.write_text(CONFIG.format(address=hop.left_addr, root=root, empty=empty))
        server = subprocess.Popen([*_magnet(), "capture", "-o", str(trace), "--cgroup-name",
                                   f"{prefix}-ftp", "--", "ip", "netns", "exec", hop.left_ns,
                                   VSFTPD, str(config)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            fetched = _fetch(hop, server, timeout)
        finally:
            # Only vsftpd itself: `magnet capture`'s own command line names the config too.
            subprocess.run(["pkill", "-TERM", "-f", f"^{VSFTPD} {config}"], capture_output=True)
            out, err = server.communicate(timeout=60)
        if server.returncode not in (0, 143, -15):
            raise StudyError("magnet capture", (err.strip().splitlines() or ["failed"])[-1])
    if fetched["bytes"] != size:
        raise StudyError("curl", f"fetched {fetched['bytes']} of {size} bytes")
    return fetched


def _fetch(hop, server: subprocess.Popen, timeout: float) -> dict:
    """curl the file from the client's namespace (the path's right end) once the server listens."""
    from magnet.replay import netns
    deadline = time.monotonic() + 30
    while True:
        if server.poll() is not None:        # the capture (or vsftpd) ended before serving
            err = server.stderr.read().strip().splitlines()
            raise StudyError("magnet capture", f"exited with status {server.returncode} before the "
                             f"server answered: {err[-1] if err else 'no message'}")
        proc = netns.sh("curl", "-s", "-o", "/dev/null", "-w",
                        "%{size_download} %{time_total}", "--max-time", str(int(timeout)),
                        f"ftp://{hop.left_addr}/file.bin", ns=hop.right_ns, check=False)
        if proc.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)                      # vsftpd not listening yet
    if proc.returncode != 0:
        raise StudyError("curl", f"exit {proc.returncode}: {proc.stderr.strip()}")
    got, seconds = proc.stdout.split()
    return {"bytes": int(got), "seconds": float(seconds)}


def server_demand(trace: Path) -> Demand:
    """The data connection's writes: the stream that sent the most bytes."""
    with magnetlib.open(trace) as t:
        t.check()
        demand = demand_mod.extract(t, largest_sender(t, "server"), "send", "sock")
    return Demand.from_arrays(demand.time_ns, demand.size)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m magnet.experiments.ftp_server", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=knobs.arg(knobs.positive_size), default="20MB", help="file size (default 20MB)")
    p.add_argument("--rate", type=knobs.arg(knobs.optional_rate), default=20_000_000,
                   help="the emulated path's bottleneck, e.g. 20Mbps or none (default 20Mbps)")
    p.add_argument("--delay", type=knobs.arg(knobs.duration), default=30_000_000,
                   help="the emulated path's one-way delay (default 30ms)")
    p.add_argument("-o", "--output", type=Path, required=True, help="the capture (a magnet trace)")
    args = p.parse_args(argv)
    why = unavailable()
    if why:
        print(f"ftp_server: {why}", file=sys.stderr)
        return 2
    try:
        fetched = capture(args.output, args.size, NetPath(rate_bps=args.rate, delay_ns=args.delay))
        d = server_demand(args.output)
    except MagnetError as e:
        print(f"ftp_server: {e}", file=sys.stderr)
        return 2
    print(f"curl fetched {fetched['bytes']} bytes in {fetched['seconds']:.2f} s; the server wrote "
          f"{int(d.size.sum())} bytes in {len(d)} calls (mean {d.size.mean():.0f} B) over "
          f"{d.duration_ns / 1e9:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
