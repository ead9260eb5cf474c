"""`magnet ship` (the paper's magnet.copy): finished traces move to the archive,
verified before the originals go; busy or failed ones stay."""
from __future__ import annotations

import json
import os
import subprocess

import numpy as np

import magnetlib
from magnetlib import Clock, Event

from .conftest import require_root


def make_trace(path, n: int = 100) -> bytes:
    rec = magnetlib.empty_records(n)
    rec["timestamp"] = np.arange(1, n + 1) * 1000
    rec["event"] = Event.SOCK_SEND
    rec["size"] = 100
    rec["sockid"] = 7
    magnetlib.write(path, rec, clock_source=Clock.MONOTONIC)
    return path.read_bytes()


def test_ship_to_a_directory(tmp_path, magnet):
    spool, archive, status = tmp_path / "spool", tmp_path / "archive", tmp_path / "status"
    for d in (spool, archive, status):
        d.mkdir()
    done = {name: make_trace(spool / name) for name in ("a.magnet", "b.magnet")}
    busy = spool / "c.magnet"
    make_trace(busy)
    # A running capture still writes c.magnet: its status file says so.
    (status / f"magnet-read.{os.getpid()}.json").write_text(json.dumps(
        {"pid": os.getpid(), "output": str(busy)}))
    proc = magnet("ship", "--spool", spool, "--to", archive, "--status-dir", status, check=True)
    for name, data in done.items():
        assert (archive / name).read_bytes() == data and not (spool / name).exists()
        assert f"shipped {spool / name}" in proc.stdout_text
        assert (archive / name).stat().st_mode & 0o777 == 0o600
    assert busy.exists() and not (archive / "c.magnet").exists()
    assert not list(archive.glob(".*"))                              # no temporary copies left


def test_ship_keeps_what_it_could_not_verify(tmp_path, magnet):
    """An archive that cannot take the trace (a full file system): the original stays."""
    require_root()
    spool, archive = tmp_path / "spool", tmp_path / "archive"
    spool.mkdir()
    archive.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "mgcap-ship", archive], check=True)
    try:
        data = make_trace(spool / "big.magnet", n=20000)             # 480 KB > 64 KB
        proc = magnet("ship", "--spool", spool, "--to", archive, "--status-dir", tmp_path)
        assert proc.returncode == 2 and "(kept)" in proc.stderr_text
        assert (spool / "big.magnet").read_bytes() == data
        assert not list(archive.iterdir())
    finally:
        subprocess.run(["umount", archive], check=True)


def test_ship_refuses_to_overwrite_a_different_trace(tmp_path, magnet):
    spool, archive = tmp_path / "spool", tmp_path / "archive"
    spool.mkdir()
    archive.mkdir()
    make_trace(spool / "x.magnet", n=10)
    other = make_trace(archive / "x.magnet", n=20)
    proc = magnet("ship", "--spool", spool, "--to", archive, "--status-dir", tmp_path)
    assert proc.returncode == 2 and "exists and differs" in proc.stderr_text
    assert (spool / "x.magnet").exists() and (archive / "x.magnet").read_bytes() == other
