"""What a recipe of the application suite is: a real program nobody here wrote, its server
and client commands with fixed parameters, the port that says the server is ready, the
Debian packages it needs, and how to tell that the client did all its work.

A recipe does the same work on any path (fixed sizes, counts and rates), so that runs of
one application on different paths can be compared; what changes between paths is only
how long it takes.  Its server runs in the server's network namespace, its client in the
client's, reaching the server at $MAGNET_SERVER.  Config files and data go into a private
directory the recipe is given (never /etc), and the server runs in the foreground so that
ending the run ends it.
"""
from __future__ import annotations

import copy
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from magnetlib.errors import MagnetError

KINDS = ("bulk", "request-response", "short-flows", "streaming")


@dataclass(frozen=True)
class Package:
    """A Debian package and the program of it that a recipe runs (absolute path)."""
    name: str
    program: str

    def installed(self) -> bool:
        return os.access(self.program, os.X_OK)

    def version(self) -> str:
        """The installed package's Debian version ("" when dpkg does not know it)."""
        proc = subprocess.run(["dpkg-query", "-W", "-f=${Version}", self.name],
                              capture_output=True, text=True)
        return proc.stdout.strip() if proc.returncode == 0 else ""


@dataclass
class Commands:
    """One run's commands: argv lists, the client's with $MAGNET_SERVER left to its shell."""
    server: list[str]
    client: list[str]
    port: int
    files: dict[str, Path] = field(default_factory=dict)     # what the recipe wrote, by role


class RecipeError(MagnetError):
    """The application did not do its work (or cannot run): "APP: problem"."""


class Recipe:
    """One application of the suite.  Subclasses set the class attributes and define
    prepare() (write config and data into a directory, return the commands) and
    verify() (read the client's output: the work done, or RecipeError)."""
    name: str = ""
    kind: str = ""
    summary: str = ""                      # what it does, with its fixed parameters
    packages: tuple[Package, ...] = ()
    port: int = 0
    slow_path_s: float = 0.0               # expected duration at 200 ms RTT, 2 Mbit/s
    work_params: tuple[str, ...] = ()      # the attributes that fix its work (sizes, counts)

    def missing(self) -> str | None:
        """One line naming what is not installed and the Debian package that has it."""
        absent = [p for p in self.packages if not p.installed()]
        if not absent:
            return None
        names = " ".join(sorted({p.name for p in absent}))
        programs = ", ".join(Path(p.program).name for p in absent)
        return (f"{self.name}: {programs} not installed (Debian: apt-get install {names}; "
                f"or make setup-apps)")

    def versions(self) -> dict[str, str]:
        """Package -> installed version: recorded with every result."""
        return {p.name: p.version() or "unknown" for p in self.packages}

    def work(self) -> dict:
        """Its work: parameter -> value (the summary describes the defaults)."""
        return {name: getattr(self, name) for name in self.work_params}

    def with_work(self, **work) -> "Recipe":
        """A copy doing other work, e.g. with_work(size=1_000_000): the study that asks for
        less (or more) says so with its results."""
        unknown = sorted(set(work) - set(self.work_params))
        if unknown:
            raise RecipeError(self.name, f"no work parameter {', '.join(unknown)} (it has "
                                         f"{', '.join(self.work_params) or 'none'})")
        other = copy.copy(self)
        other.__dict__.update(work)
        return other

    def prepare(self, work: Path) -> Commands:
        raise NotImplementedError

    def verify(self, stdout: str, commands: Commands) -> dict:
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.name} ({self.kind}): {self.summary}"


# ------------------------------------------------------------- helpers ---
def data_file(path: Path, size: int, seed: int = 1) -> Path:
    """`size` pseudo-random (incompressible, reproducible) bytes, readable by any user."""
    rng = np.random.default_rng(seed)
    with open(path, "wb") as f:
        left = size
        while left:
            chunk = min(left, 1 << 22)
            f.write(rng.integers(0, 256, chunk, np.uint8).tobytes())
            left -= chunk
    os.chmod(path, 0o644)
    return path


def private_dir(work: Path, name: str) -> Path:
    """A directory for one server's files; world-readable (servers may drop privileges)."""
    path = work / name
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o755)
    os.chmod(work, 0o755)
    return path


def shell(script: str) -> list[str]:
    """A client command run by sh, so that it can say "$MAGNET_SERVER"."""
    return ["sh", "-c", script]


def counted(stdout: str, key: str, what: str, app: str) -> int:
    """The integer after `key` in the client's output (e.g. curl's -w), or RecipeError."""
    for token in stdout.split():
        if token.startswith(key):
            try:
                return int(token[len(key):])
            except ValueError:
                break
    raise RecipeError(app, f"the client's output does not say {what}: {stdout.strip()[-200:]!r}")


def which(program: str) -> str:
    """An absolute path for a program on PATH (for recipes whose program moves between systems)."""
    return shutil.which(program) or f"/usr/bin/{program}"


def curl(url: str) -> list[str]:
    """curl fetching `url` (which may say $MAGNET_SERVER), printing bytes=N."""
    return shell(f'curl -sS -o /dev/null -w "bytes=%{{size_download}}\\n" "{url}"')


class Fetch(Recipe):
    """A recipe whose client fetches one file of `size` bytes and prints bytes=N."""
    size: int = 0
    work_params = ("size",)

    def verify(self, stdout: str, commands: Commands) -> dict:
        got = counted(stdout, "bytes=", "the bytes fetched", self.name)
        if got != self.size:
            raise RecipeError(self.name, f"fetched {got} of {self.size} bytes")
        return {"bytes": got}
