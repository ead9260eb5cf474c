"""Install the Debian packages of the suite (or of some recipes) when missing: on first
use by the study, or by `make setup-apps`.  Never at import.

apt-get waits for the dpkg lock (other installs on a shared machine); the package lists
are refreshed only when an install finds a package it does not know.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

from .recipe import Recipe

APT = ["apt-get", "-q", "-y", "-o", "DPkg::Lock::Timeout=600"]
ENV = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}


def missing_packages(recipes) -> list[str]:
    return sorted({p.name for r in recipes for p in r.packages if not p.installed()})


def _apt(*args: str, tries: int = 3) -> subprocess.CompletedProcess:
    """apt-get ARGS, retried while another apt holds a lock apt-get does not wait for."""
    for attempt in range(tries):
        proc = subprocess.run([*APT, *args], env=ENV, capture_output=True, text=True)
        if proc.returncode == 0 or "Could not get lock" not in proc.stderr or attempt == tries - 1:
            return proc
        time.sleep(10)
    return proc


def install(recipes: list[Recipe], say=print) -> list[str]:
    """Install what `recipes` need and is missing (as root); returns the packages installed.
    Raises RuntimeError with one line when it cannot."""
    packages = missing_packages(recipes)
    if not packages:
        return []
    if os.geteuid() != 0:
        raise RuntimeError(f"missing Debian packages {' '.join(packages)}: not root, not installing "
                           f"(as root: apt-get install {' '.join(packages)})")
    say(f"installing Debian packages: {' '.join(packages)}")
    proc = _apt("install", "--no-install-recommends", *packages)
    if proc.returncode:
        update = _apt("update")
        if update.returncode:
            raise RuntimeError(f"apt-get update failed: {_last(update)}")
        proc = _apt("install", "--no-install-recommends", *packages)
    if proc.returncode:
        raise RuntimeError(f"apt-get install {' '.join(packages)} failed: {_last(proc)}")
    still = missing_packages(recipes)
    if still:
        raise RuntimeError(f"installed {' '.join(packages)}, yet {' '.join(still)} still missing")
    return packages


def _last(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
    return lines[-1].strip() if lines else f"exit {proc.returncode}"


def main(argv: list[str] | None = None) -> int:
    """`python -m magnet.experiments.apps install [NAME...]` (make setup-apps)."""
    from . import RECIPES
    names = list(sys.argv[1:] if argv is None else argv) or list(RECIPES)
    unknown = [n for n in names if n not in RECIPES]
    if unknown:
        print(f"apps: unknown application {unknown[0]!r} (one of {', '.join(RECIPES)})", file=sys.stderr)
        return 2
    try:
        install([RECIPES[n] for n in names])
    except RuntimeError as e:
        print(f"setup-apps: {e}", file=sys.stderr)
        return 1 if os.environ.get("CI") or os.geteuid() == 0 else 0
    return 0
