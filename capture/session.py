"""Running the kernel capture: find (or build) magnet-read, give a command its
own cgroup, start and stop a capture, read the status of running captures.

    with capture.Capture("x.magnet", cgroup=cg, ext=True) as cap:
        ...                      # traffic of the cgroup's processes is recorded
    cap.returncode               # 0: the trace is complete
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from magnetlib import buildcache

SOURCE = Path(__file__).resolve().parent      # capture/: the C sources and their Makefile
STATUS_DIR = "/run/magnet"
CGROUP_PARENT = "magnet"


class CaptureError(Exception):
    """A capture could not be set up or did not end cleanly (one-line message)."""


# ----------------------------------------------------------------- binary ---
def find_magnet_read(build: bool = True) -> Path:
    """magnet-read: $MAGNET_READ, else built from the sources shipped with magnet into
    the per-user cache (magnetlib.buildcache), else one on PATH (`make install`)."""
    if os.environ.get("MAGNET_READ"):
        given = Path(os.environ["MAGNET_READ"])
        if not os.access(given, os.X_OK):
            raise CaptureError(f"MAGNET_READ={given}: not an executable file")
        return given
    if build and (SOURCE / "Makefile").exists():
        return build_magnet_read() / "magnet-read"
    found = shutil.which("magnet-read")
    if found:
        return Path(found)
    raise CaptureError("magnet-read not found: its sources are not installed with this magnet "
                       "and none is on PATH")


def build_magnet_read(quiet: bool = True) -> Path:
    """The directory of magnet-read built from SOURCE (once per version of the sources)."""
    files = buildcache.tree(SOURCE, (".c", ".h"), ("Makefile",), recursive=False)
    if not shutil.which("make"):
        raise CaptureError("building magnet-read needs make (Debian: apt-get install make)")

    def make(out: Path) -> None:
        proc = subprocess.run(["make", "-s", "-C", str(SOURCE), f"OUTPUT={out}"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines() or ["make failed"]
            raise CaptureError(f"building magnet-read failed: {lines[-1].removeprefix('capture: ')}")
    return buildcache.build("capture", buildcache.key(files), make, quiet=quiet, label="magnet-read")[0]


# ---------------------------------------------------------------- cgroups ---
def cgroup2_root() -> Path:
    """The mount point of the cgroup v2 (unified) hierarchy."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split(" - ")
            if len(fields) == 2 and fields[1].startswith("cgroup2 "):
                return Path(line.split()[4])
    raise CaptureError("no cgroup v2 hierarchy is mounted (e.g. mount -t cgroup2 none "
                       "/sys/fs/cgroup/unified)")


def make_cgroup(name: str) -> Path:
    """A fresh cgroup for one command, under <root>/magnet/."""
    path = cgroup2_root() / CGROUP_PARENT / name
    try:
        path.mkdir(parents=True)
    except FileExistsError:
        raise CaptureError(f"cgroup {path} already exists (another capture of that name?)") from None
    except OSError as e:
        raise CaptureError(f"cannot create cgroup {path}: {e.strerror}") from None
    return path


def remove_cgroup(path: Path, timeout: float = 5.0) -> None:
    """Remove a command's cgroup, killing what the command left running in it."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise CaptureError(f"cannot remove cgroup {path}: processes remain in it") from None
        for pid in (path / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def join_cgroup(path: Path) -> None:
    """Move the calling process into a cgroup (used between fork and exec)."""
    with open(path / "cgroup.procs", "w") as f:
        f.write(str(os.getpid()))


# ---------------------------------------------------------------- capture ---
@dataclass
class Settings:
    """magnet-read's options (see `magnet-read --help`); None = its default."""
    events: str | None = None
    ext: bool = False
    buffer: str | None = None
    drain_delay: str | None = None
    pid: int | None = None
    ports: str | None = None
    duration: str | None = None
    rotate_size: str | None = None
    rotate_time: str | None = None
    stats: str | None = None
    status_dir: str | None = None
    no_drain: bool = False            # load and attach, never drain (overhead measurements)

    def args(self) -> list[str]:
        out: list[str] = []
        for flag, value in (("--events", self.events), ("--buffer", self.buffer),
                            ("--drain-delay", self.drain_delay), ("--pid", self.pid),
                            ("--port", self.ports), ("--duration", self.duration),
                            ("--rotate-size", self.rotate_size), ("--rotate-time", self.rotate_time),
                            ("--stats", self.stats), ("--status-dir", self.status_dir)):
            if value is not None:
                out += [flag, str(value)]
        return out + (["--ext"] if self.ext else []) + (["--no-drain"] if self.no_drain else [])


class Capture:
    """One magnet-read process. start() returns once the programs are attached."""

    def __init__(self, output: str | os.PathLike, cgroup: Path | None = None,
                 settings: Settings | None = None, binary: Path | None = None):
        self.output = Path(output)
        self.cgroup = cgroup
        self.settings = settings or Settings()
        self.binary = binary or find_magnet_read()
        self.proc: subprocess.Popen | None = None
        self.returncode: int | None = None
        self._stderr = tempfile.TemporaryFile()

    def command(self, ready_fd: int) -> list[str]:
        cmd = [str(self.binary), "-o", str(self.output), "--ready-fd", str(ready_fd), "--quiet"]
        if self.cgroup is not None:
            cmd += ["--cgroup", str(self.cgroup)]
        return cmd + self.settings.args()

    def start(self, timeout: float = 60.0) -> "Capture":
        r, w = os.pipe()
        try:
            # Its own session: a Ctrl-C meant for the traced command must not stop it.
            self.proc = subprocess.Popen(self.command(w), pass_fds=(w,), stderr=self._stderr,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            os.close(w)
        with os.fdopen(r, "rb") as ready:
            ok = self._wait_ready(ready, timeout)
        if not ok:
            self.proc.kill()
            self.proc.wait()
            raise CaptureError(self.error() or "magnet-read did not start")
        return self

    def _wait_ready(self, ready, timeout: float) -> bool:
        import select
        if not select.select([ready], [], [], timeout)[0]:
            return False
        return ready.read() == b"ready\n"

    def error(self) -> str:
        """magnet-read's last line on stderr."""
        self._stderr.seek(0)
        lines = self._stderr.read().decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else ""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send_signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def stop(self, sig: int = signal.SIGINT, timeout: float = 60.0) -> int:
        """Stop it (SIGINT: flush and close the trace) and return its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.returncode = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.returncode = self.proc.wait()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self.returncode = self.proc.wait(timeout)
        return self.returncode

    def __enter__(self) -> "Capture":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc) -> None:
        if self.returncode is None:
            self.stop()


# ----------------------------------------------------------------- status ---
def running_captures(status_dir: str = STATUS_DIR) -> list[dict]:
    """The status of every magnet-read that keeps a file in `status_dir`;
    'alive' says whether its process still exists (a killed one leaves its file)."""
    found = []
    for path in sorted(Path(status_dir).glob("magnet-read.*.json")):
        try:
            status = json.loads(path.read_text())
        except (OSError, ValueError):
            continue                    # being replaced, or not ours
        status["status_file"] = str(path)
        status["alive"] = _alive(int(status.get("pid", 0)))
        found.append(status)
    return found


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
