"""Study `traces` (Fig. 8, Fig. 10): FTP-like and MP3-like streams run for real between two
network namespaces, captured live by the BPF capture, application calls against wire packets."""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import magnetlib
from magnetlib.format import Event
from magnet.replay import wire

from .conftest import BIN, assert_clean_error, require, require_root, run_magnet, unprivileged

MSS = 1448                       # MTU 1500, IPv4, TCP timestamps


def run_study(factory, name: str, *args) -> Path:
    """Run `magnet experiment NAME --quick [ARGS]` (root and the BPF capture needed) into a fresh directory."""
    require_root()
    why = wire.bpf_unavailable()
    require(why is None, f"BPF capture unavailable: {why}")
    out = factory.mktemp(name)
    run_magnet("experiment", name, "--quick", *args, "--out", out / "results", "--work", out / "work", check=True)
    return out


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """`traces --quick --duration 2`: each stream 2 s (--quick's 4): 10 writes of ftp-slow,
    100 of ftp, every check of each write and packet."""
    return run_study(tmp_path_factory, "traces", "--duration", "2")


def sides(path):
    """The sender's and the receiver's cookies: who wrote, who read."""
    with magnetlib.open(path) as t:
        d = t.check().data
        sender = int(d["sockid"][(d["event"] == Event.SOCK_SEND) & (d["size"] > 0)][0])
        receiver = int(d["sockid"][(d["event"] == Event.SOCK_RECV) & (d["size"] > 0)][0])
    return sender, receiver


def series(path, event, cookie):
    with magnetlib.open(path) as t:
        ns, size = t.series(t.select([event], cookie))
    return ns[size > 0], size[size > 0]


def test_results_written(study):
    res = study / "results"
    for name in ("README.md", "layers.csv", "paper.csv", "fig8-ftp-slow.png", "fig8-ftp.png", "fig10-mp3.png"):
        assert (res / name).stat().st_size > 0, name
    readme = (res / "README.md").read_text()
    assert "no added delay" in readme and "linkem" in readme and "fig10-mp3.png" in readme
    layers = pd.read_csv(res / "layers.csv")
    assert set(layers["case"]) == {"ftp-slow", "ftp", "mp3"}
    writes = layers[layers["layer"] == "SOCK_SEND"].set_index("case")
    assert writes.loc["ftp", "mean_size"] == 10240 and writes.loc["ftp", "cv_size"] == 0
    assert writes.loc["mp3", "mean_size"] == 418
    assert writes.loc["ftp-slow", "mean_spacing_s"] == pytest.approx(0.2, rel=0.05)
    assert writes.loc["ftp", "mean_spacing_s"] == pytest.approx(0.02, rel=0.05)
    wire_rows = layers[layers["layer"] == "DEV_SEND"].set_index("case")
    assert (wire_rows["mean_size"] <= MSS).all()


@pytest.mark.parametrize("case,write", [("ftp-slow", 10240), ("ftp", 10240), ("mp3", 418)])
def test_application_and_wire(study, case, write):
    """The writes are the demand's; the wire packets are at most an MSS and carry every byte."""
    trace = study / "work" / case / "stack-1.magnet"
    sender, receiver = sides(trace)
    _, writes = series(trace, Event.SOCK_SEND, sender)
    assert (writes == write).all(), np.unique(writes)
    _, reads = series(trace, Event.SOCK_RECV, receiver)
    assert reads.sum() == writes.sum()
    for event, cookie in ((Event.DEV_SEND, sender), (Event.DEV_RECV, receiver)):
        _, packets = series(trace, event, cookie)
        assert packets.max() <= MSS
        assert packets.sum() >= 0.98 * writes.sum()          # the capture may miss a few (reported)
    if case != "mp3":
        assert len(series(trace, Event.DEV_SEND, sender)[1]) >= 7 * len(writes)   # 10 KB = 8 packets


@pytest.mark.parametrize("name", ["traces", "sndbuf"])
def test_needs_root(tmp_path, name):
    """Without root: one line saying so, exit 2, nothing written."""
    proc = subprocess.run(unprivileged([str(BIN / "magnet"), "experiment", name, "--quick",
                                        "--out", str(tmp_path / "r")]), capture_output=True)
    proc.stderr_text = proc.stderr.decode()
    assert_clean_error(proc, "needs root")
    assert not (tmp_path / "r").exists()
