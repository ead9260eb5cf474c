"""Study 3 (loss): events lost and CPU use against buffer size and drain delay."""
from __future__ import annotations

import os
import subprocess

import pandas as pd
import pytest

from .capture_study import run_quick
from .conftest import BIN, assert_clean_error, require_root


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    return run_quick("loss", tmp_path_factory.mktemp("loss"), "iperf3")


def test_no_loss_with_a_big_buffer_and_loss_with_a_tiny_one(quick):
    points = pd.read_csv(quick / "points.csv")
    captured = points[points.buffer != "none"]
    assert set(captured.buffer) == {"16M", "256K", "16K"}
    big = captured[captured.buffer == "16M"]
    assert (big.lost_buffer_full == 0).all()
    assert (big.loss_pct < 0.05).all()                      # only runs the kernel skipped, if any
    assert (captured[captured.buffer == "16K"].loss_pct > 10).all()
    auto = captured[captured.delay == "auto"].set_index("buffer").loss_pct
    assert auto["16M"] <= auto["256K"] <= auto["16K"]
    assert (captured.recorded > 10_000).all()               # at saturation, every layer
    assert (points[points.buffer == "none"].gbps > 0.1).all()


def test_every_point_accounts_for_every_event(quick):
    """recorded + LOST = the kernel's count, = magnet-read's, and device events = the veths' counters."""
    captured = pd.read_csv(quick / "points.csv").query("buffer != 'none'")
    assert (captured.recorded + captured.lost == captured.occurred).all()
    assert (captured.lost == captured.tool_lost).all()
    assert captured.dev_check_ok.all(), captured[["buffer", "delay", "dev_diff", "dev_packets"]]
    assert (captured.dev_packets > 10_000).all()


def test_cpu_and_figures(quick):
    table = pd.read_csv(quick / "table.csv")
    assert ((table.cpu_pct > 0) & (table.cpu_pct <= 100 * os.cpu_count() + 1)).all()
    assert (table.tool_cpu_pct >= 0).all() and (table.delay_us >= 1000).all()
    assert (table.transfer_cpu_pct > table.tool_cpu_pct).all()   # iperf3 and the stack cost CPU too
    for name in ("fig6_loss.png", "fig7_cpu.png"):
        assert (quick / name).stat().st_size > 10_000
    assert "Accounting: 6/6 runs" in (quick / "README.md").read_text()


def test_missing_iperf3_is_one_line(tmp_path):
    require_root()
    env = {**os.environ, "PATH": str(BIN)}                  # no iperf3 (nor anything else) there
    proc = subprocess.run([str(BIN / "magnet"), "experiment", "loss", "--quick", "--out", str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=60)
    proc.stderr_text = proc.stderr
    assert_clean_error(proc, "iperf3 is not installed")
    assert not any(tmp_path.iterdir())                      # no partial results
