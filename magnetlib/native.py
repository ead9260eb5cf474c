"""Hot loops in C, built on first use into the per-user cache and called through ctypes.

    lib = native.library("pcap/fastpath.c", {"fn": ([PTR, I64], I64)})   # a ctypes.CDLL, or None

Each caller keeps a numpy version of its loop and uses it when library() is None:
no C compiler on this machine, or MAGNET_NATIVE=0 in the environment (the tests
run both versions against each other).  ctypes releases the GIL during a call, so
loops called from several threads run on several cores.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

from . import buildcache
from .errors import BuildError

PACKAGE = Path(__file__).resolve().parent
CFLAGS = ["-O2", "-Wall", "-Wextra", "-std=gnu11", "-shared", "-fPIC"]
PTR, I64, I32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
_loaded: dict[str, ctypes.CDLL | None] = {}


def enabled() -> bool:
    return os.environ.get("MAGNET_NATIVE", "1") != "0"


def compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")


def library(source: str, signatures: dict[str, tuple[list, object]]) -> ctypes.CDLL | None:
    """The shared library built from magnetlib/`source`, its functions typed by `signatures`
    (name -> (argument types, result type)); None when disabled, when no compiler is
    installed or the cache cannot be written.  A source that fails to compile is a bug:
    it raises."""
    if not enabled():
        return None
    if source not in _loaded:
        lib = _load(source)
        for name, (args, result) in signatures.items() if lib is not None else ():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, result
        _loaded[source] = lib
    return _loaded[source]


def _load(source: str) -> ctypes.CDLL | None:
    cc = compiler()
    if not cc:
        return None
    path = PACKAGE / source
    name = path.stem

    def make(out: Path) -> None:
        proc = subprocess.run([cc, *CFLAGS, "-o", str(out / f"{name}.so"), str(path)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(path, f"{cc} failed: {proc.stderr.strip()}")
    digest = buildcache.key([(source, path)], [cc, *CFLAGS, sys.platform])
    try:
        directory, _ = buildcache.build("native", digest, make, quiet=True, label=name)
    except OSError:                   # no writable cache: the numpy version gives the same results
        return None
    return ctypes.CDLL(str(directory / f"{name}.so"))
