"""Native programs built on first use into a per-user cache, keyed by a hash of
everything they are built from, so that an installed magnet needs no checkout
and never writes into site-packages.  Every native part is built the same way:
its own Makefile, run into the cache.

    directory = buildcache.make("linkem", SOURCE, files, needs=("make", "cc"))

A tool or header that is missing is a BuildError naming it and the Debian package
that installs it, before anything runs; a failed build is a BuildError with the
build's first error.  $MAGNET_CACHE moves the cache (default $XDG_CACHE_HOME/magnet
or ~/.cache/magnet).  Parallel first uses build once (a lock per key); an
interrupted build leaves nothing that looks complete.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable

from . import progress
from .errors import BuildError

# The Debian package of each tool (on PATH) or file a build may need.
PACKAGES = {"make": "make", "cc": "gcc", "g++": "g++", "cmake": "cmake", "clang": "clang",
            "bpftool": "bpftool", "pkg-config": "pkg-config",
            "/usr/include/bpf/libbpf.h": "libbpf-dev", "/usr/include/gelf.h": "libelf-dev",
            "/usr/include/zlib.h": "zlib1g-dev", "/usr/include/pcap.h": "libpcap-dev"}
# What building a BPF program and its libbpf loader needs besides make and cc.
BPF_NEEDS = ("clang", "bpftool", "pkg-config", "/usr/include/bpf/libbpf.h", "/usr/include/gelf.h",
             "/usr/include/zlib.h")


def root() -> Path:
    base = os.environ.get("MAGNET_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "magnet"


def key(files: Iterable[tuple[str, Path]], extra: Iterable[str] = ()) -> str:
    """A short hash of (name, content) pairs and extra strings (flags, versions)."""
    h = hashlib.sha256()
    for name, path in sorted(files):
        h.update(name.encode() + b"\0" + Path(path).read_bytes() + b"\0")
    for part in extra:
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


def tree(directory: Path, suffixes: tuple[str, ...], names: tuple[str, ...] = (), *,
         recursive: bool = True) -> list[tuple[str, Path]]:
    """The files in `directory` (and below it) with one of `suffixes` or `names`, by
    relative name."""
    found = directory.rglob("*") if recursive else directory.iterdir()
    return [(str(p.relative_to(directory)), p) for p in sorted(found)
            if p.is_file() and (p.suffix in suffixes or p.name in names)]


def build(kind: str, digest: str, make: Callable[[Path], None], *, base: Path | None = None,
          quiet: bool = False, label: str | None = None) -> tuple[Path, float]:
    """The directory holding `kind`'s build for `digest`, made by make(work_dir) if
    absent; returns (directory, seconds spent building, 0 when cached)."""
    target = (base or root() / kind) / digest
    if (target / ".complete").exists():
        return target, 0.0
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / ".complete").exists():
            return target, 0.0
        if not quiet:
            print(f"building {label or kind} (once; cached in {target}) ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        work = Path(tempfile.mkdtemp(prefix=f".{digest}-", dir=target.parent))
        try:
            with progress.timed(f"building {label or kind}", show=not quiet):
                make(work)
            (work / ".complete").write_text(f"{kind} {digest}\n")
            if target.exists():
                shutil.rmtree(target)
            os.replace(work, target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        seconds = time.perf_counter() - start
        if not quiet:
            print(f"built {label or kind} in {seconds:.1f} s", file=sys.stderr)
    return target, seconds



def compiler() -> str | None:
    """The C compiler: $CC, else gcc or cc on PATH (None: there is none)."""
    return os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")


def missing(needs: Iterable[str]) -> list[str]:
    """The tools (on PATH; "cc": the C compiler) and files of `needs` that are not here."""
    def present(need: str) -> bool:
        if need == "cc":
            return compiler() is not None
        return os.path.exists(need) if need.startswith("/") else shutil.which(need) is not None
    return [need for need in needs if not present(need)]


def require(what: str, needs: Iterable[str]) -> None:
    """BuildError naming what is missing of `needs` to build `what`, and its Debian packages."""
    absent = missing(needs)
    if absent:
        packages = " ".join(dict.fromkeys(PACKAGES.get(n, n) for n in absent))
        raise BuildError(what, f"building it needs {', '.join(absent)} (Debian: apt-get install {packages})")


def run_make(source: Path, out: Path, targets: Iterable[str] = (), variables: dict | None = None,
             jobs: int = 1) -> subprocess.CompletedProcess:
    """`make -C source -jJOBS OUTPUT=out CC=... VAR=value... targets`, its output captured."""
    assigned = {"CC": compiler() or "cc", **(variables or {})}
    return subprocess.run(["make", "-s", "-C", str(source), f"-j{jobs}", f"OUTPUT={out}",
                           *(f"{k}={v}" for k, v in assigned.items()), *targets],
                          capture_output=True, text=True)


def first_error(proc: subprocess.CompletedProcess) -> str:
    """The line of a failed build that says why: the first naming an error (not make's
    own summary), else the first line, else its exit status."""
    lines = [line.strip() for line in (proc.stderr or proc.stdout or "").splitlines()
             if line.strip() and not line.startswith(("make:", "make["))]
    said = [line for line in lines if "error" in line.lower() or "missing" in line.lower()]
    return (said or lines or [f"make exited with status {proc.returncode}"])[0]


def make(kind: str, source: Path, files: Iterable[tuple[str, Path]], *, targets: Iterable[str] = (),
         variables: dict | None = None, needs: Iterable[str] = ("make", "cc"), label: str | None = None,
         quiet: bool = True, base: Path | None = None, jobs: int = 1, force: bool = False) -> Path:
    """The cache directory holding what `source`'s Makefile builds (its OUTPUT), made once
    per version of `files` (name, path), `targets` and `variables` (`jobs` at once; `force`:
    made again): BuildError if a tool of `needs` is missing or the build fails."""
    label = label or kind
    require(label, needs)
    targets, variables = list(targets), dict(variables or {})
    digest = make_key(files, targets, variables)
    if force:
        shutil.rmtree((base or root() / kind) / digest, ignore_errors=True)

    def run(out: Path) -> None:
        proc = run_make(source, out, targets, variables, jobs)
        if proc.returncode != 0:
            raise BuildError(label, first_error(proc))
    return build(kind, digest, run, base=base, quiet=quiet, label=label)[0]


def make_key(files: Iterable[tuple[str, Path]], targets: Iterable[str] = (), variables: dict | None = None) -> str:
    """make()'s cache key: the files, the C compiler, the targets and the variables."""
    return key(files, [compiler() or "cc", *targets, *(f"{k}={v}" for k, v in sorted((variables or {}).items()))])
