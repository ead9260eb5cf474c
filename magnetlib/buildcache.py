"""Native programs built on first use into a per-user cache, keyed by a hash of
everything they are built from, so that an installed magnet needs no checkout
and never writes into site-packages.

    target = buildcache.build("capture", key, lambda out: compile_into(out))

$MAGNET_CACHE moves the cache (default $XDG_CACHE_HOME/magnet or ~/.cache/magnet).
Parallel first uses build once (a lock per key); an interrupted build leaves
nothing that looks complete.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable

from . import progress


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

