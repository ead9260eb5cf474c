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
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from magnetlib import buildcache
from magnetlib.errors import MagnetError
from magnetlib import format as fmt
# The sockid of the LOST record that ends a trace whose capture stopped before
# it was asked to (docs/trace-format.md; MAGNET_LOST_ENDED_EARLY in capture/writer.h).
from magnetlib.scan import LOST_ENDED_EARLY

SOURCE = Path(__file__).resolve().parent      # capture/: the C sources and their Makefile
STATUS_DIR = "/run/magnet"
CGROUP_PARENT = "magnet"


class CaptureError(MagnetError):
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
    """The directory of magnet-read built by SOURCE's Makefile (once per version of the
    sources); BuildError naming what is missing or the first error."""
    files = buildcache.tree(SOURCE, (".c", ".h", ".mk"), ("Makefile",), recursive=False)
    return buildcache.make("capture", SOURCE, files, needs=("make", "cc", *buildcache.BPF_NEEDS),
                           label="magnet-read", quiet=quiet)


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
    force: bool = False               # replace an existing non-empty trace

    def args(self) -> list[str]:
        out: list[str] = []
        for flag, value in (("--events", self.events), ("--buffer", self.buffer),
                            ("--drain-delay", self.drain_delay), ("--pid", self.pid),
                            ("--port", self.ports), ("--duration", self.duration),
                            ("--rotate-size", self.rotate_size), ("--rotate-time", self.rotate_time),
                            ("--stats", self.stats), ("--status-dir", self.status_dir)):
            if value is not None:
                out += [flag, str(value)]
        flags = (("--ext", self.ext), ("--no-drain", self.no_drain), ("--force", self.force))
        return out + [flag for flag, on in flags if on]


class Capture:
    """One magnet-read process. start() returns once the programs are attached.

    Started from the main thread, it stops when this process dies, however it
    dies (magnet-read --parent): the kernel signals the death of the thread
    that started it, so from another thread it is left to stop().
    """

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
        if threading.current_thread() is threading.main_thread():
            cmd += ["--parent", str(os.getpid())]
        return cmd + self.settings.args()

    def start(self, timeout: float = 60.0) -> "Capture":
        r, w = os.pipe()
        try:
            # Its own session: a Ctrl-C meant for the traced command must not stop it.
            self.proc = subprocess.Popen(self.command(w), pass_fds=(w,), stderr=self._stderr,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            os.close(w)
        ok = False
        try:
            with os.fdopen(r, "rb") as ready:
                ok = self._wait_ready(ready, timeout)
        finally:
            if not ok:                         # refused, timed out, or we were interrupted
                self.proc.kill()
                self.proc.wait()
        if not ok:
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

    def poll(self) -> int | None:
        """Its exit status if it has stopped by itself (a failed write, a kill), else None."""
        if self.returncode is None:
            self.returncode = self.proc.poll()
        return self.returncode

    def end_early(self) -> Path | None:
        """After magnet-read was killed: end the file it was writing as it would have
        (whole records, then a LOST record marked as ended early). That file, or None."""
        path = self.current_output()
        return path if mark_ended_early(path) else None

    def current_output(self) -> Path:
        """The file magnet-read was writing as of its last status update (rotation)."""
        status = Path(self.settings.status_dir or STATUS_DIR) / f"magnet-read.{self.pid}.json"
        try:
            return Path(json.loads(status.read_text())["output"])
        except (OSError, ValueError, KeyError):
            return self.output

    def __enter__(self) -> "Capture":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc) -> None:
        if self.returncode is None:
            self.stop()


def mark_ended_early(path: str | os.PathLike) -> bool:
    """End a trace its writer left mid-way as magnet-read ends one: drop a partial
    last record, append a LOST record marked LOST_ENDED_EARLY, or on a full disk
    put it in place of the last record. Its count is what is known lost: the
    record it replaces. False if `path` is no trace or cannot be written."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        size = _record_size(fd)
        end = os.fstat(fd).st_size // size * size if size else 0
        for at in (end, end - size):        # no room for one more: replace the last one
            if size and at > size and _write_lost_end(fd, at, size, _count_at(fd, at, size)):
                return True
        return False
    finally:
        os.close(fd)


def _record_size(fd: int) -> int:
    """The record size a trace's SYSINFO announces (native byte order), or 0."""
    head = os.pread(fd, fmt.CORE_SIZE, 0)
    if len(head) < fmt.CORE_SIZE:
        return 0
    sysinfo = np.frombuffer(head, fmt.record_dtype())[0]
    size = int(sysinfo["sockid"]) & 0xFFFFFFFF
    return size if sysinfo["event"] == fmt.SYSINFO and size in fmt.RECORD_SIZES else 0


def _count_at(fd: int, at: int, size: int) -> int:
    """What the record at `at` (if any) counts: 1 event, or a LOST record's count."""
    data = os.pread(fd, size, at)
    if len(data) < size:
        return 0
    record = np.frombuffer(data, fmt.record_dtype(size))[0]
    return int(record["size"]) if record["event"] == fmt.Event.LOST else 1


def _write_lost_end(fd: int, at: int, size: int, count: int) -> bool:
    record = np.zeros(1, fmt.record_dtype(size))
    record["sockid"], record["timestamp"] = LOST_ENDED_EARLY, time.monotonic_ns()
    record["event"], record["size"] = fmt.Event.LOST, count
    try:
        os.ftruncate(fd, at)
        if os.pwrite(fd, record.tobytes(), at) != size:
            raise OSError("short write")
        return True
    except OSError:
        return False


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
