"""The capture without root: libmagnet-preload.so (preload.c) preloaded into a
command records its socket calls into spool files (one per process, see
preload.h), merged into one trace at the end.

    spool = preload.Spool("x.magnet", command=cmd)
    proc = subprocess.Popen(cmd, env=spool.environment(library))
    proc.wait()
    spool.merge()                    # writes x.magnet, removes the spool

A merge that cannot write the trace (a full disk) keeps the spool and says
how to merge it later: `python -m magnet.capture merge SPOOL [OUTPUT]`.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import struct
import tempfile
import time
from pathlib import Path

import numpy as np

import magnetlib
from magnetlib import buildcache
from magnetlib.errors import BuildError
from magnetlib import format as fmt
from magnetlib.format import Clock, Event
from magnetlib.meta import TraceMeta

from .session import SOURCE, CaptureError

LIBRARY = "libmagnet-preload.so"
SOURCES = ("preload.c", "preload.h", "magnet_format.h", "Makefile")
# From preload.h.
DIR_ENV = "MAGNET_PRELOAD_DIR"
SOCKETS_ENV = "MAGNET_PRELOAD_SOCKETS"
EXT_ENV = "MAGNET_PRELOAD_EXT"
PORTS_ENV = "MAGNET_PRELOAD_PORTS"
MAX_PORTS = 8
SUFFIX = ".spool"
SETTINGS = "spool.json"                # what the merge needs, kept with the records
CHUNK_MAGIC = 0x4D475043
CHUNK_ALIGN = 4 << 10                  # PRELOAD_FIRST_CHUNK: every chunk starts at a multiple
CHUNK_HEADER = np.dtype([("magic", "=u4"), ("bytes", "=u4"), ("record_size", "=u4"),
                         ("reserved", "=u4"), ("pid", "=u4"), ("tid", "=u4")])
EXT_GROUPS = fmt.ExtValid.TCP_INFO | fmt.ExtValid.TASK
RECORDED = (Event.SOCK_SEND, Event.SOCK_RECV, Event.LOST)


# ---------------------------------------------------------------- library ---
def find_library(build: bool = True) -> Path:
    """libmagnet-preload.so: $MAGNET_PRELOAD_LIB, else built from the sources
    shipped with magnet into the per-user cache (a C compiler is all it needs)."""
    given = os.environ.get("MAGNET_PRELOAD_LIB")
    if given:
        if not os.path.isfile(given):
            raise CaptureError(f"MAGNET_PRELOAD_LIB={given}: no such file")
        return Path(given).resolve()
    if not build:
        raise CaptureError(f"{LIBRARY} is not built (python -m magnet.capture preload)")
    try:
        return build_library() / LIBRARY
    except OSError as e:
        raise BuildError(buildcache.root(), f"cannot build {LIBRARY} there: {e.strerror} "
                                            "(set MAGNET_CACHE to a directory of yours)") from None


def build_library(quiet: bool = True) -> Path:
    """The directory of libmagnet-preload.so built by SOURCE's Makefile (`make preload`,
    once per version of its sources); BuildError naming what is missing or the first error."""
    files = [(name, SOURCE / name) for name in SOURCES]
    return buildcache.make("preload", SOURCE, files, targets=["preload"], label=LIBRARY, quiet=quiet)


# ---------------------------------------------------------------- command ---
def check_command(command: list[str]) -> Path:
    """The executable `command` runs, if the shim can see its calls; else CaptureError
    with one line (not found, not executable, static, Go)."""
    name = command[0]
    found = shutil.which(name) if "/" not in name else name
    if not found or not os.path.exists(found):
        raise CaptureError(f"{name}: no such command")
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        raise CaptureError(f"{name}: not an executable file")
    check_binary(Path(found), name)
    return Path(found)


def check_binary(path: Path, name: str, depth: int = 0) -> None:
    """Refuse what bypasses libc: static binaries and Go programs (a script: its interpreter)."""
    with open(path, "rb") as f:
        head = f.read(256)
    if head.startswith(b"#!") and depth < 2:
        interpreter = script_interpreter(head)
        if interpreter:
            check_binary(interpreter, f"{name} (its interpreter {interpreter})", depth + 1)
        return
    if not head.startswith(b"\x7fELF"):
        return                          # the kernel will say what it is
    try:
        kind = elf_kind(path)
    except (struct.error, ValueError):
        return                          # a broken ELF: the kernel will refuse it
    if kind == "static":
        raise CaptureError(f"{name}: statically linked: its system calls bypass libc, so the "
                           "preload capture would see none (capture it with BPF, as root)")
    if kind == "go":
        raise CaptureError(f"{name}: a Go program: it makes its system calls itself, so the "
                           "preload capture would see none (capture it with BPF, as root)")


def script_interpreter(head: bytes) -> Path | None:
    words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env" and len(words) > 1 and not words[1].startswith("-"):
        found = shutil.which(words[1])
        return Path(found) if found else None
    return Path(words[0]) if os.path.exists(words[0]) else None


def elf_kind(path: Path) -> str:
    """'static' (no program interpreter), 'go' (a .go.buildinfo section) or 'dynamic'."""
    with open(path, "rb") as f:
        data = f.read(64)
        bits64, order = data[4] == 2, "<" if data[5] == 1 else ">"
        if bits64:
            phoff, shoff = struct.unpack_from(order + "QQ", data, 32)
            phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from(order + "HHHHH", data, 54)
        else:
            phoff, shoff = struct.unpack_from(order + "II", data, 28)
            phentsize, phnum, shentsize, shnum, shstrndx = struct.unpack_from(order + "HHHHH", data, 42)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
        types = [struct.unpack_from(order + "I", table, i * phentsize)[0] for i in range(phnum)]
        if 3 not in types:                  # PT_INTERP
            return "static"
        return "go" if ".go.buildinfo" in section_names(f, order, bits64, shoff, shentsize,
                                                         shnum, shstrndx) else "dynamic"


def section_names(f, order: str, bits64: bool, shoff: int, shentsize: int, shnum: int,
                  shstrndx: int) -> set[str]:
    if not shoff or shstrndx >= shnum:
        return set()
    f.seek(shoff)
    table = f.read(shentsize * shnum)
    fields = (order + "IIQQQQ") if bits64 else (order + "IIIIII")

    def header(i):                          # (name offset, file offset, size)
        name, _, _, _, offset, size = struct.unpack_from(fields, table, i * shentsize)
        return name, offset, size
    _, stroff, strsize = header(shstrndx)
    f.seek(stroff)
    strings = f.read(strsize)
    return {strings[n:strings.index(b"\0", n)].decode(errors="replace")
            for n, _, _ in map(header, range(shnum)) if n < len(strings)}


# ------------------------------------------------------------------ spool ---
class SpoolKept(CaptureError):
    """The trace could not be written; the spool, with every record, is kept."""


class Spool:
    """The directory the command's processes write into, next to the output, and
    the merge of what they wrote into the trace."""

    def __init__(self, output: str | os.PathLike, all_sockets: bool = False, ext: bool = False,
                 ports: str | None = None, command: list[str] = ()):
        self.output = Path(output)
        self.all_sockets = all_sockets
        self.ext = ext
        self.ports = parse_ports(ports)
        self.command = list(command)
        check_writable(self.output)
        self.path = Path(tempfile.mkdtemp(prefix=".magnet-preload-",
                                          dir=self.output.resolve().parent))
        self.start_ticks = time.monotonic_ns()     # the shim's clock: CLOCK_MONOTONIC
        self.wall_ns = time.time_ns()
        try:
            (self.path / SETTINGS).write_text(json.dumps(self.settings()))
        except OSError as e:
            self.remove()
            raise CaptureError(f"{self.path}: {e.strerror}") from None

    def settings(self) -> dict:
        return {"output": str(self.output.resolve()), "all_sockets": self.all_sockets, "ext": self.ext,
                "ports": self.ports, "command": self.command, "start_ticks": self.start_ticks,
                "wall_ns": self.wall_ns}

    @classmethod
    def reopen(cls, directory: str | os.PathLike) -> "Spool":
        """The spool a capture kept in `directory` (its merge failed)."""
        directory = Path(directory)
        try:
            settings = json.loads((directory / SETTINGS).read_text())
            spool = cls.__new__(cls)
            spool.path, spool.output = directory, Path(settings["output"])
            spool.all_sockets, spool.ext = bool(settings["all_sockets"]), bool(settings["ext"])
            spool.ports, spool.command = list(settings["ports"]), list(settings["command"])
            spool.start_ticks, spool.wall_ns = int(settings["start_ticks"]), int(settings["wall_ns"])
        except FileNotFoundError:
            raise CaptureError(f"{directory}: not a spool of magnet capture --preload "
                               f"(no {SETTINGS})") from None
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise CaptureError(f"{directory / SETTINGS}: unreadable ({e})") from None
        return spool

    def environment(self, library: Path, env: dict | None = None) -> dict:
        """`env` (default ours) with the shim preloaded, writing into this spool."""
        env = dict(os.environ if env is None else env)
        if any(c in str(library) for c in " :"):
            raise CaptureError(f"{library}: LD_PRELOAD cannot name a path with spaces or colons "
                               "(set MAGNET_CACHE elsewhere)")
        env["LD_PRELOAD"] = " ".join(filter(None, (str(library), env.get("LD_PRELOAD"))))
        env[DIR_ENV] = str(self.path)
        for name, value in ((SOCKETS_ENV, "all" if self.all_sockets else None),
                            (EXT_ENV, "1" if self.ext else None),
                            (PORTS_ENV, ",".join(map(str, self.ports)) or None)):
            env.pop(name, None)             # not inherited from a capture around this one
            if value:
                env[name] = value
        return env

    def merge(self, command: list[str] | None = None,
              output: str | os.PathLike | None = None) -> tuple[int, int]:
        """Write the trace of `command` (records in time order, to `output` or the
        capture's output) and remove the spool; returns (records, lost). A trace
        that cannot be written (SpoolKept) leaves no partial file and keeps the spool."""
        if command is not None:
            self.command = list(command)
        output = Path(output) if output is not None else self.output
        records = read_spool_dir(self.path, self.record_size)
        writer = None
        try:
            writer = magnetlib.TraceWriter(output, self.meta(self.command), ext=self.ext)
            writer.append(records)
            writer.close()
        except OSError as e:
            if writer is not None:
                writer.abort()
            raise SpoolKept(f"{output}: {e.strerror or e}: the {len(records)} records are kept in "
                            f"{self.path}; merge them later (where there is room) with: "
                            f"python -m magnet.capture merge {self.path} [OUTPUT]") from None
        self.remove()
        lost = records["size"][records["event"] == Event.LOST].sum()
        return len(records), int(lost)

    @property
    def record_size(self) -> int:
        return fmt.EXT_RECORD_SIZE if self.ext else fmt.CORE_SIZE

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def meta(self, command: list[str]) -> TraceMeta:
        what = "all sockets" if self.all_sockets else "TCP sockets"
        if self.ports:
            what += f" with port {','.join(map(str, self.ports))}"
        return TraceMeta(anchor_ticks=self.start_ticks, wall_anchor_ns=self.wall_ns,
                         clock_source=Clock.MONOTONIC, host_id=host_id(),
                         hostname=socket.gethostname(), kernel=platform.release(),
                         producer=f"magnet {magnetlib.__version__} ({LIBRARY})",
                         event_mask=fmt.event_mask([Event.SOCK_SEND, Event.SOCK_RECV]),
                         ext_mask=int(EXT_GROUPS) if self.ext else 0,
                         filter=f"{what} of {' '.join(map(str, command))[:200]} and its children (LD_PRELOAD)",
                         segment_index=0, capture_method="preload")


def parse_ports(text: str | None) -> list[int]:
    """--port "80,443" as magnet-read reads it: up to 8 port numbers."""
    words = [w.strip() for w in text.split(",")] if text else []
    for word in words:
        if not word.isdigit() or not 0 < int(word) < 65536:
            raise CaptureError(f"--port: '{word}' is not a port number")
    if len(words) > MAX_PORTS:
        raise CaptureError(f"--port: at most {MAX_PORTS} ports")
    return [int(w) for w in words]


def check_writable(output: Path) -> None:
    directory = output.resolve().parent
    if output.is_dir():
        raise CaptureError(f"{output}: is a directory")
    if not directory.is_dir():
        raise CaptureError(f"{output}: no such directory {directory}")
    if not os.access(directory, os.W_OK | os.X_OK) or (output.exists() and not os.access(output, os.W_OK)):
        raise CaptureError(f"{output}: not writable")


def host_id() -> int:
    """As magnet-read: the first 16 hex digits of /etc/machine-id."""
    try:
        return int(Path("/etc/machine-id").read_text()[:16], 16)
    except (OSError, ValueError):
        return 0


def read_spool_dir(directory: Path, record_size: int = fmt.CORE_SIZE) -> np.ndarray:
    """Every spool file's records, in time order, with LOST records for slots
    that were being written when their process died."""
    dtype = fmt.record_dtype(record_size)
    parts = [read_spool(p, dtype) for p in sorted(directory.glob("*" + SUFFIX)) if p.stat().st_size]
    records = np.concatenate(parts) if parts else np.zeros(0, dtype)
    return records[np.argsort(records["timestamp"], kind="stable")]


def read_spool(path: Path, dtype: np.dtype) -> np.ndarray:
    """One process's records. A slot it did not finish (timestamp still 0 before
    its chunk's last record) or could not have written (an unknown event) is
    counted in one LOST record at the process's last time."""
    raw = np.fromfile(path, np.uint8)
    parts, bad = [], 0
    for start, stop in chunk_slots(raw, path, dtype.itemsize):
        slots = raw[start:stop].view(dtype)
        used = np.flatnonzero(slots["timestamp"])
        slots = slots[:used[-1] + 1] if len(used) else slots[:0]
        good = (slots["timestamp"] != 0) & np.isin(slots["event"], RECORDED)
        bad += int((~good).sum())
        parts.append(slots[good])
    records = np.concatenate(parts) if parts else np.zeros(0, dtype)
    if bad:
        lost = np.zeros(1, dtype)
        lost["timestamp"] = records["timestamp"].max() if len(records) else 1
        lost["event"], lost["size"] = Event.LOST, bad
        records = np.concatenate([records, lost])
    return records


def chunk_slots(raw: np.ndarray, path: Path, record_size: int):
    """(start, stop) byte ranges of the record slots of each chunk."""
    offset = 0
    while offset + fmt.CORE_SIZE <= raw.size:
        head = raw[offset:offset + fmt.CORE_SIZE].view(CHUNK_HEADER)[0]
        size = int(head["bytes"])
        if head["magic"] != CHUNK_MAGIC or size < CHUNK_ALIGN or size % CHUNK_ALIGN:
            offset += CHUNK_ALIGN           # reserved by a process that died before starting it
            continue
        if head["record_size"] != record_size:
            raise CaptureError(f"{path}: records of {head['record_size']} bytes where "
                               f"{record_size} were asked for (a shim of another version?)")
        start = offset + fmt.CORE_SIZE
        end = min(offset + size, raw.size)
        yield start, end - (end - start) % record_size
        offset += size
