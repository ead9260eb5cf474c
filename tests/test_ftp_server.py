"""The live workload of the studies: Debian's vsftpd sends a file to curl over an emulated
path, under `magnet capture`; its sendfile() calls are the demand (experiments/ftp_server.py)."""
from __future__ import annotations

import pytest

import magnetlib
from magnet.experiments import ftp_server
from magnet.experiments.common import StudyError
from magnet.replay.scenario import Path as NetPath

from .conftest import require

SIZE = 1_000_000
FAST = NetPath(rate_bps=100_000_000, delay_ns=1_000_000)


@pytest.fixture
def ready():
    why = ftp_server.unavailable()
    require(why is None, f"live FTP capture: {why}")


def test_sendfile_shows_up_as_the_servers_writes(ready, tmp_path):
    trace = tmp_path / "ftp.magnet"
    fetched = ftp_server.capture(trace, SIZE, FAST, timeout=60)
    assert fetched["bytes"] == SIZE
    demand = ftp_server.server_demand(trace)
    assert int(demand.size.sum()) == SIZE                    # every byte sendfile moved
    assert len(demand) >= 2 and demand.size.max() < SIZE    # in the server's own calls
    with magnetlib.open(trace) as t:
        assert t.meta.producer.startswith("magnet-read")         # the BPF capture, not the shim


def test_a_capture_that_cannot_start_says_why(ready, tmp_path):
    """Not 'curl: exit 7' after a timeout: the capture's own one-line error."""
    trace = tmp_path / "ftp.magnet"
    trace.write_bytes(b"not empty")
    with pytest.raises(StudyError, match="magnet capture.*exists and is not empty"):
        ftp_server.capture(trace, SIZE, FAST, timeout=60)
