"""Shipping finished traces to a central archive (the paper's magnet.copy).

A trace is copied under a temporary name, its checksum compared with the
original's, then renamed into place; only then is the original deleted.
Shipping never deletes a trace whose copy it has not verified.
"""
from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from . import private
from .errors import MagnetError

REMOTE = re.compile(r"^(?P<host>[^/:]+):(?P<dir>.*)$")
CHUNK = 1 << 20


class ShipError(MagnetError):
    """A trace could not be shipped; it was kept."""


def sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def finished(spool: str | os.PathLike, pattern: str, busy: set[str]) -> list[Path]:
    """Traces in `spool` no running capture is writing (`busy`: real paths)."""
    return sorted(p for p in Path(spool).glob(pattern)
                  if p.is_file() and not p.name.startswith(".") and os.path.realpath(p) not in busy)


class Shipper:
    """Ships to a directory (local or mounted) or to HOST:DIR over ssh."""

    def __init__(self, dest: str, ssh: str = "ssh", scp: str = "scp"):
        self.dest = dest
        self.remote = REMOTE.match(dest) if not os.path.isabs(dest) else None
        self.ssh, self.scp = shlex.split(ssh), shlex.split(scp)

    def ship(self, path: Path) -> None:
        digest = sha256(path)
        if self.remote:
            self._to_host(path, digest)
        else:
            self._to_directory(path, digest)
        path.unlink()

    # ------------------------------------------------------------ local ---
    def _to_directory(self, path: Path, digest: str) -> None:
        final = Path(self.dest) / path.name
        if final.exists():
            if sha256(final) == digest:
                return                  # shipped before; the source was not yet deleted
            raise ShipError(f"{final} exists and differs from {path}")
        tmp = final.with_name(f".{path.name}.part")
        try:
            with open(path, "rb") as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst, CHUNK)
                dst.flush()
                os.fsync(dst.fileno())
            shutil.copymode(path, tmp)
            if sha256(tmp) != digest:
                raise ShipError(f"{tmp}: the copy differs from {path}")
            os.replace(tmp, final)
            private.fsync(final.parent)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise ShipError(f"{path} -> {final}: {e.strerror or e}") from None
        except ShipError:
            tmp.unlink(missing_ok=True)
            raise

    # ----------------------------------------------------------- remote ---
    def _to_host(self, path: Path, digest: str) -> None:
        host, directory = self.remote["host"], self.remote["dir"] or "."
        final = f"{directory.rstrip('/')}/{path.name}"
        tmp = f"{directory.rstrip('/')}/.{path.name}.part"
        self._run(self.scp + ["-q", "-p", str(path), f"{host}:{tmp}"], path)
        remote_sum = self._run(self.ssh + [host, "sha256sum", shlex.quote(tmp)], path).split()
        if not remote_sum or remote_sum[0] != digest:
            self._run(self.ssh + [host, "rm", "-f", shlex.quote(tmp)], path, check=False)
            raise ShipError(f"{path}: the copy on {host} differs (sha256)")
        self._run(self.ssh + [host, "mv", "-f", shlex.quote(tmp), shlex.quote(final)], path)

    @staticmethod
    def _run(cmd: list[str], path: Path, check: bool = True) -> str:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if check and proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
            raise ShipError(f"{path}: {cmd[0]} failed: {last}")
        return proc.stdout
