"""The errors magnet reports as one line: every one a MagnetError, so that the `magnet`
command catches one type (magnetlib.cli.run) and exits 2 with the message.

    MagnetError            "WHAT: problem", or a sentence
      TraceError           a file that is not the trace (pcap, demand) it claims to be: "PATH: problem"
      UsageError           flags that cannot go together: "FLAG: problem"
      BuildError           a native part cannot be built: the missing tool or package, or the
                           compiler's first error (magnetlib.buildcache)

and, in the layers that raise them, LibraryError, ShipError, CaptureError, ReplayError
(Ns3Error, LinkemError, PathError, NetnsError ...) and the studies' StudyError.
"""
from __future__ import annotations

import os


class MagnetError(Exception):
    """What magnet cannot do as asked.  str() is one line: "WHAT: problem" when built
    from two parts, else the message as given."""

    def __init__(self, what: str | os.PathLike, problem: str | None = None):
        self.what = os.fspath(what)
        self.problem = problem
        super().__init__(self.what if problem is None else f"{self.what}: {problem}")


class TraceError(MagnetError):
    """Input that cannot be used as what it claims to be: "PATH: problem"."""

    def __init__(self, path: str | os.PathLike, problem: str):
        super().__init__(path, problem)
        self.path = self.what


class UsageError(MagnetError):
    """Options that cannot be honoured as given: "FLAG: problem"."""


class BuildError(MagnetError):
    """A native program or library cannot be built here: "WHAT: problem", naming the
    missing tool (and its Debian package) or the build's first error."""
