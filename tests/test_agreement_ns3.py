"""The ns-3 side of cross=tcp:4 against a committed agreement study (experiments/agreement_ns3.py)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from magnet.experiments import agreement_ns3, common
from magnet.replay import engines

from .conftest import require

pytestmark = pytest.mark.cpu           # nothing real-time: `make test` runs it beside others

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
    measured = common.HostLags(9_900, 7_300, 17_000, "measured")             # a study's own
    assert common.engine_options("ns-3", "linux", measured) == {"tcp_model": "linux", "reader_wakeup_ns": 17_000,
                                                                "ack_lag_ns": 9_900, "reply_lag_ns": 7_300}
    assert common.engine_options("ns-3", "ns3", measured) == {"tcp_model": "ns3"}
    assert common.engine_options("tcp", "linux", measured) == {}


def test_host_lags_are_given_recorded_and_read_back(tmp_path):
    """--host-lags ACK,REPLY,WAKEUP (ns, or with a unit) or `constants`; a study's record
    (host-lags.json) reads back as written, and names the study it came from; no record is
    the constants, saying so; a record that cannot be read is a StudyError."""
    given = common.host_lags_arg("9900,7.3us,0.017ms")
    assert (given.ack_lag_ns, given.reply_lag_ns, given.reader_wakeup_ns, given.source) == (9900, 7300, 17000, "given")
    assert given.argv() == ["--reader-wakeup", "17000ns", "--ack-lag", "9900ns", "--reply-lag", "7300ns"]
    constants = common.host_lags_arg("constants")
    assert constants.options() == common.HostLags().options() == {
        "reader_wakeup_ns": common.HOST_READER_WAKEUP_NS, "ack_lag_ns": common.HOST_ACK_LAG_NS,
        "reply_lag_ns": common.HOST_REPLY_LAG_NS}
    for bad in ("1,2", "1,2,x", "1,2,-3us"):
        with pytest.raises(ValueError):
            common.host_lags_arg(bad)
    measured = common.HostLags(9_885, 7_331, 16_925, "measured", how="3 runs of 6 s", runs=[{"run": 1}])
    measured.write(tmp_path / common.LAGS_FILE)
    back = common.HostLags.read(tmp_path)
    assert back == common.HostLags(9_885, 7_331, 16_925, "measured", how="3 runs of 6 s", runs=[{"run": 1}],
                                   read_from=str(tmp_path))
    assert common.HostLags.recorded(tmp_path) == back
    assert f"as the study in `{tmp_path}` recorded them" in back.provenance()
    assert "measured on Linux over linkem at the study's start (3 runs of 6 s)" in back.provenance()
    none = common.HostLags.recorded(tmp_path / "older")
    assert none.options() == constants.options() and "recorded none" in none.provenance()
    assert common.HostLags.read(tmp_path / "older") is None
    (tmp_path / common.LAGS_FILE).write_text('{"ack_lag_ns": "fast"}')
    with pytest.raises(common.StudyError, match="host-lags.json"):
        common.HostLags.read(tmp_path)


def test_map_takes_each_linux_studys_recorded_lags(tmp_path):
    """--map --spread: ns-3's runs against runs.csv get the lags --against recorded, those
    against spread/runs.csv the lags spread/ recorded; the README names both; a study without
    a record gets the constants."""
    against = tmp_path / "study"
    (against / "spread").mkdir(parents=True)
    shutil.copyfile(COMMITTED / "runs.csv", against / "runs.csv")
    shutil.copyfile(COMMITTED / "spread" / "runs.csv", against / "spread" / "runs.csv")
    argv = ["--map", "--spread", "--settings", "wan", "--workloads", "paper", "--against", str(against)]
    args = agreement_ns3.options(argv)
    assert args.lags.options() == args.spread_lags.options() == common.HostLags().options()
    assert "recorded none" in agreement_ns3.lags_note(args)
    common.HostLags(9_900, 7_300, 17_000, "measured").write(against / common.LAGS_FILE)
    common.HostLags(10_100, 7_500, 21_000, "measured").write(against / "spread" / common.LAGS_FILE)
    args = agreement_ns3.options(argv)
    linux = pd.concat([agreement_ns3.linux_runs(args, "map"), agreement_ns3.linux_runs(args, "spread")])
    assert dict(zip(linux["study"], linux["lags"])) == {"map": "9900,7300,17000", "spread": "10100,7500,21000"}
    note = agreement_ns3.lags_note(args)
    assert "read 17 us after" in note and "Against spread/runs.csv" in note and "read 21 us after" in note
    assert agreement_ns3.options([*argv, "--tcp-model", "ns3"]).lags is None


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
