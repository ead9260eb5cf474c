"""magnet experiment fidelity --quick on one application (python's http.server and curl) and
one path, really run: the application across magnet path on A and on B, all six predictors
replayed by both engines.  Needs root, the BPF capture, tcpdump, curl and ns-3; skips with
the reason without them (fails under CI)."""
from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest

import magnetlib
from magnet.experiments import demo, fidelity
from magnet.experiments import common
from magnet.experiments.common import HOST_ACK_LAG_NS, HOST_READER_WAKEUP_NS, HOST_REPLY_LAG_NS

LAGS = (f"--reader-wakeup {HOST_READER_WAKEUP_NS}ns --ack-lag {HOST_ACK_LAG_NS}ns "
        f"--reply-lag {HOST_REPLY_LAG_NS}ns")
from magnet.experiments.apps import RECIPES, RecipeError
from magnet.replay import engines, linkem, wire
from magnetlib import app_metrics

from .conftest import assert_clean_error, require, require_root, require_tool, run_magnet

APP, SITE = "http-python", "60ms-10M"


def test_the_study_work_is_the_recipes_parameters():
    for app, work in fidelity.WORK.items():
        recipe = fidelity.recipe_of(app)
        assert recipe.work() == {**RECIPES[app].work(), **work} and recipe is not RECIPES[app]
        assert fidelity.recipe_of(app, full_work=True) is RECIPES[app]
    assert RECIPES["nginx-bulk"].work() == {"size": 4_000_000}            # the suite's own, untouched
    with pytest.raises(RecipeError, match="no work parameter"):
        RECIPES["memcached"].with_work(size=1)


def test_ns3_replays_get_the_linux_profile_and_this_hosts_lags(tmp_path):
    """The demand-ns3 predictor replays with `--tcp-model linux` and this host's measured lags
    (`--reader-wakeup --ack-lag --reply-lag`), and the README names them from the replay's log."""
    options = fidelity.replay_options("ns3")
    assert options == ["--seed", "1", "--tcp-model", "linux", *LAGS.split()]
    assert fidelity.replay_options("tcp", seed=3) == ["--seed", "3"]
    assert fidelity.replay_options("ns3", common.HostLags(9_900, 7_300, 17_000, "measured"), seed=2) == [
        "--seed", "2", "--tcp-model", "linux", "--reader-wakeup", "17000ns", "--ack-lag", "9900ns",
        "--reply-lag", "7300ns"]
    run = fidelity.Run("redis-paced", "60ms-10M", "demand-ns3", 1, tmp_path)
    (tmp_path / "replay.log").write_text("$ " + " ".join(["magnet", "replay", "ns3", "d.csv", *options,
                                                          "-o", "x"]) + "\nmore\n")
    assert fidelity.ns3_options([run]) == f"--seed 1 --tcp-model linux {LAGS}"
    assert fidelity.ns3_seed([run]) == 1
    (tmp_path / "replay.log").write_text("$ magnet replay ns3 d.csv --tcp-model linux -o x\n")
    assert fidelity.ns3_seed([run]) == 1                 # a study made before it gave the seed
    (tmp_path / "replay.log").write_text("$ magnet replay ns3 d.csv --seed 7 -o x\n")
    assert fidelity.ns3_seed([run]) == 7


def test_a_studys_seed_is_its_paths_in_both_engines():
    """--seed S is every path's seed, the application's runs and both engines' replays alike;
    --rerun keeps the study's own unless given."""
    site = fidelity.SITES["30ms-20M-loss"]
    assert site.scenario(5).seed == 5 and site.scenario().seed == 1
    assert fidelity.options(["--seed", "5"]).seed == 5 and fidelity.options([]).seed == 1
    assert fidelity.options(["--work", "w", "--rerun", "demand-ns3"]).seed is None
    assert fidelity.options(["--work", "w", "--rerun", "demand-ns3", "--seed", "3"]).seed == 3
    # truth runs draw their own losses, the first as the replays do
    assert [fidelity.truth_seed(5, k) for k in (1, 2, 3)] == [5, 6, 7]


@pytest.fixture(scope="module")
def study(request):
    """The fidelity study the demo runs (conftest's demo_quick, run once for this file and
    tests/test_study_multistack.py::test_demo_quick): `fidelity --quick --apps http-python
    --paths 60ms-10M --runs 2`, its traces kept; (the demo's process, --out, --work)."""
    require_root()
    for tool in ("tcpdump", "curl", "ip"):
        require_tool(tool)
    why = linkem.unavailable() or wire.bpf_unavailable() or engines.unavailable("ns-3")
    require(why is None, f"namespaces, the BPF capture or ns-3 unavailable: {why}")
    for engine in ("tcp", "ns3"):
        why = fidelity.replay_unavailable(engine)
        require(why is None, why or "")
    assert demo.FIDELITY == (APP, SITE)                  # the demo's step 6 is this study
    proc, out, work = request.getfixturevalue("demo_quick")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, out / "fidelity", work


def test_every_predictor_ran_on_real_captures(study):
    _, out, work = study
    runs = pd.read_csv(out / "runs.csv")
    # fidelity.main's exit status is 1 exactly when a run is not ok (the demo prints its line)
    assert (runs["status"] == "ok").all(), runs[runs["status"] != "ok"].to_string()
    assert set(runs["kind"]) == {"source", "truth", *fidelity.PREDICTORS}
    rows = pd.read_csv(out / "fidelity.csv")
    for predictor in fidelity.PREDICTORS:
        mine = rows[rows["predictor"] == predictor]
        assert len(mine) == 2 and (mine["status"] == "ok").all(), predictor     # one row per truth run
        assert mine["completion_err_median"].notna().all() and mine["ks_size"].notna().all()
        client, server = (work / APP / SITE / predictor / f"{side}.magnet" for side in ("client", "server"))
        for side, trace in (("client", client), ("server", server)):
            with magnetlib.open(trace) as t:
                assert t.meta.hostname == side
                assert t.scan.counts.get(magnetlib.Event.DEV_RECV, 0) > 0, (predictor, side)
    assert (work / APP / "source" / "a.pcap").stat().st_size > 100_000           # tcpdump's, of 1 MB
    readme = (out / "README.md").read_text()
    assert readme.count("| truth |") >= 1
    assert f"predicted by 6 predictors ({', '.join(fidelity.PREDICTORS)})" in readme
    # --quick measures no lags: the constants, recorded in --work and --out, and said so
    for where in (work, out):
        lags = common.HostLags.read(where)
        assert (lags.options(), lags.source, lags.how) == (common.HostLags().options(), "constants",
                                                           "--quick does not measure them")
    assert "reader wake-up 29.184 us: experiments/common.py's" in readme and "--quick does not measure" in readme
    assert (out / "heatmap.png").exists() and (out / f"cdf-{APP}.png").exists()


def test_metrics_come_from_those_captures(study):
    """The csv's numbers are those of the traces; measured against path A's capture instead
    of B's truth they change; and the truth on B is not the source on A."""
    _, out, work = study
    rows = pd.read_csv(out / "fidelity.csv")
    site = work / APP / SITE
    truth = [app_metrics.profile(str(site / f"truth-{k}" / "t.client.magnet"),
                                 str(site / f"truth-{k}" / "t.server.magnet")) for k in (1, 2)]
    source = app_metrics.profile(str(work / APP / "source" / "t.client.magnet"),
                                 str(work / APP / "source" / "t.server.magnet"))
    pred = app_metrics.profile(str(site / "demand-tcp" / "client.magnet"), str(site / "demand-tcp" / "server.magnet"))
    row = rows[(rows["predictor"] == "demand-tcp") & (rows["run"].astype(str) == "1")].iloc[0]
    again = app_metrics.compare(pred, truth[0])
    for metric in ("ks_size", "ks_gap", "completion_err_median", "throughput_err"):
        assert again[metric] == pytest.approx(row[metric], nan_ok=True), metric
    on_a = app_metrics.compare(pred, source)
    assert abs(on_a["completion_err_median"] - again["completion_err_median"]) > 0.5
    # 1 MB at 10 Mbit/s over 60 ms takes over 0.8 s; at 100 Mbit/s over 2 ms, a tenth of that
    a_to_b = app_metrics.compare(source, truth[0])
    assert np.median(truth[0].completion_s) > 0.8 > 4 * np.median(source.completion_s)
    assert a_to_b["completion_err_median"] > 0.7 and a_to_b["ks_gap"] > 0.5


def test_reanalyse_measures_the_kept_runs_again(study, tmp_path):
    """--reanalyse runs nothing: the same rows from the runs kept in --work, and a README that
    says so and names the ns-3 options the runs were made with."""
    _, out, work = study
    again = tmp_path / "again"
    assert fidelity.main(["--reanalyse", "--apps", APP, "--paths", SITE, "--runs", "2", "--work", str(work),
                          "--out", str(again)]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(out / "fidelity.csv"), pd.read_csv(again / "fidelity.csv"))
    text = (again / "README.md").read_text()
    assert "measured again (--reanalyse)" in text
    given = f"ns-3 replays: `magnet replay ns3 --seed 1 --tcp-model linux {LAGS}`"
    assert given in (out / "README.md").read_text()
    assert given in text


def test_rerun_replays_only_the_named_ns3_predictor(study, tmp_path):
    """--rerun demand-ns3 on a copy of the kept study: that predictor's directory replayed
    again (a file left in it is gone, its replay.log new), its row of runs.csv replaced and
    every other row and run as it was; the same ns-3 gives the same rows of fidelity.csv."""
    _, out, kept = study
    work = tmp_path / "work"
    shutil.copytree(kept, work)
    site = work / APP / SITE
    (site / "demand-ns3" / "stale").write_text("from the earlier run")
    # A time no run takes marks the row to be replaced (its own time could repeat to 0.01 s).
    table = pd.read_csv(work / "runs.csv", dtype=str, keep_default_na=False)
    table.loc[table["kind"] == "demand-ns3", "seconds"] = "999.0"
    table.to_csv(work / "runs.csv", index=False)
    untouched = {p: p.stat().st_mtime_ns for p in site.rglob("*") if p.is_file() and "demand-ns3" not in p.parts}
    log = site / "demand-ns3" / "replay.log"
    before_log, before_runs = log.stat().st_mtime_ns, pd.read_csv(work / "runs.csv")
    again = tmp_path / "again"
    assert fidelity.main(["--rerun", "demand-ns3", "--apps", APP, "--paths", SITE, "--runs", "2",
                          "--work", str(work), "--out", str(again)]) == 0
    assert not (site / "demand-ns3" / "stale").exists() and log.stat().st_mtime_ns > before_log
    assert f"--seed 1 --tcp-model linux {LAGS}" in log.read_text().splitlines()[0]     # the study's seed
    assert {p: p.stat().st_mtime_ns for p in untouched} == untouched
    runs = pd.read_csv(work / "runs.csv")
    mine = (runs["kind"] == "demand-ns3").to_numpy()
    assert mine.sum() == 1 and runs["status"][mine].item() == "ok"
    pd.testing.assert_frame_equal(runs[~mine], before_runs[~mine])
    assert before_runs["seconds"][mine].item() == 999 and runs["seconds"][mine].item() < 999    # its own time, new
    pd.testing.assert_frame_equal(pd.read_csv(out / "fidelity.csv"), pd.read_csv(again / "fidelity.csv"))
    assert "1 of the runs (demand-ns3) re-run (--rerun)" in (again / "README.md").read_text()


def test_rerun_takes_the_lags_the_study_recorded(study, tmp_path):
    """--rerun replays ns-3 with the host lags the study recorded in --work (host-lags.json),
    and the README and --out's record say so; a study that recorded none gets the constants."""
    _, _, kept = study
    work = tmp_path / "work"
    shutil.copytree(kept, work)
    common.HostLags(9_900, 7_300, 17_000, "measured", how="3 runs of 6 s").write(work / common.LAGS_FILE)
    log = work / APP / SITE / "demand-ns3" / "replay.log"

    def rerun(name, *given):
        assert fidelity.main(["--rerun", "demand-ns3", "--apps", APP, "--paths", SITE, "--runs", "2",
                              "--work", str(work), "--out", str(tmp_path / name), *given]) == 0
        return log.read_text().splitlines()[0], (tmp_path / name / "README.md").read_text()
    first, readme = rerun("measured")
    assert "--tcp-model linux --reader-wakeup 17000ns --ack-lag 9900ns --reply-lag 7300ns" in first
    assert "reader wake-up 17 us: this host's lags, measured on Linux over linkem at the study's start " \
           f"(3 runs of 6 s); as the study in `{work}` recorded them" in readme
    assert common.HostLags.read(tmp_path / "measured").reader_wakeup_ns == 17_000
    (work / common.LAGS_FILE).unlink()            # a study made before studies measured them
    first, readme = rerun("none")
    assert f"--tcp-model linux {LAGS}" in first and f"the study in `{work}` recorded none" in readme
    first, readme = rerun("seed", "--seed", "2")              # a seed given: the study's replaced
    assert "--seed 2 --tcp-model" in first and "`magnet replay ns3 --seed 2 --tcp-model linux" in readme


def test_reanalyse_counts_the_predictors_the_study_ran(study, tmp_path):
    """A study with two predictors, measured again under the default --predictors (all six):
    the README counts and names the two it ran."""
    _, _, kept = study
    work = tmp_path / "work"
    shutil.copytree(kept, work)
    runs = pd.read_csv(work / "runs.csv", dtype=str, keep_default_na=False)
    runs[runs["kind"].isin(["source", "truth", "demand-tcp", "demand-ns3"])].to_csv(work / "runs.csv", index=False)
    assert fidelity.main(["--reanalyse", "--apps", APP, "--paths", SITE, "--runs", "2", "--work", str(work),
                          "--out", str(tmp_path / "again")]) == 0
    readme = (tmp_path / "again" / "README.md").read_text()
    assert "predicted by 2 predictors (demand-tcp, demand-ns3)" in readme and "6 predictors" not in readme
    assert set(pd.read_csv(tmp_path / "again" / "summary.csv")["predictor"]) == {"truth", "demand-tcp", "demand-ns3"}


@pytest.mark.cpu                 # refusals before any replay: nothing real-time
def test_rerun_refuses_what_it_cannot_rerun(tmp_path):
    """One line each: a real-time predictor, no --work, a directory that holds no study, a
    study without runs of the predictor (the checks before any replay need no root)."""
    assert_clean_error(run_magnet("experiment", "fidelity", "--work", tmp_path, "--rerun", "demand-tcp"),
                       "--rerun demand-tcp", "real-time")
    assert_clean_error(run_magnet("experiment", "fidelity", "--rerun", "demand-ns3"), "--rerun", "--work")
    assert_clean_error(run_magnet("experiment", "fidelity", "--work", tmp_path, "--rerun", "demand-ns3",
                                  "--reanalyse"), "--rerun", "--reanalyse")
    assert_clean_error(run_magnet("experiment", "fidelity", "--work", tmp_path, "--rerun", "nosuch"),
                       "--rerun 'nosuch'")
    assert_clean_error(run_magnet("experiment", "fidelity", "--work", tmp_path, "--rerun", "demand-ns3",
                                  "--host-lags", "1,2,3"), "--host-lags", "recorded")
    assert_clean_error(run_magnet("experiment", "fidelity", "--host-lags", "1,2"), "--host-lags '1,2'")
    if fidelity.replay_unavailable("ns3") is None:
        for work in (tmp_path, tmp_path / "none"):
            proc = run_magnet("experiment", "fidelity", "--work", work, "--rerun", "demand-ns3")
            assert_clean_error(proc, f"{work / 'runs.csv'}", "not a fidelity study's runs")
        (tmp_path / "runs.csv").write_text("app,path,kind,run,status,seconds,work\n"
                                           f"{APP},A,source,1,ok,1.5,\n")
        assert_clean_error(run_magnet("experiment", "fidelity", "--work", tmp_path, "--rerun", "demand-ns3"),
                           "no demand-ns3 runs")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.csv"]          # nothing made


def test_agreement_suite_reads_the_kept_runs(study, tmp_path):
    """magnet experiment agreement --suite on the real runs: ns-3 against Linux from the same
    traces app_metrics reads; the one-packet-per-request HTTP exchange has a round trip near
    the path's 60 ms in both engines."""
    from magnet.experiments import agreement
    _, _, work = study
    assert agreement.main(["--suite", str(work), "--out", str(tmp_path)]) == 0
    row = pd.read_csv(tmp_path / "suite" / "suite.csv").iloc[0]
    assert (row.app, row.path, row.status) == (APP, SITE, "ok")
    site = work / APP / SITE
    for engine, kind in (("ns3", "demand-ns3"), ("tcp", "demand-tcp")):
        totals = app_metrics.totals(app_metrics.profile(str(site / kind / "client.magnet"),
                                                        str(site / kind / "server.magnet")))
        for metric in ("size", "gap", "throughput", "RTT", "completion", "retrans"):
            assert row[f"{metric}_{engine}"] == pytest.approx(totals[metric]), (engine, metric)
        assert 60 <= totals["RTT"] < 75, engine
    assert row.RTT_diff_pct == pytest.approx(100 * (row.RTT_ns3 / row.RTT_tcp - 1))
    readme = (tmp_path / "suite" / "README.md").read_text()
    assert "## The suite's applications" in readme
    assert f"`{work}`: ACK lag 10.245 us, reply lag 7.812 us, reader wake-up 29.184 us, constants " \
           "(--quick does not measure them)" in readme
    assert f"The seed of each study's ns-3 replays: `{work}` 1." in readme
