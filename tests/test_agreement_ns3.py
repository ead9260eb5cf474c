"""The ns-3 side of cross=tcp:4 against a committed agreement study (experiments/agreement_ns3.py)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from magnet.experiments import agreement_ns3, common
from magnet.replay import engines

from .conftest import require

COMMITTED = Path(__file__).resolve().parents[1] / "experiments" / "results" / "agreement"


def test_vsftpd_standin_is_the_captured_demands_shape():
    d = agreement_ns3.vsftpd_standin()
    assert len(d) == 62 and d.total_bytes == 4_000_000
    assert abs(d.size.mean() - 64516.1) < 0.1
    assert abs(pd.Series(d.time_ns).diff().mean() / 1e9 - 0.0203) < 1e-9


def test_missing_linux_runs_is_a_usage_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "magnet.experiments.agreement_ns3", "--against", str(tmp_path),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert proc.returncode == 2 and "--against" in proc.stderr and "runs.csv" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_quick_run_compares_every_cell(tmp_path):
    why = engines.unavailable("ns-3")
    require(why is None, f"ns-3: {why}")
    out = tmp_path / "out"
    assert agreement_ns3.main(["--quick", "--out", str(out), "--against",
                               str(COMMITTED)]) == 0
    cells = pd.read_csv(out / "cells.csv")
    assert len(cells) == 12 and set(cells["workload"]) == {"paper", "variable", "vsftpd"}
    cross = pd.read_csv(out / "cross.csv")
    assert list(cross["engine"]) == ["ns-3", "tcp"] and cross["queue_p50"].between(0, 100).all()
    chains = pd.read_csv(out / "chains.csv")
    assert list(chains["stack"]) == [1, 2] and list(chains["lead_s"]) == [1.0, 2.5]
    assert (out / "phase.csv").is_file() and "Linux not re-run" in (out / "README.md").read_text()


def test_map_rescores_a_cell_against_the_committed_linux_runs(tmp_path):
    why = engines.unavailable("ns-3")
    require(why is None, f"ns-3: {why}")
    out = tmp_path / "out"
    assert agreement_ns3.main(["--map", "--settings", "base", "--workloads", "paper", "--out", str(out),
                               "--against", str(COMMITTED)]) == 0
    cells = pd.read_csv(out / "map-cells.csv")
    assert list(cells["stack"]) == [1, 2, 3, 4] and set(cells["setting"]) == {"base"}
    ns3 = pd.read_csv(out / "map-runs.csv").set_index("stack")
    linux = pd.read_csv(COMMITTED / "runs.csv")
    linux = linux[(linux["engine"] == "tcp") & (linux["setting"] == "base") & (linux["workload"] == "paper")]
    linux = linux.set_index("stack")
    for short, col in agreement_ns3.METRICS.items():      # ns-3 over Linux, stack by stack
        expected = 100 * (ns3.loc[cells["stack"], col].values / linux.loc[cells["stack"], col].values - 1)
        assert cells[f"{short}_diff_pct"].values == pytest.approx(expected, abs=1e-9)
    halved = agreement_ns3.score(ns3.reset_index(), linux.reset_index().assign(
        study="map", demand=agreement_ns3.SYNTHETIC, throughput_bps=linux["throughput_bps"].values * 2))
    assert (halved["throughput_diff_pct"] < -40).all() and not halved["agrees"].any()
    assert "Linux not re-run" in (out / "README.md").read_text()
    assert f"read {common.HOST_READER_WAKEUP_NS / 1000:g} us after" in (out / "README.md").read_text()
    assert f"a pure ACK {common.HOST_REPLY_LAG_NS / 1000:g} us after" in (out / "README.md").read_text()


def test_studies_give_ns3s_linux_profile_the_hosts_lags():
    """The studies comparing ns-3 with Linux on this host run ns-3's hosts with their measured
    lags: the reader's wake-up, the ACK lag, the reply lag (the linux model only; Linux's own
    runs take no option)."""
    assert common.engine_options("ns-3", "linux") == {"tcp_model": "linux",
                                                      "reader_wakeup_ns": common.HOST_READER_WAKEUP_NS,
                                                      "ack_lag_ns": common.HOST_ACK_LAG_NS,
                                                      "reply_lag_ns": common.HOST_REPLY_LAG_NS}
    assert common.engine_options("ns-3", "ns3") == {"tcp_model": "ns3"}
    assert common.engine_options("tcp", "linux") == {}


def test_combined_takes_the_medians_where_the_spread_study_has_them():
    single, medians = pd.read_csv(COMMITTED / "cells.csv"), pd.read_csv(COMMITTED / "spread" / "cells.csv")
    both = agreement_ns3.combined(single, medians)
    assert len(both) == len(single) == 116 and not both.duplicated(["setting", "workload", "stack"]).any()
    def wan_paper_4(table):
        return table[(table["setting"] == "wan") & (table["workload"] == "paper") & (table["stack"] == 4)].iloc[0]
    assert wan_paper_4(both)["throughput_diff_pct"] == wan_paper_4(medians)["throughput_diff_pct"] \
        != wan_paper_4(single)["throughput_diff_pct"]                       # spread/'s, not run 1's
    elsewhere = ~single["setting"].isin(set(medians["setting"]))
    assert int(both["agrees"].sum()) == int(single[elsewhere]["agrees"].sum() + medians["agrees"].sum())
