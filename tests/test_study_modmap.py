"""The modulation-map study (experiments/modmap.py), run for real on a few settings:
ns-3 chains, and real TCP chains over emulated paths."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from magnet.experiments import ftp_server, modmap
from magnet.replay import engines

from .conftest import require, run_magnet

COLUMNS = ["engine", "workload", "rtt_ms", "rtt_measured_ms", "rate_bps", "loss_pct", "cross_load",
           "cc", "nagle", "stack", "mean_size", "mean_gap_s", "throughput_bps", "bw_vs_app_pct",
           "retrans_bytes", "writes_split", "writes_coalesced", "submss_segments"]


def require_engine(name: str) -> None:
    why = engines.unavailable(name)
    require(why is None, f"{name}: {why}")


def run_study(out, *options) -> pd.DataFrame:
    proc = run_magnet("experiment", "modmap", "--out", out, "--workloads", "paper", "--base-runs", "1",
                      *options)
    assert proc.returncode == 0, proc.stderr_text
    for name in ("README.md", "map.csv", "summary.csv", "heatmap.png"):
        assert (out / name).stat().st_size > 0, name
    table = pd.read_csv(out / "map.csv")
    assert set(COLUMNS) <= set(table.columns), set(COLUMNS) - set(table.columns)
    return table


@pytest.mark.cpu                 # ns-3 alone: nothing real-time
def test_ns3_map_a_smaller_mtu_later_splits_every_segment(tmp_path):
    require_engine("ns-3")
    table = run_study(tmp_path / "m", "--engines", "ns-3", "--settings", "base,later-mtu=576",
                      "--duration", "4", "--stacks", "3")
    assert set(table["engine"]) == {"ns-3"}
    base = table[table["setting"] == "base"].set_index("stack")
    small = table[table["setting"] == "later-mtu=576"].set_index("stack")
    assert list(base.index) == [0, 1, 2, 3] and base.loc[0, "mean_size"] == 3284
    # Stack 1 runs the same path in both settings; from stack 2 on the MTU is 576, so
    # every full 1448-byte segment of stack 1 is split, and sizes fall below 536 + 1.
    assert small.loc[1, "mean_size"] == base.loc[1, "mean_size"]
    assert small.loc[2, "mean_size"] <= 536 < base.loc[2, "mean_size"]
    assert small.loc[2, "writes_split"] > 0 == base.loc[2, "writes_split"]
    assert np.isfinite(base.loc[1:, "rtt_measured_ms"]).all()
    assert (base.loc[1:, "rtt_measured_ms"] >= 59).all()            # a 60 ms path, as measured by TCP
    readme = (tmp_path / "m" / "README.md").read_text()
    assert "later-mtu=576" in readme and "Table II" in readme


def test_tcp_map_runs_real_stacks_over_the_emulated_path(tmp_path):
    require_engine("tcp")
    table = run_study(tmp_path / "m", "--engines", "tcp", "--settings", "base", "--duration", "3",
                      "--stacks", "2")
    stacks = table[table["stack"] > 0]
    assert list(stacks["stack"]) == [1, 2]
    # The emulator applied the 60 ms round trip: the senders' own TCP measured it.
    assert (stacks["rtt_measured_ms"] > 55).all() and (stacks["rtt_measured_ms"] < 90).all()
    assert (stacks["mean_size"] <= 1448).all() and (stacks["mean_size"] > 0).all()


def test_live_ftp_workload_into_a_new_work_directory(tmp_path):
    """vsftpd's capture is the first thing written into --work, which need not exist yet."""
    require_engine("tcp")
    why = ftp_server.unavailable()
    require(why is None, f"live FTP capture: {why}")
    work = tmp_path / "not" / "yet"
    proc = run_magnet("experiment", "modmap", "--out", tmp_path / "m", "--engines", "tcp", "--settings",
                      "base", "--workloads", "vsftpd", "--base-runs", "1", "--stacks", "2",
                      "--file-size", "1MB", "--work", work)
    assert proc.returncode == 0, proc.stderr_text
    assert (work / "vsftpd.magnet").stat().st_size > 0
    table = pd.read_csv(tmp_path / "m" / "map.csv")
    assert set(table["workload"]) == {"vsftpd"} and list(table["stack"]) == [0, 1, 2]


@pytest.mark.cpu                 # nothing real-time: `make test` runs it beside others
def test_bad_options_are_one_line(tmp_path):
    for options in (["--settings", "nosuch"], ["--engines", "ns-4"], ["--workloads", "x"]):
        proc = run_magnet("experiment", "modmap", "--out", tmp_path, *options)
        assert proc.returncode == 2
        lines = [line for line in proc.stderr_text.splitlines() if line.strip()]
        assert "Traceback" not in proc.stderr_text and lines[-1].count(options[1]) >= 1


def test_settings_each_change_one_factor():
    base = modmap.scenario_of(modmap.SETTINGS[0], 4, 1)
    for setting in modmap.SETTINGS[1:]:
        changed = modmap.scenario_of(setting, 4, 1)
        assert changed != base, setting.name
