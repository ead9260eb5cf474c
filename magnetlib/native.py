"""Hot loops in C, built on first use into the per-user cache and called through ctypes.

    lib = native.library("pcap/fastpath.c", {"fn": ([PTR, I64], I64)})   # a ctypes.CDLL, or None

Each caller keeps a numpy version of its loop and uses it when library() is None:
no C compiler or make on this machine, or MAGNET_NATIVE=0 in the environment (the
tests run both versions against each other).  magnetlib's Makefile builds every
loop's library at once.  ctypes releases the GIL during a call, so loops called
from several threads run on several cores.
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

from . import buildcache

PACKAGE = Path(__file__).resolve().parent
SOURCES = ("accumulate.c", "scan.c", "pcap/fastpath.c", "Makefile")
NEEDS = ("make", "cc")
PTR, I64, I32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
_loaded: dict[str, ctypes.CDLL | None] = {}


def enabled() -> bool:
    return os.environ.get("MAGNET_NATIVE", "1") != "0"


def buildable() -> bool:
    """Whether this machine has what building the loops needs (a C compiler and make)."""
    return not buildcache.missing(NEEDS)


def library(source: str, signatures: dict[str, tuple[list, object]]) -> ctypes.CDLL | None:
    """The shared library built from magnetlib/`source`, its functions typed by `signatures`
    (name -> (argument types, result type)); None when disabled, when no compiler is
    installed or the cache cannot be written.  A source that fails to compile is a bug:
    BuildError."""
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
    if not buildable():
        return None
    files = [(name, PACKAGE / name) for name in SOURCES]
    try:
        directory = buildcache.make("native", PACKAGE, files, needs=NEEDS, label="magnetlib's C loops")
    except OSError:                   # no writable cache: the numpy version gives the same results
        return None
    return ctypes.CDLL(str(directory / f"{Path(source).stem}.so"))
